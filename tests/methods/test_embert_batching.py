"""EMBERT's batches on real text (CMeKG + medical consultations, bert-base-chinese word pieces): entity replacement
keeps its label and every other mention aligned, ES labels and BEM masks on hand-checked entities."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from kgplm.methods.embert import EmbertCollator, EmbertExample, EntityLexicon, build_entity_segments, build_thesaurus
from kgplm.text import EntityLinker, Masker, build_corpus, char_spans_to_token_spans, load_tokenizer
from kgplm.training.trainer import example_seeds

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def real(cmekg_store, shared_data, tmp_path_factory):
    """CMeKG's thesaurus, entity segments and lexicon; 300 consultations linked to CMeKG (one chunk each)."""
    store = cmekg_store
    tokenizer = load_tokenizer(shared_data / "vocab" / "bert-base-chinese" / "vocab.txt")
    linker = EntityLinker(store)
    thesaurus = build_thesaurus(store)
    segments = build_entity_segments(store, linker=linker)
    with open(shared_data / "corpus" / "medical_dialogue" / "sample_IM_5000-6000.utf8.csv", encoding="utf-8") as handle:
        texts = [row["ask"].replace("\n", " ") for row in list(csv.DictReader(handle))[:400]]
    texts = [text for text in texts if len(tokenizer(text)["input_ids"]) <= 250][:300]
    dataset = build_corpus(
        texts,
        store=store,
        tokenizer=tokenizer,
        output_dir=tmp_path_factory.mktemp("corpus"),
        linker=linker,
        whole_word=False,
        max_length=256,
        progress=False,
    )
    assert len(dataset) == len(texts)  # one chunk per text
    lexicon = EntityLexicon(
        thesaurus,
        segments,
        tokenizer,
        store.primary_type_ids(),
        linker.count(texts),
        neighbors=store.adjacency(symmetric=True),
        max_entity_share=0.05,
    )
    return dict(
        store=store,
        tokenizer=tokenizer,
        thesaurus=thesaurus,
        segments=segments,
        lexicon=lexicon,
        texts=texts,
        dataset=dataset,
    )


def collator(real, **options) -> EmbertCollator:
    tokenizer = real["tokenizer"]
    settings = dict(
        lexicon=real["lexicon"],
        masker=Masker.from_tokenizer(tokenizer, "bert"),
        cls_token_id=tokenizer.cls_token_id,
        sep_token_id=tokenizer.sep_token_id,
        pad_token_id=tokenizer.pad_token_id,
        max_sequence_length=512,
    )
    settings.update(options)
    return EmbertCollator(**settings)


def glued(text: str, position: int) -> bool:
    """Latin letters or digits on both sides of ``position`` (the tokenizer makes one word of them)."""
    pair = text[position - 1 : position + 1] if 0 < position < len(text) else ""
    return len(pair) == 2 and pair.isascii() and pair.isalnum()


