"""SMedBERT's batches: disjoint knowledge mentions and MNeM targets, Q(e) sampling, counts, fine-tuning inputs."""

from __future__ import annotations

import copy
import traceback

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from kgplm.methods.smedbert import (
    SmedbertCollator,
    SmedbertForPreTraining,
    TypeFrequencySampler,
)
from kgplm.methods.smedbert.batching import split_mentions
from kgplm.text.masking import Masker
from kgplm.training.collator import Batch
from tests.methods.conftest import tiny_config

CLS, SEP, PAD, MASK = 2, 3, 0, 4


def _rows():
    """Three chunks: ids 10.. with mentions given as token [start, end) and their PEPR rows."""
    bodies = [list(range(10, 30)), list(range(40, 47)), [50]]
    spans = [[[1, 4], [6, 7], [15, 20]], [[2, 5]], []]
    return {
        "input_ids": [[CLS, *body, SEP] for body in bodies],
        "mention_spans": spans,
        "mention_entity_ids": [[0, 1, 0], [3], []],  # entity 0 twice: the entity-level rule is exercised
        "neighbor_ids": [[[5, 6, -1], [7, -1, -1], [8, 9, 10]], [[8, 9, 5]], []],
        "neighbor_relations": [[[0, 1, -1], [2, -1, -1], [0, 2, 1]], [[0, 0, 1]], []],
        "neighbor_directions": [[[0, 1, -1], [0, -1, -1], [1, 1, 0]], [[1, 0, 0]], []],
        "neighbor_types": [[[0, 1, -1], [1, -1, -1], [0, 0, 1]], [[0, 0, 1]], []],
    }


def _collator(rate=0.5, **options):
    masker = Masker("whole_entity", mask_token_id=MASK, vocab_size=60, special_token_ids=[PAD, 1, CLS, SEP], rate=rate)
    sampler = TypeFrequencySampler(np.arange(24), np.array([0, 1] * 12))
    options = {"sentence_order": True, **options}
    return SmedbertCollator(
        masker=masker, cls_token_id=CLS, sep_token_id=SEP, pad_token_id=PAD, sampler=sampler, num_negatives=4, **options
    )


def _seeds(step, size=3):
    return np.stack([np.zeros(size, np.int64), np.full(size, step), np.arange(size)], 1)


@pytest.mark.parametrize("step", range(12))
def test_knowledge_mentions_are_the_masked_ones_and_mnem_targets_the_rest(step):
    batch = _collator()(_rows(), _seeds(step))
    chosen = batch["labels"] >= 0
    knowledge = list(zip(batch["mention_batch"].tolist(), map(tuple, batch["mention_spans"].tolist())))
    targets = list(zip(batch["mnem_mention_batch"].tolist(), map(tuple, batch["mnem_mention_spans"].tolist())))
    assert not set(knowledge) & set(targets)  # disjoint
    for row, (start, end) in knowledge:
        assert chosen[row, start:end].all()
    for row, (start, end) in targets:
        assert not chosen[row, start:end].all()
    # edges belong to the right set and skip padding (-1)
    assert batch["neighbor_mention"].numpy().max(initial=-1) < len(knowledge)
    assert batch["mnem_edge_mention"].numpy().max(initial=-1) < len(targets)
    assert (batch["neighbor_entity_ids"] >= 0).all() and (batch["mnem_entity_ids"] >= 0).all()
    assert batch["mnem_negative_ids"].shape == (len(batch["mnem_entity_ids"]), 4)
    assert batch["mnem_log_q"].shape == (len(batch["mnem_entity_ids"]), 5)
    assert batch.target_counts == {
        "mlm": int(chosen.sum()),
        "sop": 2,
        "mmem": len(knowledge),
        "mnem": len(batch["mnem_entity_ids"]),
    }


