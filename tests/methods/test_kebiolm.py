"""KeBioLM's pieces against independent references: seqeval's chunking, brute-force search and
softmax, hand-computed tags and spans, invariants of the fusion (only mention tokens change)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from seqeval.metrics.sequence_labeling import get_entities

from kgplm.exceptions import ConfigurationError
from kgplm.methods.kebiolm import KebiolmConfig, KebiolmForPreTraining
from kgplm.methods.kebiolm.detection import (
    BEGIN,
    INSIDE,
    OUTSIDE,
    TAG_NAMES,
    candidate_positions,
    decode_spans,
    tags_from_spans,
)
from kgplm.methods.kebiolm.modeling import KEBIOLM_ENCODING
from kgplm.methods.kebiolm.retrieval import chunked_logsumexp, linking_loss, top_k_by_dot_product
from kgplm.models import TINY_TEXT_ENCODER, KgplmForFineTuning, load_pretrained


def tiny_config(**overrides) -> KebiolmConfig:
    fields = dict(
        vocab_size=60,
        num_entities=40,
        entity_dim=8,
        num_retrieved=5,
        retrieval_chunk_size=7,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        **TINY_TEXT_ENCODER,
    )
    fields.update(overrides)
    return KebiolmConfig(**fields)


def tiny_batch() -> dict[str, torch.Tensor]:
    """Row 0: [CLS] t1..t6 [SEP] with mentions [1, 3) (first content token) and [5, 7) (ends right
    before [SEP]); row 1: [CLS] t1 t2 [SEP] + padding, no mention."""
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(5, 60, (2, 8), generator=generator)
    input_ids[:, 0] = 2
    input_ids[0, 7] = 3
    input_ids[1, 3] = 3
    input_ids[1, 4:] = 0
    return dict(
        input_ids=input_ids,
        attention_mask=torch.tensor([[1] * 8, [1] * 4 + [0] * 4]),
        token_type_ids=torch.zeros(2, 8, dtype=torch.long),
        mention_batch=torch.tensor([0, 0]),
        mention_spans=torch.tensor([[1, 3], [5, 7]]),
        mention_entity_ids=torch.tensor([4, 9]),
    )


# -- detection tags and decoding ----------------------------------------------------------------------
def test_tags_from_spans_by_hand():
    valid = np.array([False, True, True, True, True, True, True, False, False])
    tags = tags_from_spans(9, np.array([[1, 3], [4, 5], [5, 7]]), valid)
    assert tags.tolist() == [-100, BEGIN, INSIDE, OUTSIDE, BEGIN, BEGIN, INSIDE, -100, -100]
    assert tags_from_spans(4, np.zeros((0, 2)), np.ones(4, bool)).tolist() == [0, 0, 0, 0]


def test_candidates_exclude_cls_every_sep_and_padding():
    attention = torch.tensor([[1, 1, 1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1, 1, 1]])
    types = torch.tensor([[0, 0, 0, 0, 1, 1, 0, 0], [0, 0, 0, 0, 0, 0, 0, 0]])
    # row 0: [CLS] a b [SEP] c [SEP] pad pad; row 1: [CLS] a b c d e f [SEP]
    candidates = candidate_positions(attention, types)
    assert candidates.int().tolist() == [[0, 1, 1, 0, 1, 0, 0, 0], [0, 1, 1, 1, 1, 1, 1, 0]]


def test_decoding_matches_seqeval_on_random_tags():
    generator = torch.Generator().manual_seed(1)
    tags = torch.randint(0, 3, (40, 17), generator=generator)
    lengths = torch.randint(3, 18, (40,), generator=generator)
    attention = (torch.arange(17)[None, :] < lengths[:, None]).long()
    candidates = candidate_positions(attention, None)
    mention_batch, spans = decode_spans(tags, candidates)
    decoded = {(int(b), int(s), int(e)) for b, (s, e) in zip(mention_batch, spans.tolist())}
    expected = set()
    for row in range(40):
        names = [
            f"{TAG_NAMES[t]}-E" if TAG_NAMES[t] != "O" and c else "O"
            for t, c in zip(tags[row].tolist(), candidates[row].tolist())
        ]
        expected |= {(row, start, end + 1) for _, start, end in get_entities(names)}  # seqeval's end is inclusive
    assert decoded == expected and len(decoded) > 50
    assert mention_batch.tolist() == sorted(mention_batch.tolist())


def test_decoding_spans_touching_the_sequence_edges():
    # [CLS] I I O B I [SEP] | [CLS] B B I [SEP] pad: an I right after [CLS] opens a span; a span ends before [SEP]
    tags = torch.tensor(
        [
            [INSIDE, INSIDE, INSIDE, OUTSIDE, BEGIN, INSIDE, INSIDE],
            [BEGIN, BEGIN, BEGIN, INSIDE, INSIDE, BEGIN, OUTSIDE],
        ]
    )
    attention = torch.tensor([[1] * 7, [1] * 5 + [0, 0]])
    mention_batch, spans = decode_spans(tags, candidate_positions(attention, None))
    assert mention_batch.tolist() == [0, 0, 1, 1]
    assert spans.tolist() == [[1, 3], [4, 6], [1, 2], [2, 4]]


# -- retrieval and the linking softmax --------------------------------------------------------------------
@pytest.mark.parametrize("k, chunk", [(10, 64), (10, 1), (10, 5000), (300, 97)])
def test_top_k_equals_brute_force(k, chunk):
    generator = torch.Generator().manual_seed(2)
    table, queries = torch.randn(257, 16, generator=generator), torch.randn(37, 16, generator=generator)
    scores, ids, normaliser = top_k_by_dot_product(queries, table, k, chunk, with_logsumexp=True)
    expected_scores, expected_ids = (queries @ table.T).topk(min(k, 257), dim=1)
    assert torch.equal(ids, expected_ids)
    torch.testing.assert_close(scores, expected_scores)
    torch.testing.assert_close(normaliser, torch.logsumexp(queries @ table.T, 1))
    assert top_k_by_dot_product(queries, table, k, chunk)[2] is None


def test_chunked_logsumexp_values_and_gradients_equal_the_full_matrix():
    generator = torch.Generator().manual_seed(3)
    queries = torch.randn(6, 5, generator=generator, dtype=torch.float64, requires_grad=True)
    table = torch.randn(23, 5, generator=generator, dtype=torch.float64, requires_grad=True)
    torch.testing.assert_close(chunked_logsumexp(queries, table, 4), torch.logsumexp(queries @ table.T, 1))
    assert torch.autograd.gradcheck(lambda q, t: chunked_logsumexp(q, t, 4), (queries, table))


def test_full_linking_loss_is_cross_entropy_over_every_entity():
    generator = torch.Generator().manual_seed(4)
    queries = torch.randn(9, 8, generator=generator, requires_grad=True)
    table = torch.randn(50, 8, generator=generator, requires_grad=True)
    gold = torch.randint(0, 50, (9,), generator=generator)
    loss = linking_loss(queries, table, gold, softmax="full", chunk_size=6)
    reference = F.cross_entropy(queries @ table.T, gold)
    torch.testing.assert_close(loss, reference)
    expected = torch.autograd.grad(reference, (queries, table), retain_graph=True)
    torch.testing.assert_close(torch.autograd.grad(loss, (queries, table)), expected)
    # with the normaliser the retrieval computed, the forward pass over the table is skipped: same loss and gradients
    known = top_k_by_dot_product(queries, table, 3, 6, with_logsumexp=True)[2]
    reused = linking_loss(queries, table, gold, softmax="full", chunk_size=6, logsumexp=known)
    torch.testing.assert_close(reused, reference)
    torch.testing.assert_close(torch.autograd.grad(reused, (queries, table)), expected)


def test_in_batch_linking_loss():
    generator = torch.Generator().manual_seed(5)
    queries, table = torch.randn(4, 8, generator=generator), torch.randn(50, 8, generator=generator)
    gold = torch.tensor([7, 3, 7, 40])
    candidates = torch.tensor([3, 7, 40])  # the distinct golds
    expected = F.cross_entropy(queries @ table[candidates].T, torch.tensor([1, 0, 1, 2]))
    torch.testing.assert_close(linking_loss(queries, table, gold, softmax="in_batch"), expected)
    # the sampled softmax (retrieved + in-batch + log-Q corrected draws): tests/methods/test_kebiolm_scale.py


def test_entity_representation_is_attention_over_the_k_nearest():
    config = tiny_config()
    torch.manual_seed(0)
    model = KebiolmForPreTraining(config)
    mentions = torch.randn(3, config.entity_dim)
    retrieved, weights, vectors, _ = model.entity_memory.attend(mentions)
    table = model.entity_memory.weight.detach()
    scores = mentions @ table.T  # (3, entities) brute force
    top = scores.topk(config.num_retrieved, dim=1).indices
    assert torch.equal(retrieved, top)
    expected_weights = torch.softmax(scores.gather(1, top), 1)
    torch.testing.assert_close(weights, expected_weights)
    torch.testing.assert_close(vectors, torch.einsum("mk,mkd->md", expected_weights, table[top]))


# -- fusion ---------------------------------------------------------------------------------------------------
def test_fusion_changes_exactly_the_mention_tokens_and_never_cls():
    """With no fusion layers the output is h*: it differs from the output without mentions exactly on
    the half-open spans, including one starting right after [CLS] and one ending right before [SEP]."""
    torch.manual_seed(0)
    model = KebiolmForPreTraining(tiny_config(fusion_layers=0)).eval()
    batch = tiny_batch()
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
    with torch.no_grad():
        fused = KEBIOLM_ENCODING.encode(
            model, **inputs, mention_batch=batch["mention_batch"], mention_spans=batch["mention_spans"]
        ).last_hidden_state
        plain = KEBIOLM_ENCODING.encode(
            model,
            **inputs,
            mention_batch=torch.zeros(0, dtype=torch.long),
            mention_spans=torch.zeros(0, 2, dtype=torch.long),
        ).last_hidden_state
    changed = (fused - plain).abs().amax(-1) > 0
    expected = torch.zeros(2, 8, dtype=torch.bool)
    expected[0, 1:3] = expected[0, 5:7] = True
    assert torch.equal(changed, expected)


def test_fusion_adds_the_projected_entity_summary():
    torch.manual_seed(0)
    model = KebiolmForPreTraining(tiny_config())
    hidden = torch.randn(2, 8, 32)
    summary = torch.randn(1, 8)
    fused = model.entity_fusion(hidden, summary, torch.tensor([1]), torch.tensor([[2, 5]]))
    delta = model.entity_fusion.linear(summary)[0]
    torch.testing.assert_close(fused[1, 2:5], hidden[1, 2:5] + delta)
    assert torch.equal(fused[1, :2], hidden[1, :2]) and torch.equal(fused[1, 5:], hidden[1, 5:])
    assert torch.equal(fused[0], hidden[0])


def test_without_gold_spans_the_encoder_fuses_its_own_detections():
    torch.manual_seed(0)
    model = KebiolmForPreTraining(tiny_config(fusion_layers=0)).eval()
    with torch.no_grad():  # every candidate token tagged I: one span per segment
        model.entity_detection.weight.zero_()
        model.entity_detection.bias.copy_(torch.tensor([0.0, 0.0, 5.0]))
    batch = tiny_batch()
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
    with torch.no_grad():
        own = KEBIOLM_ENCODING.encode(model, **inputs)
        given = KEBIOLM_ENCODING.encode(
            model, **inputs, mention_batch=torch.tensor([0, 1]), mention_spans=torch.tensor([[1, 7], [1, 3]])
        )
    assert own.extras["mention_batch"].tolist() == [0, 1]
    assert own.extras["mention_spans"].tolist() == [[1, 7], [1, 3]]
    torch.testing.assert_close(own.last_hidden_state, given.last_hidden_state)
    assert KEBIOLM_ENCODING.input_names == ()  # the fine-tuning model reads no input beyond the text


# -- losses, configuration, ablations, save and load ------------------------------------------------------------
def test_losses_and_gradients():
    torch.manual_seed(0)
    model = KebiolmForPreTraining(tiny_config())
    batch = tiny_batch()
    labels = torch.full((2, 8), -100)
    labels[0, 1:3] = batch["input_ids"][0, 1:3]
    detection = torch.tensor([[-100, 1, 2, 0, 0, 1, 2, -100], [-100, 0, 0, -100, -100, -100, -100, -100]])
    output = model(**batch, labels=labels, detection_labels=detection)
    assert set(output.losses) == {"mlm", "ed", "el"}
    assert {"mlm_accuracy", "ed_accuracy", "el_accuracy"} <= set(output.metrics)
    table = model.entity_memory.weight
    torch.testing.assert_close(
        output.losses["el"], F.cross_entropy(output.mention_vectors @ table.T, batch["mention_entity_ids"])
    )
    logits = KEBIOLM_ENCODING.encode(model, batch["input_ids"], batch["attention_mask"]).extras["detection_logits"]
    torch.testing.assert_close(output.losses["ed"], F.cross_entropy(logits.flatten(0, 1), detection.flatten()))
    output.loss.backward()
    assert model.entity_memory.weight.grad.abs().sum(1).gt(0).all()  # the full softmax reaches every entity
    assert model.entity_detection.weight.grad.abs().sum() > 0 and model.entity_fusion.linear.weight.grad.abs().sum() > 0


def test_layer_split_and_validation():
    assert tiny_config(num_hidden_layers=12).layer_split == (8, 4)  # the paper
    assert tiny_config(num_hidden_layers=12, fusion_layers=0).layer_split == (12, 0)
    assert tiny_config(num_hidden_layers=12, text_only_layers=4).layer_split == (4, 8)
    with pytest.raises(ConfigurationError, match="must equal"):
        KebiolmForPreTraining(tiny_config(text_only_layers=1, fusion_layers=2))
    with pytest.raises(ConfigurationError, match="linking_softmax"):
        KebiolmForPreTraining(tiny_config(linking_softmax="hierarchical"))
    with pytest.raises(ConfigurationError, match="num_entities"):
        KebiolmForPreTraining(tiny_config(num_entities=0))


def test_frozen_and_random_init_ablations():
    from kgplm.methods import MethodContext, get

    spec = get("kebiolm")
    assert spec.kg_embedding == "transe" and spec.artefacts == {"kg_embeddings"}
    frozen = KebiolmForPreTraining(tiny_config(freeze_entity_embeddings=True))
    assert not frozen.entity_memory.weight.requires_grad
    assert all(p is not frozen.entity_memory.weight for p in frozen.parameters())

    class Embeddings:
        entity_embeddings = torch.arange(40 * 8, dtype=torch.float32).reshape(40, 8)

    for init, expect_copy in (("transe", True), ("random", False)):
        model = KebiolmForPreTraining(tiny_config(entity_init=init))
        spec.prepare_model(
            model,
            MethodContext(
                config=model.config,
                tokenizer=None,
                store=None,
                masking="bert",
                seed=0,
                artefacts={"kg_embeddings": Embeddings()},
            ),
        )
        assert torch.equal(model.entity_memory.weight.detach(), Embeddings.entity_embeddings) == expect_copy


def test_save_load_round_trip_and_fine_tuning_encoder(tmp_path):
    torch.manual_seed(0)
    model = KebiolmForPreTraining(tiny_config(fusion_layers=0, freeze_entity_embeddings=True)).eval()
    batch = tiny_batch()
    with torch.no_grad():
        before = model(**batch)
    model.save_pretrained(tmp_path / "model")
    loaded = load_pretrained(tmp_path / "model").eval()
    assert loaded.config.layer_split == (2, 0) and not loaded.entity_memory.weight.requires_grad
    with torch.no_grad():
        after = loaded(**batch)
    torch.testing.assert_close(after.prediction_logits, before.prediction_logits, rtol=0, atol=0)
    config = loaded.config
    config.task_kind, config.task_name, config.label_names = "ner", "toy", ["O", "B-x", "I-x"]
    tuned = KgplmForFineTuning.from_pretrained(tmp_path / "model", config=config).eval()
    assert torch.equal(tuned.entity_memory.weight, loaded.entity_memory.weight)
    with torch.no_grad():
        logits = tuned(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    assert logits.shape == (2, 8, 3)
    from transformers import AutoConfig, AutoModel

    assert type(AutoConfig.from_pretrained(tmp_path / "model")) is KebiolmConfig
    encoder = AutoModel.from_pretrained(tmp_path / "model").eval()  # the encoder alone, its own detections
    with torch.no_grad():
        hidden = encoder(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
        expected = KEBIOLM_ENCODING.encode(loaded, batch["input_ids"], batch["attention_mask"]).last_hidden_state
    torch.testing.assert_close(hidden, expected)


# -- masking: "all tokens within a word or entity span" (§3.2), and the −wem ablation -----------------------
class _BertIds:
    """The special ids a collator reads, laid out as BERT's ([PAD] 0, [CLS] 2, [SEP] 3, [MASK] 4)."""

    pad_token_id, cls_token_id, sep_token_id, mask_token_id = 0, 2, 3, 4
    all_special_ids = [0, 1, 2, 3, 4]

    def __len__(self) -> int:
        return 100