@pytest.mark.slow
def test_replacement_keeps_its_label_and_every_other_mention_aligned(real):
    """Every replacement, spliced as word pieces, equals tokenizing the edited text; other mentions keep
    their tokens and entities; consistent replacements are synonyms, inconsistent ones are not, nor KG
    neighbours of the original; every replacement is written in the script of the mention it replaces."""
    from kgplm.methods.embert.batching import is_han

    tokenizer, thesaurus, lexicon, store = real["tokenizer"], real["thesaurus"], real["lexicon"], real["store"]
    types = store.primary_type_ids()
    adjacency = store.adjacency(symmetric=True)
    rows = real["dataset"][:]
    batcher = collator(real, cecp_rate=1.0, use_bem=False)
    counts = {0: 0, 1: 0}
    same_type = checked_texts = 0
    for index, text in enumerate(real["texts"]):
        rng = np.random.default_rng([7, index])
        example = batcher.make_example(rows, index, rng)
        original_ids = np.asarray(rows["input_ids"][index])
        original_spans = np.asarray(rows["mention_spans"][index]).reshape(-1, 2)
        original_entities = np.asarray(rows["mention_entity_ids"][index])
        offsets = tokenizer(text, return_offsets_mapping=True)["offset_mapping"]
        char_spans = [(offsets[start][0], offsets[end - 1][1]) for start, end in original_spans.tolist()]
        replaced = dict(zip(example.replaced.tolist(), example.consistent.tolist()))
        # the edited text, and where each mention lies in it
        pieces, new_char_spans, cursor, shift = [], [], 0, 0
        for mention, (start, end) in enumerate(char_spans):
            surface = lexicon.names[example.mention_names[mention]] if mention in replaced else text[start:end]
            pieces += [text[cursor:start], surface]
            new_char_spans.append((start + shift, start + shift + len(surface)))
            shift += len(surface) - (end - start)
            cursor = end
        edited = "".join(pieces) + text[cursor:]
        latin_seam = any(
            glued(edited, start) or glued(edited, end)
            for mention, (start, end) in enumerate(new_char_spans)
            if mention in replaced
        )
        if not latin_seam:  # a Latin surface glued to Latin text would be one word piece sequence in the text
            encoded = tokenizer(edited, return_offsets_mapping=True)
            assert encoded["input_ids"] == example.input_ids.tolist(), (text, edited)
            assert (
                char_spans_to_token_spans(encoded["offset_mapping"], new_char_spans).tolist()
                == example.mention_spans.tolist()
            )
            checked_texts += 1
        for mention, (start, end) in enumerate(example.mention_spans.tolist()):
            old_start, old_end = original_spans[mention]
            entity = int(original_entities[mention])
            if mention not in replaced:
                assert example.input_ids[start:end].tolist() == original_ids[old_start:old_end].tolist()
                assert example.mention_entities[mention] == entity
                continue
            surface = lexicon.names[example.mention_names[mention]]
            old_char_start, old_char_end = char_spans[mention]
            assert is_han(surface) == is_han(text[old_char_start:old_char_end]), (text, surface)
            assert example.input_ids[start:end].tolist() == tokenizer(surface, add_special_tokens=False)["input_ids"]
            assert example.input_ids[start:end].tolist() != original_ids[old_start:old_end].tolist()
            own = {tuple(tokenizer(s, add_special_tokens=False)["input_ids"]) for s in thesaurus.synonyms(entity)}
            new_entity = int(example.mention_entities[mention])
            if replaced[mention] == 1:
                assert new_entity == entity and surface in thesaurus.synonyms(entity)
            else:
                assert new_entity != entity and surface in thesaurus.synonyms(new_entity)
                display = tokenizer(thesaurus.synonyms(new_entity)[0], add_special_tokens=False)["input_ids"]
                assert example.input_ids[start:end].tolist() != display  # another name, as a consistent one
                assert tuple(example.input_ids[start:end].tolist()) not in own
                assert adjacency[entity, new_entity] == 0  # no triple joins them, in either direction
                same_type += int(types[new_entity] == types[entity])
            counts[replaced[mention]] += 1
    # few mentions of these 300 questions have a synonym in their own script, and the cap (0.05) keeps
    # the most frequent ones from being replaced often: 29 replacements (11 inconsistent, 18 consistent)
    assert checked_texts > 250 and min(counts.values()) >= 8, (checked_texts, counts)
    total = counts[0] + counts[1]
    assert abs(counts[1] / total - 0.5) < 3 * (0.25 / total) ** 0.5  # both labels equally likely
    # same type unless no other entity of the type has a name in the mention's script (the documented fallback)
    assert same_type >= 0.8 * counts[0], (same_type, counts)


@pytest.mark.slow
def test_replacements_never_exceed_the_position_embeddings(real):
    rows = real["dataset"][:]
    lengths = [len(rows["input_ids"][i]) for i in range(len(real["texts"]))]
    batcher = collator(real, cecp_rate=1.0, use_bem=False, max_sequence_length=max(lengths))
    grew = 0
    for index in range(len(real["texts"])):
        example = batcher.make_example(rows, index, np.random.default_rng([3, index]))
        assert len(example.input_ids) <= max(lengths)
        grew += len(example.input_ids) > lengths[index]
    assert grew > 0