def _leak_rows():
    """Two chunks whose mentions have disjoint neighbour ids (so a changed row is visible); entity 0
    is named twice in chunk 0, with the same PEPR row each time."""
    bodies = [list(range(10, 30)), list(range(40, 47))]
    return {
        "input_ids": [[CLS, *body, SEP] for body in bodies],
        "mention_spans": [[[1, 4], [6, 7], [9, 11], [15, 20]], [[2, 5]]],
        "mention_entity_ids": [[0, 1, 2, 0], [3]],
        "neighbor_ids": [[[5, 6, -1], [7, -1, -1], [8, 9, -1], [5, 6, -1]], [[10, 11, 12]]],
        "neighbor_relations": [[[0, 1, -1], [2, -1, -1], [0, 2, -1], [0, 1, -1]], [[0, 0, 1]]],
        "neighbor_directions": [[[0, 1, -1], [0, -1, -1], [1, 1, -1], [0, 1, -1]], [[1, 0, 0]]],
        "neighbor_types": [[[0, 1, -1], [1, -1, -1], [0, 0, -1], [0, 1, -1]], [[0, 0, 1]]],
    }


def _mention_sets(batch) -> tuple[set, set]:
    """(knowledge, targets) as (sequence, start, end); without SOP, spans are the corpus's."""
    knowledge = {(row, *span) for row, span in zip(batch["mention_batch"].tolist(), batch["mention_spans"].tolist())}
    targets = {
        (row, *span) for row, span in zip(batch["mnem_mention_batch"].tolist(), batch["mnem_mention_spans"].tolist())
    }
    return knowledge, targets


def _with_new_neighbors(rows, mentions):
    """``rows`` with the neighbour ids e of ``mentions`` ((sequence, start, end)) replaced by 23 − e."""
    altered = copy.deepcopy(rows)
    for row, spans in enumerate(rows["mention_spans"]):
        for index, span in enumerate(spans):
            if (row, *span) in mentions:
                old = rows["neighbor_ids"][row][index]
                altered["neighbor_ids"][row][index] = [23 - e if e >= 0 else e for e in old]
    return altered


def test_changing_the_neighbours_of_mnem_targets_changes_no_hidden_state():
    """The label leak of the reviewed code, through the collator: change the corpus's neighbour rows
    of the mentions the collator made MNeM targets, collate again with the same seeds (same masks),
    and no hidden state may change, while MNeM's targets do. A collator that injects a target's
    neighbours (every mention injected, or masked mentions also predicted) fails here; changing the
    knowledge mentions' rows instead must change the hidden states (the test can see an injection)."""
    collator = _collator(rate=0.5, sentence_order=False)
    rows = _leak_rows()
    torch.manual_seed(0)
    model = SmedbertForPreTraining(tiny_config(neighbor_candidates="one_hop")).eval()
    checked = 0
    for step in range(8):
        seeds = _seeds(step, size=2)
        batch = collator(rows, seeds)
        knowledge, targets = _mention_sets(batch)
        if not (knowledge and len(batch["mnem_entity_ids"])):
            continue
        changed = collator(_with_new_neighbors(rows, targets), seeds)
        injected = collator(_with_new_neighbors(rows, knowledge), seeds)
        assert _mention_sets(changed) == _mention_sets(injected) == (knowledge, targets)  # same masks
        with torch.no_grad():
            before, after = model(**batch).last_hidden_state, model(**changed).last_hidden_state
            control = model(**injected).last_hidden_state
        assert not torch.equal(batch["mnem_entity_ids"], changed["mnem_entity_ids"])  # MNeM saw the change
        assert torch.equal(before, after), step
        assert not torch.equal(before, control), step
        checked += 1
    assert checked >= 3


