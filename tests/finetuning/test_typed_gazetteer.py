"""The typed gazetteer at fine-tuning (``kgplm.finetune(mention_spans="typed")``): SMedBERT's linked mentions —
the same spans and entity ids — as begin/inside markers, a KG-type embedding and the entity's own KG vector."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

import kgplm
from kgplm import KGStore
from kgplm.exceptions import ConfigurationError, MissingFileError
from kgplm.models import TINY_TEXT_ENCODER, KgplmConfig, KgplmForFineTuning, load_pretrained
from kgplm.models.finetuning import GAZETTEER_ENTITIES, GAZETTEER_TOKENS
from kgplm.text.linking import EntityLinker
from kgplm.finetuning.mention_inputs import TypedGazetteerLookup
from tests.test_api import TOY_GRAPH, toy_arguments, write_toy_corpus

#: six toy names written back to back: six adjacent mentions
ADJACENT = "糖尿病多尿多饮体重减轻乏力内分泌科"


def _char_offsets(text: str) -> np.ndarray:
    return np.array([[0, 0]] + [[i, i + 1] for i in range(len(text))] + [[0, 0]])  # one token per character


def test_the_gazetteer_reads_the_spans_and_entity_ids_smedbert_reads():
    from kgplm.kg.pepr import top_k_neighbors
    from kgplm.methods.smedbert import KnowledgeLookup

    store = KGStore.from_rdf(TOY_GRAPH, show_progress=False)
    linker = EntityLinker(store)
    smedbert = KnowledgeLookup(store, top_k_neighbors(store, None, k=2, show_progress=False), linker=linker)
    gazetteer = TypedGazetteerLookup(linker)
    for text in (ADJACENT, "患者有糖尿病，口渴，服用二甲双胍和胰岛素"):
        offsets = _char_offsets(text)
        theirs, ours = smedbert.features(text, offsets), gazetteer.features(text, offsets)
        assert np.array_equal(ours["mention_spans"], theirs["mention_spans"])
        assert np.array_equal(ours["mention_entity_ids"], theirs["mention_entity_ids"])
    # by hand: the six names, each its own mention and entity
    features = gazetteer.features(ADJACENT, _char_offsets(ADJACENT))
    assert [ADJACENT[s - 1 : e - 1] for s, e in features["mention_spans"].tolist()] == [
        "糖尿病",
        "多尿",
        "多饮",
        "体重减轻",
        "乏力",
        "内分泌科",
    ]
    assert [store.entity_name(e) for e in features["mention_entity_ids"]] == [
        "糖尿病",
        "多尿",
        "多饮",
        "体重减轻",
        "乏力",
        "内分泌科",
    ]


def test_collated_markers_start_every_mention_so_adjacent_mentions_stay_apart():
    batch = TypedGazetteerLookup(linker=None).collate(
        [
            {"mention_spans": np.array([[1, 3], [3, 5]]), "mention_entity_ids": np.array([7, 2])},
            {"mention_spans": np.zeros((0, 2)), "mention_entity_ids": np.zeros(0)},
            {"mention_spans": np.array([[2, 3]]), "mention_entity_ids": np.array([7])},
        ]
    )
    # by hand: sequence, position, marker (0 = B, 1 = I), mention
    assert batch[GAZETTEER_TOKENS].tolist() == [
        [0, 0, 0, 0, 2],
        [1, 2, 3, 4, 2],
        [0, 1, 0, 1, 0],
        [0, 0, 1, 1, 2],
    ]
    assert batch[GAZETTEER_ENTITIES].tolist() == [7, 2, 7]


def _config(**gazetteer) -> KgplmConfig:
    sizes = {"num_entities": 6, "num_types": 3, "kg_dim": 4, **gazetteer}
    config = KgplmConfig(
        method="mlm",
        vocab_size=60,
        mention_gazetteer=sizes,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        **TINY_TEXT_ENCODER,
    )
    config.set_task("ner", "toy", ["O", "B-x", "I-x"])
    return config


def _model() -> tuple[KgplmForFineTuning, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    model = KgplmForFineTuning(_config())
    vectors = torch.randn(6, 4, generator=torch.Generator().manual_seed(3))
    types = torch.tensor([0, 2, 1, -1, 0, 2])
    model.gazetteer.load_tables(vectors, types)
    return model, vectors, types


def _inputs() -> dict[str, torch.Tensor]:
    input_ids = torch.randint(5, 60, (2, 8), generator=torch.Generator().manual_seed(1))
    # row 0: two adjacent mentions [1, 3) of entity 1 and [3, 5) of entity 3 (untyped); row 1: [2, 4) of entity 4
    tokens = torch.tensor([[0, 0, 0, 0, 1, 1], [1, 2, 3, 4, 2, 3], [0, 1, 0, 1, 0, 1], [0, 0, 1, 1, 2, 2]])
    return {"input_ids": input_ids, GAZETTEER_TOKENS: tokens, GAZETTEER_ENTITIES: torch.tensor([1, 3, 4])}


def test_the_gazetteer_adds_marker_type_and_projected_kg_vector_and_starts_as_the_plain_encoder():
    model, vectors, types = _model()
    model.eval()
    inputs = _inputs()
    assert all(torch.equal(p, torch.zeros_like(p)) for p in model.gazetteer.parameters())
    with torch.no_grad():
        plain = model.bert(input_ids=inputs["input_ids"]).last_hidden_state
        assert torch.allclose(model(**inputs).last_hidden_state, plain, atol=1e-6)  # zero at the start
        for parameter in model.gazetteer.parameters():
            parameter.normal_()
        embeddings = model.bert.embeddings.word_embeddings(inputs["input_ids"])
        added = model.gazetteer(embeddings, inputs[GAZETTEER_TOKENS], inputs[GAZETTEER_ENTITIES]) - embeddings
    g = model.gazetteer
    untyped = g.types.shape[0] - 1

    def mention(entity: int, type_row: int) -> torch.Tensor:  # by hand: type[τ(e)] + W v_e + b
        return g.types[type_row] + vectors[entity] @ g.projection.weight.T + g.projection.bias

    expected = torch.zeros_like(added)
    expected[0, 1] = g.markers[0] + mention(1, 2)
    expected[0, 2] = g.markers[1] + mention(1, 2)
    expected[0, 3] = g.markers[0] + mention(3, untyped)  # the adjacent mention starts with its own B
    expected[0, 4] = g.markers[1] + mention(3, untyped)
    expected[1, 2] = g.markers[0] + mention(4, 0)
    expected[1, 3] = g.markers[1] + mention(4, 0)
    torch.testing.assert_close(added, expected)
    assert not torch.allclose(added[0, 3], added[0, 2])  # where the first mention ends and the next begins


def test_gradients_reach_the_markers_the_type_embedding_and_the_kg_projection():
    model, _, _ = _model()
    inputs = _inputs()
    labels = torch.tensor([[-100, 1, 2, 1, 2, 0, 0, -100], [-100, 0, 1, 2, 0, 0, 0, -100]])
    model(**inputs, labels=labels).loss.backward()
    g = model.gazetteer
    assert g.markers.grad.abs().sum(1).gt(0).all()
    used = {0, 2, g.types.shape[0] - 1}  # entities 4, 1 and 3 (untyped)
    assert [bool(g.types.grad[row].abs().sum() > 0) for row in range(g.types.shape[0])] == [
        row in used for row in range(g.types.shape[0])
    ]
    assert g.projection.weight.grad.abs().sum() > 0 and g.projection.bias.grad.abs().sum() > 0
    assert not g.kg_vectors.requires_grad and all(p is not g.kg_vectors for p in model.parameters())


def test_save_then_load_is_identical_and_the_inputs_go_with_the_option(tmp_path):
    model, vectors, _ = _model()
    with torch.no_grad():
        for parameter in model.gazetteer.parameters():
            parameter.normal_()
    model.eval()
    inputs = _inputs()
    with torch.no_grad():
        before = model(**inputs).logits
    model.save_pretrained(tmp_path / "model")
    loaded = load_pretrained(tmp_path / "model").eval()
    assert loaded.config.mention_gazetteer == {"num_entities": 6, "num_types": 3, "kg_dim": 4}
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), loaded.state_dict().values()))
    assert torch.equal(loaded.gazetteer.kg_vectors, vectors)
    with torch.no_grad():
        assert torch.equal(loaded(**inputs).logits, before)
    with pytest.raises(ConfigurationError, match="typed gazetteer"):
        loaded(input_ids=inputs["input_ids"])
    plain_config = KgplmConfig(method="mlm", vocab_size=60, **TINY_TEXT_ENCODER)
    plain_config.set_task("ner", "toy", ["O", "B-x", "I-x"])
    plain = KgplmForFineTuning(plain_config)
    with pytest.raises(ConfigurationError, match="typed gazetteer"):
        plain(**inputs)
    with pytest.raises(ConfigurationError, match="KG table"):
        model.gazetteer.load_tables(vectors[:5], torch.zeros(5, dtype=torch.long))


def test_a_control_is_fine_tuned_with_smedberts_mentions_as_a_typed_gazetteer(tmp_path):
    """An mlm run fine-tuned with ``mention_spans="typed"`` and a SMedBERT run's KG table: its lookup gives the
    SMedBERT run's (span, entity) pairs on the task text, its tables are that run's KG vectors and the graph's
    types, the gazetteer is learned, recorded and replayed by ``evaluate``."""
    from kgplm.evaluation.tasks import get_task, load_task
    from kgplm.kg.embeddings import KGEmbeddings
    from kgplm.methods.smedbert import knowledge_inputs
    from kgplm.text.tokenization import load_tokenizer
    from kgplm.finetuning.encoding import TaskEncoder
    from kgplm.training.run import RunDirectory
    from kgplm.finetuning.mention_inputs import gazetteer_lookup

    corpus = write_toy_corpus(tmp_path / "notes.txt", lines=40)
    smedbert = kgplm.train("smedbert", **toy_arguments(corpus, tmp_path / "smedbert", max_steps=1, kg_epochs=2))
    control = kgplm.train(
        "mlm", **toy_arguments(corpus, tmp_path / "control", max_steps=2, masking="whole_entity", kg_epochs=2)
    )
    store = KGStore.from_rdf(TOY_GRAPH, show_progress=False)
    names = [store.entity_name(e) for e in range(store.num_entities)]
    task_dir = tmp_path / "task"
    task_dir.mkdir()
    for split, count in (("train", 16), ("dev", 8), ("test", 8)):
        lines = [
            f"{i % 2}\t患者有{names[i % len(names)]}{names[(i + 1) % len(names)]}，伴{names[i // 2]}"
            for i in range(count)
        ]
        (task_dir / f"{split}.txt").write_text("\n".join(lines), encoding="utf-8")
    # the same (start, end, entity) triples as SMedBERT's own lookup, through the task encoder
    texts = load_task("cmedic", task_dir, "test")
    theirs, ours = (
        TaskEncoder(
            get_task("cmedic"),
            load_tokenizer(run.output_dir / "tokenizer"),
            label_names=["0", "1"],
            max_length=64,
            knowledge=lookup,
        ).encode(texts)
        for run, lookup in (
            (smedbert, knowledge_inputs(RunDirectory(smedbert.output_dir), False)),
            (control, gazetteer_lookup(RunDirectory(control.output_dir))),
        )
    )
    assert sum(len(f["knowledge"]["mention_spans"]) for f in ours) >= 16
    for a, b in zip(theirs, ours):
        assert np.array_equal(a["input_ids"], b["input_ids"])
        for key in ("mention_spans", "mention_entity_ids"):
            assert np.array_equal(a["knowledge"][key], b["knowledge"][key])
    # a text-only run has no KG table of its own
    with pytest.raises(MissingFileError, match="typed gazetteer"):
        kgplm.finetune(
            model=control.output_dir,
            task="cmedic",
            data_dir=task_dir,
            output_dir=tmp_path / "no",
            mention_spans="typed",
            progress=False,
        )
    with pytest.raises(ConfigurationError, match="mention_spans must be"):
        kgplm.finetune(
            model=control.output_dir, task="cmedic", data_dir=task_dir, output_dir=tmp_path / "no", mention_spans="yes"
        )
    table = RunDirectory(smedbert.output_dir).embeddings_dir("transr")
    result = kgplm.finetune(
        model=control.output_dir,
        task="cmedic",
        data_dir=task_dir,
        output_dir=tmp_path / "fine",
        epochs=1,
        batch_size=8,
        learning_rate=1e-3,
        max_length=64,
        mention_spans="typed",
        kg_embeddings=table,
        progress=False,
    )
    recorded = json.loads((tmp_path / "fine" / "finetune_config.json").read_text())
    assert recorded["mention_spans"] == "typed" and recorded["kg_embeddings"] == str(table.resolve())
    model = result.load_model()
    assert model.config.mention_gazetteer == {
        "num_entities": store.num_entities,
        "num_types": store.num_types,
        "kg_dim": 16,
    }
    assert torch.equal(model.gazetteer.kg_vectors, KGEmbeddings.load(table).entity_embeddings.float())
    types = torch.as_tensor(store.primary_type_ids(), dtype=torch.long)
    assert torch.equal(model.gazetteer.entity_types, torch.where(types < 0, store.num_types, types))
    assert all(torch.any(p != 0) for p in model.gazetteer.parameters())  # learned from zero
    scores = kgplm.evaluate(model=tmp_path / "fine", data_dir=task_dir, progress=False)
    assert scores["accuracy"] == pytest.approx(result.test["accuracy"])