SENTENCE = "医生说是再生障碍性贫血，需要复查血常规。"


@pytest.mark.slow
def test_segmentation_labels_and_bidirectional_masks_on_a_hand_checked_entity(real):
    """再生障碍性贫血 = 再生障碍性 (adjective) + 贫血 (atomic): ES marks 性 and 血; BEM masks one part whole,
    keeps the other visible, and labels the masked one with the original word pieces."""
    tokenizer = real["tokenizer"]
    encoded = tokenizer(SENTENCE)
    mention = (5, 12)  # [CLS] 医 生 说 是 | 再 生 障 碍 性 贫 血 | ，
    assert tokenizer.convert_ids_to_tokens(encoded["input_ids"][mention[0] : mention[1]]) == list("再生障碍性贫血")
    rows = {
        "input_ids": [encoded["input_ids"]],
        "mention_spans": [[list(mention)]],
        "mention_entity_ids": [[real["store"].entity_id("再生障碍性贫血")]],
    }
    batcher = collator(real, use_cecp=False, bem_rate=1.0)
    directions = set()
    for step in range(12):
        batch = batcher(rows, example_seeds(0, step, np.arange(1)))
        es = batch["es_labels"][0].tolist()
        assert es[mention[0] : mention[1]] == [0, 0, 0, 0, 1, 0, 1]
        assert set(es[: mention[0]] + es[mention[1] :]) == {-100}
        (context,), (target,) = batch["bem_context_spans"].tolist(), batch["bem_target_spans"].tolist()
        assert {tuple(context), tuple(target)} == {(5, 10), (10, 12)}
        directions.add(tuple(target))
        labels, ids = batch["labels"][0], batch["input_ids"][0]
        assert labels[target[0] : target[1]].tolist() == encoded["input_ids"][target[0] : target[1]]
        assert (labels[context[0] : context[1]] == -100).all()
        assert ids[context[0] : context[1]].tolist() == encoded["input_ids"][context[0] : context[1]]
        assert batch.target_counts["bem"] == target[1] - target[0]
        assert batch.target_counts["es"] == 7
    assert directions == {(5, 10), (10, 12)}  # both directions occur


@pytest.mark.slow
def test_lexicon_maps_character_segments_to_word_pieces(real):
    lexicon, tokenizer = real["lexicon"], real["tokenizer"]
    row = lexicon.lookup(np.array(tokenizer("aplastic anemia", add_special_tokens=False)["input_ids"]))
    assert lexicon.names[row] == "aplastic anemia"
    pieces = tokenizer.convert_ids_to_tokens(lexicon.name_ids[row].tolist())
    # the last word piece of "aplastic" and of "anemia" end the two sub-entities; 贫血 starts at anemia's first piece
    ends = [
        index
        for index, piece in enumerate(pieces)
        if index + 1 == len(pieces) or not pieces[index + 1].startswith("##")
    ]
    assert lexicon.positives[row].tolist() == ends
    assert lexicon.split[row] == ends[0] + 1
    assert lexicon.lookup(np.array(tokenizer("不是名字的串", add_special_tokens=False)["input_ids"])) == -1
    anemia = lexicon.lookup(np.array(tokenizer("再生障碍性贫血", add_special_tokens=False)["input_ids"]))
    assert lexicon.positives[anemia].tolist() == [4, 6] and lexicon.split[anemia] == 5