def test_no_mnem_target_shares_its_entity_with_an_injected_mention_of_its_sequence():
    """The entity-level copy path: an unmasked mention of an entity that a masked mention of the same
    sequence names (its neighbours injected) is not an MNeM target (nor injected)."""
    collator = _collator(rate=0.5, sentence_order=False)
    rows = _leak_rows()
    entity_of = {
        (row, *span): entity
        for row, spans in enumerate(rows["mention_spans"])
        for span, entity in zip(spans, rows["mention_entity_ids"][row])
    }
    exercised = 0
    for step in range(40):
        batch = collator(rows, _seeds(step, size=2))
        knowledge, targets = _mention_sets(batch)
        chosen = batch["labels"] >= 0
        injected = {(row, entity_of[(row, *span)]) for row, *span in knowledge}
        for (row, start, end), entity in entity_of.items():
            unmasked = not chosen[row, start:end].all()
            if unmasked and (row, entity) in injected:  # the case of the rule, found from the masks alone
                exercised += 1
                assert (row, start, end) not in targets | knowledge
            elif unmasked:
                assert (row, start, end) in targets
        assert not any((row, entity_of[(row, *span)]) in injected for row, *span in targets)
        edges_per_target = np.bincount(batch["mnem_edge_mention"].numpy(), minlength=len(targets))
        assert batch.target_counts["mnem"] == edges_per_target.sum() == len(batch["mnem_entity_ids"])
    assert exercised >= 3


def test_split_mentions_by_hand():
    mention_batch = np.array([0, 0, 0, 1, 1])
    entities = np.array([4, 4, 7, 4, 9])
    masked = np.array([True, False, False, False, True])
    knowledge, targets = split_mentions(mention_batch, entities, masked)
    # mention 1 names entity 4, injected in sequence 0 by mention 0; mention 3 names 4 in sequence 1 (not injected)
    assert knowledge.tolist() == [0, 4] and targets.tolist() == [2, 3]
    knowledge, targets = split_mentions(mention_batch, None, masked)
    assert knowledge.tolist() == [0, 4] and targets.tolist() == [1, 2, 3]


def test_an_example_does_not_depend_on_its_batch_partners():
    rows = _rows()
    together = _collator()(rows, _seeds(5))
    alone = _collator()({k: v[:1] for k, v in rows.items()}, _seeds(5)[:1])
    length = int(alone["attention_mask"][0].sum())
    for name in ("input_ids", "labels", "token_type_ids"):
        assert torch.equal(alone[name][0, :length], together[name][0, :length])
    assert alone["sentence_order_label"][0] == together["sentence_order_label"][0]
    first_rows = together["mnem_mention_batch"] == 0
    first_edges = first_rows[together["mnem_edge_mention"]]
    assert torch.equal(alone["mnem_negative_ids"], together["mnem_negative_ids"][first_edges])


def test_an_example_gets_the_same_hidden_states_beside_any_batch_partner():
    """Pre-training with the R-GCN, collated batches: chunk 0 alone and beside chunk 1 (whose mention
    shares neighbour entities 5, 8, 9 with chunk 0's, all mentions masked so all are injected)."""
    rows = _rows()
    collator = _collator(rate=0.9, num_entity_types=2, relational=True)
    # the first masking that injects every mention of both chunks
    step = next(
        step
        for step in range(100)
        if len(collator({k: v[:2] for k, v in rows.items()}, _seeds(step, size=2))["mention_batch"]) == 4
    )
    together = collator({k: v[:2] for k, v in rows.items()}, _seeds(step, size=2))
    alone = collator({k: v[:1] for k, v in rows.items()}, _seeds(step, size=1))
    assert len(alone["mention_batch"]) == 3
    torch.manual_seed(0)
    model = SmedbertForPreTraining(
        tiny_config(neighbor_candidates="one_hop", num_entity_types=2, relational_encoder="rgcn")
    ).eval()
    with torch.no_grad():
        model.kg.entities.normal_()
        length = int(alone["attention_mask"][0].sum())
        torch.testing.assert_close(
            model(**together).last_hidden_state[0, :length],
            model(**alone).last_hidden_state[0, :length],
            rtol=0,
            atol=1e-5,
        )