#: [CLS] w0 w0 | w1 w1 w1 | w2 w2 | w3 | w4 w4 [SEP]; the linked mention [5, 8) covers w1's last token and w2
_IDS = [2, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 3]
_WORD_IDS = [-1, 0, 0, 1, 1, 1, 2, 2, 3, 4, 4, -1]
_MENTION = [5, 8]


def _chosen_units(masking: str, units, draws: int = 300) -> dict:
    """Mask the hand-made sequence ``draws`` times with KeBioLM's collator and ``masking``; assert every
    unit is chosen whole or not at all and nothing else is chosen; return how often each unit was chosen."""
    from kgplm.methods import MethodContext, get
    from kgplm.training.trainer import example_seeds

    context = MethodContext(config=tiny_config(), tokenizer=_BertIds(), store=None, masking=masking, seed=0)
    collator = get("kebiolm").build_collator(context)
    rows = {"input_ids": [_IDS], "word_ids": [_WORD_IDS], "mention_spans": [[_MENTION]], "mention_entity_ids": [[5]]}
    counts = dict.fromkeys(units, 0)
    for step in range(draws):
        chosen = collator(rows, example_seeds(0, step, np.arange(1)))["labels"][0].numpy() >= 0
        covered = np.zeros(len(_IDS), dtype=bool)
        for start, end in units:
            assert chosen[start:end].all() or not chosen[start:end].any(), (masking, step, (start, end), chosen)
            counts[(start, end)] += int(chosen[start:end].all())
            covered[start:end] = True
        assert not chosen[~covered].any()  # [CLS], [SEP]
    return counts