@pytest.mark.slow
def test_examples_depend_only_on_their_own_seed(real):
    rows = real["dataset"][:16]
    batcher = collator(real)
    whole = batcher(rows, example_seeds(0, 5, np.arange(16)))
    part = batcher(real["dataset"][8:12], example_seeds(0, 5, np.arange(8, 12)))
    width = part["input_ids"].shape[1]
    assert (whole["input_ids"][8:12, :width] == part["input_ids"]).all()
    assert (whole["es_labels"][8:12, :width] == part["es_labels"]).all()
    assert isinstance(batcher.make_example(rows, 0, np.random.default_rng(0)), EmbertExample)


def test_random_entities_are_drawn_by_corpus_frequency_within_the_type(shared_data):
    """Inconsistent replacements: another entity of the type, in proportion to its mentions (uniformly
    without frequencies), written with a name other than its display name."""
    from kgplm import KGStore

    store = KGStore.from_rdf(REPO_ROOT / "graphs" / "toy_medical.ttl", show_progress=False)
    tokenizer = load_tokenizer(shared_data / "vocab" / "bert-base-chinese" / "vocab.txt")
    thesaurus, segments = build_thesaurus(store), build_entity_segments(store)
    diabetes, hypertension = store.entity_id("糖尿病"), store.entity_id("高血压")
    # diseases with a name besides the display name: 糖尿病肾病, 高血压, 脑卒中, 感冒 (视网膜病变 has none)
    others = {store.entity_id(name) for name in ("糖尿病肾病", "高血压", "脑卒中", "感冒")}
    frequencies = np.zeros(store.num_entities)
    frequencies[[diabetes, hypertension, store.entity_id("视网膜病变")]] = [9, 5, 7]
    rng = np.random.default_rng(0)
    weighted = EntityLexicon(thesaurus, segments, tokenizer, store.primary_type_ids(), frequencies)
    draws = [weighted.other_entity(diabetes, rng) for _ in range(200)]
    assert {entity for entity, _ in draws} == {hypertension}
    assert {weighted.names[name] for _, name in draws} == {"hypertension"}
    uniform = EntityLexicon(thesaurus, segments, tokenizer, store.primary_type_ids())
    drawn = [uniform.other_entity(diabetes, rng)[0] for _ in range(2000)]
    assert set(drawn) == others
    assert all(abs(drawn.count(entity) / 2000 - 0.25) < 0.04 for entity in others)
    # 二甲双胍's surfaces (metformin, 格华止 across owl:sameAs) are never drawn for it
    metformin = store.entity_id("二甲双胍")
    own = set(thesaurus.synonyms(metformin))
    assert all(uniform.names[uniform.other_entity(metformin, rng)[1]] not in own for _ in range(200))


@pytest.fixture(scope="module")
def toy(shared_data):
    """The toy graph's store, thesaurus and segments with bert-base-chinese word pieces (built once)."""
    from kgplm import KGStore

    store = KGStore.from_rdf(REPO_ROOT / "graphs" / "toy_medical.ttl", show_progress=False)
    tokenizer = load_tokenizer(shared_data / "vocab" / "bert-base-chinese" / "vocab.txt")
    return dict(
        store=store, tokenizer=tokenizer, thesaurus=build_thesaurus(store), segments=build_entity_segments(store)
    )


def _toy_lexicon(toy, **options) -> EntityLexicon:
    return EntityLexicon(
        toy["thesaurus"], toy["segments"], toy["tokenizer"], toy["store"].primary_type_ids(), **options
    )