def test_type_frequency_sampler_follows_q_within_the_type():
    frequencies = np.array([0, 3, 6, 0, 10, 1, 9])
    types = np.array([0, 0, 0, 1, 1, -1, -1])
    sampler = TypeFrequencySampler(frequencies, types)
    # Q by hand, add-one smoothed within each type (untyped is its own bucket)
    expected = {0: [1 / 12, 4 / 12, 7 / 12], 1: [1 / 12, 11 / 12], 2: [2 / 12, 10 / 12]}
    assert np.allclose(np.exp(sampler.log_q), [1 / 12, 4 / 12, 7 / 12, 1 / 12, 11 / 12, 2 / 12, 10 / 12])
    rng = np.random.default_rng(0)
    for positive, members in ((0, [0, 1, 2]), (4, [3, 4]), (5, [5, 6])):
        draws = sampler.sample(np.full(20000, positive), 5, rng).ravel()
        assert set(np.unique(draws)) <= set(members)  # never another type
        observed = np.array([(draws == m).mean() for m in members])
        bucket = {0: 0, 4: 1, 5: 2}[positive]
        assert np.allclose(observed, expected[bucket], atol=0.01)


# -- the vectorised collator against the per-mention loop it replaced ---------------------------------------
def _concat(parts, shape=(0,), dtype=np.int64):
    return torch.from_numpy(np.concatenate(parts).astype(dtype) if parts else np.zeros(shape, dtype))


class LoopCollator(SmedbertCollator):
    """The per-example, per-mention construction of SMedBERT's inputs before issue 20 (the reference)."""

    def method_inputs(
        self,
        batch: Batch,
        rows: dict,
        examples: list,
        original_ids: np.ndarray,
        labels: np.ndarray,
        rngs: list[np.random.Generator],
    ) -> None:
        has_neighbors = "neighbor_ids" in rows
        chosen = labels >= 0
        knowledge: dict[str, list[np.ndarray]] = {
            key: []
            for key in (
                "mention_batch",
                "mention_spans",
                "neighbor_mention",
                "neighbor_entity_ids",
                "neighbor_relation_ids",
                "neighbor_directions",
                "neighbor_type_ids",
            )
        }
        mnem: dict[str, list[np.ndarray]] = {
            key: []
            for key in (
                "mnem_mention_batch",
                "mnem_mention_spans",
                "mnem_edge_mention",
                "mnem_entity_ids",
                "mnem_relation_ids",
                "mnem_directions",
                "mnem_negative_ids",
                "mnem_log_q",
            )
        }
        num_knowledge = num_mnem = 0
        for row, (example, rng) in enumerate(zip(examples, rngs)):
            spans = example.mention_spans
            if not len(spans):
                continue
            masked = np.array([chosen[row, start:end].all() for start, end in spans.tolist()], dtype=bool)
            corpus_rows = example.mention_rows
            entities = np.asarray(rows["mention_entity_ids"][row], dtype=np.int64)[corpus_rows]
            # an unmasked mention of an entity a masked mention of the sequence names is in neither set
            left_out = ~masked & np.isin(entities, entities[masked])
            if has_neighbors:
                num_corpus_mentions = len(rows["mention_spans"][row])
                neighbor_rows = {
                    name: np.asarray(rows[column][row], dtype=np.int64).reshape(num_corpus_mentions, -1)[corpus_rows]
                    for name, column in (
                        ("ids", "neighbor_ids"),
                        ("relations", "neighbor_relations"),
                        ("directions", "neighbor_directions"),
                        ("types", "neighbor_types"),
                    )
                }  # (mentions, K) each
            for is_knowledge in (True, False):
                members = np.flatnonzero((masked == is_knowledge) & ~left_out)  # mentions of this set
                if not len(members):
                    continue
                base = num_knowledge if is_knowledge else num_mnem
                if is_knowledge:
                    knowledge["mention_batch"].append(np.full(len(members), row, np.int64))
                    knowledge["mention_spans"].append(spans[members])
                    num_knowledge += len(members)
                else:
                    mnem["mnem_mention_batch"].append(np.full(len(members), row, np.int64))
                    mnem["mnem_mention_spans"].append(spans[members])
                    num_mnem += len(members)
                if not has_neighbors:
                    continue
                member, slot = np.nonzero(neighbor_rows["ids"][members] >= 0)  # valid neighbour edges
                entity = neighbor_rows["ids"][members][member, slot]
                relation = neighbor_rows["relations"][members][member, slot]
                direction = neighbor_rows["directions"][members][member, slot]
                if is_knowledge:
                    knowledge["neighbor_mention"].append(base + member)
                    knowledge["neighbor_entity_ids"].append(entity)
                    knowledge["neighbor_relation_ids"].append(relation)
                    knowledge["neighbor_directions"].append(direction)
                    knowledge["neighbor_type_ids"].append(neighbor_rows["types"][members][member, slot])
                elif self.sampler is not None and len(entity):
                    negatives = self.sampler.sample(entity, self.num_negatives, rng)  # (edges, negatives)
                    candidates = np.concatenate([entity[:, None], negatives], 1)
                    mnem["mnem_edge_mention"].append(base + member)
                    mnem["mnem_entity_ids"].append(entity)
                    mnem["mnem_relation_ids"].append(relation)
                    mnem["mnem_directions"].append(direction)
                    mnem["mnem_negative_ids"].append(negatives)
                    mnem["mnem_log_q"].append(self.sampler.log_q[candidates])
        batch["mention_batch"] = _concat(knowledge["mention_batch"])
        batch["mention_spans"] = _concat(knowledge["mention_spans"], (0, 2))
        if has_neighbors:
            for name in (
                "neighbor_mention",
                "neighbor_entity_ids",
                "neighbor_relation_ids",
                "neighbor_directions",
                "neighbor_type_ids",
            ):
                batch[name] = _concat(knowledge[name])
        if self.knowledge_losses:
            batch.target_counts["mmem"] = num_knowledge
        if has_neighbors and self.sampler is not None:
            batch["mnem_mention_batch"] = _concat(mnem["mnem_mention_batch"])
            batch["mnem_mention_spans"] = _concat(mnem["mnem_mention_spans"], (0, 2))
            for name in ("mnem_edge_mention", "mnem_entity_ids", "mnem_relation_ids", "mnem_directions"):
                batch[name] = _concat(mnem[name])
            batch["mnem_negative_ids"] = _concat(mnem["mnem_negative_ids"], (0, self.num_negatives))
            batch["mnem_log_q"] = _concat(mnem["mnem_log_q"], (0, self.num_negatives + 1), np.float32)
            if self.knowledge_losses:
                batch.target_counts["mnem"] = len(batch["mnem_entity_ids"])