def test_kebiolm_masks_whole_words_outside_mentions_and_whole_mentions():
    from kgplm.methods import get

    spec = get("kebiolm")
    assert spec.default_masking == "word_entity"
    # units: w0, the part of w1 outside the mention, the mention, w3, w4
    counts = _chosen_units(spec.default_masking, [(1, 3), (3, 5), (5, 8), (8, 9), (9, 11)])
    assert all(count > 0 for count in counts.values()), counts  # every unit is chosen in some draw


def test_whole_word_masking_without_entities_masks_words_only():
    """KeBioLM's −wem ablation (§4.5 (a)): whole-word masking, the mention no longer one unit."""
    # units: the words alone; the mention no longer holds w1's last token and w2 together
    counts = _chosen_units("whole_word", [(1, 3), (3, 6), (6, 8), (8, 9), (9, 11)])
    assert all(count > 0 for count in counts.values()), counts


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_mixed_precision_pre_training_and_own_detections_follow_fp32(dtype):
    """Under CPU autocast (bf16 and fp16) the losses, the linking gradient of the entity table and the
    inference pass on the model's own detections (the cloze probe's and fine-tuning's path) follow fp32.
    Before the fix the fusion failed on an fp32 ← low-precision index_put, then the linking log-sum-exp's
    backward on low-precision queries against the fp32 table."""
    torch.manual_seed(0)
    model = KebiolmForPreTraining(tiny_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
    batch = tiny_batch()
    labels = torch.full((2, 8), -100)
    labels[0, 1:3] = batch["input_ids"][0, 1:3]
    detection = torch.tensor([[-100, 1, 2, 0, 0, 1, 2, -100], [-100, 0, 0, -100, -100, -100, -100, -100]])

    def run(low_precision: bool):
        model.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=dtype, enabled=low_precision):
            output = model(**batch, labels=labels, detection_labels=detection)
        output.loss.backward()
        return {k: v.detach() for k, v in output.losses.items()}, model.entity_memory.weight.grad.clone()

    reference_losses, reference_grad = run(False)
    losses, grad = run(True)
    for key, value in reference_losses.items():
        torch.testing.assert_close(losses[key], value, rtol=0.02, atol=0.01)
    assert torch.isfinite(grad).all()
    cosine = F.cosine_similarity(grad.flatten(), reference_grad.flatten(), dim=0)
    assert cosine > 0.99, cosine
    # inference on its own detections: every candidate token tagged B, so each is a mention and fused
    with torch.no_grad():
        model.entity_detection.weight.zero_()
        model.entity_detection.bias.copy_(torch.tensor([0.0, 1.0, 0.0]))
        text = {k: batch[k] for k in ("input_ids", "attention_mask", "token_type_ids")}
        plain = model.eval()(**text)
        with torch.autocast("cpu", dtype=dtype):
            mixed = model(**text)
    assert plain.mention_vectors is not None and len(plain.mention_vectors) == 6 + 2  # 6 + 2 candidate tokens
    torch.testing.assert_close(mixed.prediction_logits.float(), plain.prediction_logits, rtol=0.05, atol=0.05)