def test_replacements_keep_the_mention_script_and_skip_kg_neighbours(toy):
    """Issue 27.13: a Chinese mention is replaced by a Chinese surface, an English one by an English surface;
    an inconsistent replacement is never an entity a triple joins to the original (高血压 —并发症→ 脑卒中)."""
    from kgplm.methods.embert.batching import HAN, LATIN

    store = toy["store"]
    lexicon = _toy_lexicon(toy, neighbors=store.adjacency(symmetric=True))
    blind = _toy_lexicon(toy)  # the same draws without the neighbour exclusion
    hypertension, stroke, diabetes = (store.entity_id(n) for n in ("高血压", "脑卒中", "糖尿病"))
    rng = np.random.default_rng(0)
    # diseases with a Chinese name besides their display name: 糖尿病 (消渴) and 脑卒中 (中风), a neighbour
    drawn = [lexicon.other_entity(hypertension, rng, HAN) for _ in range(200)]
    assert {(entity, lexicon.names[name]) for entity, name in drawn} == {(diabetes, "消渴")}
    unexcluded = {blind.names[blind.other_entity(hypertension, rng, HAN)[1]] for _ in range(200)}
    assert unexcluded == {"消渴", "中风"}
    # an English mention of 脑卒中 gets English surfaces, never 高血压's (a neighbour)
    latin = [lexicon.other_entity(stroke, rng, LATIN) for _ in range(300)]
    assert all(lexicon.names[name].isascii() for _, name in latin)
    assert hypertension not in {entity for entity, _ in latin} and len({entity for entity, _ in latin}) >= 2
    # consistent replacements in the mention's script: 糖尿病's Chinese synonyms are 消渴 only
    display = lexicon.lookup(lexicon.name_ids[lexicon.entity_rows(diabetes)[0]])
    assert [lexicon.names[r] for r in lexicon.synonyms(diabetes, display, HAN)] == ["消渴"]
    assert {lexicon.names[r] for r in lexicon.synonyms(diabetes, display, LATIN)} == {"diabetes mellitus", "DM"}
    english = toy["tokenizer"]("stroke", add_special_tokens=False)["input_ids"]
    assert lexicon.span_script(lexicon.name_ids[display]) == HAN and lexicon.span_script(english) == LATIN


def test_no_entity_weighs_more_than_the_cap():
    """Water-filling: f = (90, 5, 3, 2), cap 0.4 → the top entity sits at T with T = 0.4 (T + 10): T = 20/3."""
    from kgplm.methods.embert.batching import capped_weights

    weights = capped_weights(np.array([90.0, 0.0, 5.0, 3.0, 2.0]), 0.4)
    np.testing.assert_allclose(weights, [20 / 3, 0.0, 5.0, 3.0, 2.0])
    assert weights.max() / weights.sum() == pytest.approx(0.4)
    np.testing.assert_allclose(capped_weights(np.array([3.0, 2.0, 2.0]), 0.5), [3.0, 2.0, 2.0])  # under the cap
    # two capped: f = (50, 40, 5, 5), cap 0.3 → T = 0.3 · 10 / (1 − 0.6) = 7.5
    np.testing.assert_allclose(capped_weights(np.array([50.0, 40.0, 5.0, 5.0]), 0.3), [7.5, 7.5, 5.0, 5.0])


def test_inconsistent_draws_follow_the_capped_frequencies(toy):
    """Issue 27.13: with 糖尿病 holding 90 % of the disease mentions, a 0.6 cap brings its share of the
    inconsistent draws (for 糖尿病肾病, which is not mentioned) from 0.9 to 0.6: T = 0.6 (T + 10), T = 15.
    Which mentions are replaced is capped over the replaceable entities (two names in one script:
    糖尿病 and 脑卒中 here, f = 90 and 5): T = 0.6 · 5 / 0.4 = 7.5, so a 糖尿病 mention keeps 7.5 / 90."""
    store = toy["store"]
    frequencies = np.zeros(store.num_entities)
    diabetes, stroke, hypertension = (store.entity_id(n) for n in ("糖尿病", "脑卒中", "高血压"))
    frequencies[[diabetes, stroke, hypertension, store.entity_id("感冒")]] = [90, 5, 3, 2]
    nephropathy = store.entity_id("糖尿病肾病")
    shares = {}
    for cap in (1.0, 0.6):
        lexicon = _toy_lexicon(toy, frequencies=frequencies, max_entity_share=cap)
        rng = np.random.default_rng(1)
        drawn = [lexicon.other_entity(nephropathy, rng)[0] for _ in range(4000)]
        shares[cap] = drawn.count(diabetes) / len(drawn)
        assert lexicon.keep[diabetes] == pytest.approx(1.0 if cap == 1.0 else 7.5 / 90)
        assert lexicon.keep[stroke] == 1.0 and lexicon.keep[hypertension] == 1.0  # 高血压: one name per script
    assert abs(shares[1.0] - 0.9) < 0.02 and abs(shares[0.6] - 0.6) < 0.03, shares