@pytest.mark.parametrize("step", range(12))
def test_the_vectorised_collator_equals_the_per_mention_loop(step):
    options = dict(num_entity_types=2, relational=True)
    batch = _collator(**options)(_rows(), _seeds(step))
    reference = LoopCollator.__new__(LoopCollator)
    reference.__dict__.update(_collator(**options).__dict__)
    expected = reference(_rows(), _seeds(step))
    assert batch.target_counts == expected.target_counts
    assert set(expected) <= set(batch)
    for name, value in expected.items():
        assert batch[name].dtype == value.dtype and torch.equal(batch[name], value), name


@pytest.mark.parametrize("overrides", [{}, {"relational_encoder": "rgcn"}, {"use_type_attention": False}])
def test_precomputed_indices_give_the_same_forward_as_computing_them_in_the_model(overrides):
    collator = _collator(num_entity_types=2, relational=True)
    batch = collator(_rows(), _seeds(3))
    precomputed = {
        "mention_tokens",
        "neighbor_type_group",
        "type_group_mention",
        "co_neighbor_pairs",
        "mnem_mention_tokens",
    }
    assert precomputed <= set(batch)
    torch.manual_seed(0)
    model = SmedbertForPreTraining(tiny_config(neighbor_candidates="one_hop", num_entity_types=2, **overrides)).eval()
    with torch.no_grad():
        given = model(**batch)
        computed = model(**{k: v for k, v in batch.items() if k not in precomputed})
    assert set(given.losses) == set(computed.losses) == {"mlm", "sop", "mnem", "mmem"}
    assert torch.equal(given.last_hidden_state, computed.last_hidden_state)
    for name, loss in computed.losses.items():
        assert torch.equal(given.losses[name], loss), name


#: aten ops that wait for the device (on a GPU) before the host can go on
SYNCHRONISING = (
    "aten._local_scalar_dense",
    "aten.nonzero",
    "aten._unique2",
    "aten.unique_dim",
    "aten.unique_consecutive",
    "aten.repeat_interleave.Tensor",
    "aten.masked_select",
    "aten.item",
)


class _SyncRecorder(TorchDispatchMode):
    """Records the synchronising ops a forward pass calls, with the kgplm/PyG frames that called them."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, list[str]]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func)
        boolean_index = name.startswith(("aten.index.", "aten.index_put")) and any(
            isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in (args[1] if len(args) > 1 else ()) or ()
        )
        if name.startswith(SYNCHRONISING) or boolean_index:
            frames = [f"{frame.filename}:{frame.lineno}" for frame in traceback.extract_stack()]
            self.calls.append((name, frames))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("overrides", [{}, {"relational_encoder": "rgcn"}])
def test_the_knowledge_module_makes_no_host_device_synchronisation_on_collated_batches(overrides):
    """What remains is shared with plain BERT and counted: Hugging Face's attention-mask check
    (transformers) and the MLM/SOP objectives' target counts (kgplm/models/objectives.py)."""
    batch = _collator(num_entity_types=2, relational=True)(_rows(), _seeds(3))
    torch.manual_seed(0)
    model = SmedbertForPreTraining(tiny_config(neighbor_candidates="one_hop", num_entity_types=2, **overrides))
    with _SyncRecorder() as recorder:
        output = model(**batch)
    assert set(output.losses) == {"mlm", "sop", "mnem", "mmem"}
    shared = ("transformers", "kgplm/models/objectives.py")
    own = [
        (name, [f for f in frames if "kgplm" in f][-3:])
        for name, frames in recorder.calls
        if not any(marker in frame for frame in frames for marker in shared)
    ]
    assert own == []
    assert recorder.calls  # the recorder sees the shared ones


def test_a_task_example_gets_the_same_hidden_states_beside_any_batch_partner(toy_turtle):
    """Fine-tuning with the R-GCN: the lookup's batches of text 0 alone and beside text 1, whose
    mention neighbours entities 1 and 2 as text 0's mention does (every linked mention is injected)."""
    from kgplm import KGStore
    from kgplm.kg.pepr import NeighborTable
    from kgplm.methods.smedbert import KnowledgeLookup

    store = KGStore.from_rdf(toy_turtle)
    rows = np.array([[1, 2, 3], [0, 1, 2]])
    table = NeighborTable(
        seeds=np.array([0, 3]),
        neighbors=rows,
        relations=np.array([[0, 1, 0], [1, 0, 1]]),
        directions=np.array([[0, 1, 0], [1, 0, 0]]),
        scores=np.ones((2, 3)),
    )
    lookup = KnowledgeLookup(store, table, relational=True)
    parts = [
        {
            "mention_spans": np.array([[1, 3]]),
            "neighbor_ids": rows[:1],
            "neighbor_relations": table.relations[:1],
            "neighbor_directions": table.directions[:1],
            "neighbor_types": np.zeros((1, 3), np.int64),
        },
        {
            "mention_spans": np.array([[2, 4]]),
            "neighbor_ids": rows[1:],
            "neighbor_relations": table.relations[1:],
            "neighbor_directions": table.directions[1:],
            "neighbor_types": np.ones((1, 3), np.int64),
        },
    ]
    input_ids = torch.randint(5, 60, (2, 8), generator=torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    model = SmedbertForPreTraining(
        tiny_config(neighbor_candidates="one_hop", num_entity_types=store.num_types, relational_encoder="rgcn")
    ).eval()
    with torch.no_grad():
        model.kg.entities.normal_()
        together = model(
            input_ids=input_ids, attention_mask=torch.ones_like(input_ids), **lookup.collate(parts)
        ).last_hidden_state
        alone = model(
            input_ids=input_ids[:1], attention_mask=torch.ones_like(input_ids[:1]), **lookup.collate(parts[:1])
        ).last_hidden_state
    torch.testing.assert_close(together[0], alone[0], rtol=0, atol=1e-5)