def test_a_capped_entity_is_not_forced_in_by_the_at_least_one_rule():
    """A sequence whose only replaceable mention belongs to a capped entity (keep 0.1) is replaced about
    one time in ten, not always (the "at least one per sequence" rule would otherwise undo the cap)."""
    from kgplm.methods.embert.batching import _at_least_one

    rng = np.random.default_rng(0)
    capped = sum(len(_at_least_one(np.array([4]), 0.15, rng, np.array([0.1]))) for _ in range(4000)) / 4000
    assert abs(capped - (0.015 + 0.985 * 0.1)) < 0.015, capped  # chosen at rate × keep, else kept with keep
    uncapped = sum(len(_at_least_one(np.array([4]), 0.15, rng, np.array([1.0]))) for _ in range(500)) / 500
    assert uncapped == 1.0


#: Sentences of the toy graph's diseases and drugs (each names entities with synonyms in their own script).
TINY_TEXTS = [
    "患者有糖尿病和高血压，三年前中风，现在服用二甲双胍和阿司匹林。",
    "消渴的病人常见多饮多尿，糖尿病肾病会出现蛋白尿。",
    "脑卒中以后偏瘫，医生说高血压要吃氨氯地平，糖尿病要控制。",
    "感冒发烧头痛，吃了布洛芬；糖尿病患者用格华止。",
    "stroke and hypertension: metformin for diabetes mellitus, DM with diabetic nephropathy.",
]


def tiny_batches(toy, tmp_path, steps: int = 4, **options) -> list:
    """Seeded EMBERT batches (SOP on, every replaceable mention replaced) of :data:`TINY_TEXTS`."""
    from kgplm.training.trainer import example_seeds as seeds_of

    store, tokenizer = toy["store"], toy["tokenizer"]
    linker = EntityLinker(store)
    dataset = build_corpus(
        TINY_TEXTS,
        store=store,
        tokenizer=tokenizer,
        output_dir=tmp_path / "corpus",
        linker=linker,
        whole_word=False,
        max_length=64,
        progress=False,
    )
    lexicon = _toy_lexicon(
        toy, frequencies=linker.count(TINY_TEXTS), neighbors=store.adjacency(symmetric=True), max_entity_share=1.0
    )
    batcher = EmbertCollator(
        lexicon=lexicon,
        masker=Masker.from_tokenizer(tokenizer, "bert"),
        cls_token_id=tokenizer.cls_token_id,
        sep_token_id=tokenizer.sep_token_id,
        pad_token_id=tokenizer.pad_token_id,
        max_sequence_length=512,
        sentence_order=True,
        cecp_rate=1.0,
        **options,
    )
    rows = dataset[:]
    return [batcher(rows, seeds_of(0, step, np.arange(len(TINY_TEXTS)))) for step in range(steps)]


def batch_digest(batches) -> str:
    import hashlib

    digest = hashlib.sha256()
    for batch in batches:
        for name in sorted(batch):
            digest.update(name.encode() + batch[name].numpy().astype(np.int64).tobytes())
        digest.update(repr(sorted(batch.target_counts.items())).encode())
    return digest.hexdigest()


#: :func:`batch_digest` of :func:`tiny_batches` with the default options, computed before ``cecp_negatives`` existed
DEFAULT_BATCHES_SHA256 = "18b1433fac7063badda401779b22e84999c71102cc0bf64f3966b1c75cb814b8"


def test_default_batches_are_those_before_the_negatives_option(toy, tmp_path):
    """Issue 28.2 added ``cecp_negatives``; its default ("shipped") must build exactly the batches built before
    it existed (the digest and the CECP labels below were computed on the code before the option)."""
    batches = tiny_batches(toy, tmp_path)
    assert [batch["cecp_labels"].tolist() for batch in batches] == [
        [0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1, 0],
        [1, 0, 0, 0, 1, 1, 1, 0, 1, 1, 0],
        [1, 1, 1, 1, 0, 1, 1, 1, 0, 1, 1],
        [0, 0, 1, 0, 0, 0, 0, 1, 1, 1, 1, 1],
    ]
    assert batch_digest(batches) == DEFAULT_BATCHES_SHA256
    assert batch_digest(tiny_batches(toy, tmp_path / "again", cecp_negatives="shipped")) == DEFAULT_BATCHES_SHA256


def replacement_surfaces(batches) -> dict[int, list[tuple]]:
    """label → the word pieces of every CECP replacement in ``batches`` (replaced mentions are never masked)."""
    surfaces = {0: [], 1: []}
    for batch in batches:
        for row, (start, end), label in zip(
            batch["cecp_batch"].tolist(), batch["cecp_spans"].tolist(), batch["cecp_labels"].tolist()
        ):
            surfaces[label].append(tuple(batch["input_ids"][row, start:end].tolist()))
    return surfaces


def test_fixed_surface_negatives_are_one_surface(toy, tmp_path):
    """The positive control (``cecp_negatives="fixed_surface"``): every inconsistent replacement is the same
    name — the first Chinese alias of the lowest-numbered entity that has one — never a name of the replaced
    mention's entity; consistent replacements are the synonyms they are by default."""
    store, tokenizer = toy["store"], toy["tokenizer"]
    control = replacement_surfaces(tiny_batches(toy, tmp_path / "control", cecp_negatives="fixed_surface"))
    shipped = replacement_surfaces(tiny_batches(toy, tmp_path / "shipped"))
    lexicon = _toy_lexicon(toy)
    entity, name = lexicon.fixed_surface
    aliased = [
        e
        for e in range(store.num_entities)
        if any(
            n != store.entity_name(e) and any("\u4e00" <= c <= "\u9fff" for c in n)
            for n in toy["thesaurus"].synonyms(e)[1:]
        )
    ]
    assert entity == min(aliased)  # independent of the lexicon's pools: from the thesaurus' surfaces
    fixed = tuple(tokenizer(lexicon.names[name], add_special_tokens=False)["input_ids"])
    assert len(control[0]) >= 8 and set(control[0]) == {fixed}, control[0]
    assert len(set(shipped[0])) >= 3 and len(set(control[1])) >= 3  # the default's negatives vary; synonyms still do
    # never the replaced entity's own name: a mention of the fixed surface's entity gets no inconsistent draw
    assert lexicon.fixed_inconsistent(entity) is None
    assert lexicon.fixed_inconsistent(store.entity_id("感冒")) == (entity, name)


def test_the_model_option_reaches_the_collator(toy):
    """``kgplm.train(model_options={"cecp_negatives": ...})`` builds its collator through the method's record."""
    from kgplm.methods import MethodContext, get
    from kgplm.methods.embert import EmbertConfig

    store = toy["store"]
    artefacts = {
        "thesaurus": toy["thesaurus"],
        "entity_segments": toy["segments"],
        "entity_frequencies": np.ones(store.num_entities),
    }
    for negatives in ("fixed_surface", "shipped"):
        context = MethodContext(
            config=EmbertConfig(cecp_negatives=negatives),
            tokenizer=toy["tokenizer"],
            store=store,
            masking="bert",
            seed=0,
            artefacts=artefacts,
        )
        assert get("embert").build_collator(context).cecp_negatives == negatives


def test_unknown_negatives_option_is_refused():
    from kgplm.exceptions import ConfigurationError
    from kgplm.methods.embert import EmbertConfig

    with pytest.raises(ConfigurationError, match="cecp_negatives.*'fixed'"):
        EmbertConfig(cecp_negatives="fixed").validate_tasks()
