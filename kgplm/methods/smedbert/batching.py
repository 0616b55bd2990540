"""SMedBERT's batches: knowledge mentions and MNeM targets at pre-training, linked mentions at fine-tuning.

Pre-training (:class:`SmedbertCollator`): after masking, each example's linked mentions are split
into two disjoint sets, as in the authors' code (see :mod:`kgplm.methods.smedbert.modeling`):
mentions whose tokens were all chosen for masking are *knowledge* mentions (neighbours injected,
MMeM targets); the others are *MNeM targets* (no injection; their neighbours are predicted).

Negatives for masked neighbour modelling follow SMedBERT's Q(e) = t_e / C_τ(e) (appendix B):
corpus frequency within the entity's type, add-one smoothed; each example draws its negatives
from its own generator.

Fine-tuning (:class:`KnowledgeLookup`): every linked mention of a task text is a knowledge
mention, with the PEPR neighbours of the pre-training run's table.
"""

from __future__ import annotations

import numpy as np
import torch

from kgplm.exceptions import ConfigurationError
from kgplm.text.alignment import char_spans_to_token_spans
from kgplm.training.collator import Batch, PretrainingCollator, PretrainingExample

__all__ = ["TypeFrequencySampler", "SmedbertCollator", "KnowledgeLookup", "knowledge_inputs"]


class TypeFrequencySampler:
    """Draws entities with probability Q(e) = (t_e + 1) / Σ_{τ(e')=τ} (t_{e'} + 1) within a type.

    ``type_ids``: one type per entity, −1 for untyped (one extra bucket). ``log_q[e]`` is log Q(e).
    Sampling is one ``searchsorted`` on a table whose type τ occupies [τ, τ + 1).
    """

    def __init__(self, frequencies: np.ndarray, type_ids: np.ndarray) -> None:
        frequencies = np.asarray(frequencies, dtype=np.float64)
        type_ids = np.asarray(type_ids, dtype=np.int64)
        if frequencies.shape != type_ids.shape:
            raise ConfigurationError(f"frequencies {frequencies.shape} and type_ids {type_ids.shape} differ in shape")
        buckets = np.where(type_ids < 0, type_ids.max(initial=-1) + 1, type_ids)
        weights = frequencies + 1.0
        totals = np.bincount(buckets, weights=weights)
        self.log_q = np.log(weights / totals[buckets])  # (entities,)
        self.buckets = buckets
        self.order = np.argsort(buckets, kind="stable")  # entities grouped by bucket
        sorted_buckets = buckets[self.order]
        within = np.cumsum(weights[self.order]) - np.concatenate([[0.0], np.cumsum(totals)])[sorted_buckets]
        self.table = sorted_buckets + within / totals[sorted_buckets]  # bucket τ spans (τ, τ + 1]
        self.bucket_last = np.searchsorted(sorted_buckets, np.arange(len(totals)), side="right") - 1

    def sample(self, positives: np.ndarray, num_samples: int, rng: np.random.Generator) -> np.ndarray:
        """(len(positives), num_samples) entities drawn from Q restricted to each positive's type."""
        buckets = self.buckets[np.asarray(positives, dtype=np.int64)]
        draws = buckets[:, None] + rng.random((len(buckets), num_samples))  # (edges, samples)
        positions = np.searchsorted(self.table, draws, side="left")
        # rounding can put a draw just past its bucket's last entry: stay inside the bucket
        return self.order[np.minimum(positions, self.bucket_last[buckets][:, None])]


def _concat(parts: list[np.ndarray], shape=(0,), dtype=np.int64) -> torch.Tensor:
    return torch.from_numpy(np.concatenate(parts).astype(dtype) if parts else np.zeros(shape, dtype))


class SmedbertCollator(PretrainingCollator):
    """:class:`~kgplm.training.collator.PretrainingCollator` plus SMedBERT's mention and neighbour tensors.

    Args:
        sampler, num_negatives: MNeM negatives (types of the positives are the corpus's ``neighbor_types``).
        knowledge_losses: whether MNeM/MMeM targets are counted (``use_knowledge_losses``).
    """

    def __init__(self, *, sampler: TypeFrequencySampler | None, num_negatives: int, knowledge_losses: bool = True,
                 **options) -> None:
        super().__init__(**options)
        self.sampler = sampler
        self.num_negatives = num_negatives
        self.knowledge_losses = knowledge_losses

    def method_inputs(self, batch: Batch, rows: dict, examples: list[PretrainingExample], original_ids: np.ndarray,
                      labels: np.ndarray, rngs: list[np.random.Generator]) -> None:
        has_neighbors = "neighbor_ids" in rows
        chosen = labels >= 0
        knowledge: dict[str, list[np.ndarray]] = {key: [] for key in (
            "mention_batch", "mention_spans", "neighbor_mention", "neighbor_entity_ids", "neighbor_relation_ids",
            "neighbor_directions", "neighbor_type_ids")}
        mnem: dict[str, list[np.ndarray]] = {key: [] for key in (
            "mnem_mention_batch", "mnem_mention_spans", "mnem_edge_mention", "mnem_entity_ids", "mnem_relation_ids",
            "mnem_directions", "mnem_negative_ids", "mnem_log_q")}
        num_knowledge = num_mnem = 0
        for row, (example, rng) in enumerate(zip(examples, rngs)):
            spans = example.mention_spans
            if not len(spans):
                continue
            masked = np.array([chosen[row, start:end].all() for start, end in spans.tolist()], dtype=bool)
            corpus_rows = example.mention_rows
            if has_neighbors:
                num_corpus_mentions = len(rows["mention_spans"][row])
                neighbor_rows = {name: np.asarray(rows[column][row], dtype=np.int64).reshape(num_corpus_mentions, -1)[
                    corpus_rows] for name, column in (("ids", "neighbor_ids"), ("relations", "neighbor_relations"),
                                                      ("directions", "neighbor_directions"),
                                                      ("types", "neighbor_types"))}  # (mentions, K) each
            for is_knowledge in (True, False):
                members = np.flatnonzero(masked == is_knowledge)  # mentions of this set in the example
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
        batch["mention_masked"] = torch.ones(num_knowledge, dtype=torch.bool)
        if has_neighbors:
            for name in ("neighbor_mention", "neighbor_entity_ids", "neighbor_relation_ids", "neighbor_directions",
                         "neighbor_type_ids"):
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


class KnowledgeLookup:
    """Links mentions in a task text and attaches each mention's PEPR neighbours, as in pre-training.

    Mentions of entities outside the neighbour table (entities the pre-training corpus never
    mentioned) keep their mention but get no neighbours; the hybrid attention then contributes a
    zero summary for them. :meth:`features` gives one example's arrays, :meth:`collate` a batch.
    """

    def __init__(self, store, table, linker=None) -> None:
        from kgplm.text.linking import EntityLinker

        self.store, self.table = store, table
        self.linker = linker if linker is not None else EntityLinker(store)
        self.primary_types = store.primary_type_ids()
        self.row = {int(seed): row for row, seed in enumerate(np.asarray(table.seeds).tolist())}
        self.neighbors = np.asarray(table.neighbors)
        self.relations = np.asarray(table.relations)
        self.directions = np.asarray(table.directions)

    def features(self, text: str, offsets: np.ndarray) -> dict[str, np.ndarray]:
        """Token spans (over ``offsets``' tokens) and neighbour rows of the linked mentions of ``text``."""
        starts, ends, entries = self.linker.find(text)
        entity_ids = self.linker.best_entities(entries)
        spans = char_spans_to_token_spans(offsets, np.stack([starts, ends], 1) if len(starts) else [])
        kept = np.flatnonzero(spans[:, 0] >= 0)
        entity_ids = entity_ids[kept]
        k = self.neighbors.shape[1]
        neighbors = np.full((len(kept), k), -1, dtype=np.int64)
        relations, directions = neighbors.copy(), neighbors.copy()
        for index, entity in enumerate(entity_ids.tolist()):
            row = self.row.get(entity)
            if row is not None:
                neighbors[index], relations[index], directions[index] = (
                    self.neighbors[row], self.relations[row], self.directions[row])
        types = np.where(neighbors >= 0, self.primary_types[np.maximum(neighbors, 0)], -1)
        return {"mention_spans": spans[kept], "neighbor_ids": neighbors, "neighbor_relations": relations,
                "neighbor_directions": directions, "neighbor_types": types}

    @staticmethod
    def collate(parts: list[dict[str, np.ndarray]]) -> dict[str, torch.Tensor]:
        """The encoder's knowledge inputs for a batch of :meth:`features` results (one per sequence)."""
        mention_batch, spans = [], []
        edges: dict[str, list[np.ndarray]] = {key: [] for key in ("mention", "entity", "relation", "direction",
                                                                  "type")}
        offset = 0
        for row, part in enumerate(parts):
            count = len(part["mention_spans"])
            mention_batch.append(np.full(count, row, np.int64))
            spans.append(part["mention_spans"].reshape(-1, 2))
            valid_mention, valid_slot = np.nonzero(part["neighbor_ids"] >= 0)
            edges["mention"].append(valid_mention + offset)
            edges["entity"].append(part["neighbor_ids"][valid_mention, valid_slot])
            edges["relation"].append(part["neighbor_relations"][valid_mention, valid_slot])
            edges["direction"].append(part["neighbor_directions"][valid_mention, valid_slot])
            edges["type"].append(part["neighbor_types"][valid_mention, valid_slot])
            offset += count
        return {"mention_batch": _concat(mention_batch), "mention_spans": _concat(spans, (0, 2)).reshape(-1, 2),
                "neighbor_mention": _concat(edges["mention"]), "neighbor_entity_ids": _concat(edges["entity"]),
                "neighbor_relation_ids": _concat(edges["relation"]), "neighbor_directions": _concat(edges["direction"]),
                "neighbor_type_ids": _concat(edges["type"])}


#: The last lookups built, by (graph, table) files and their modification times: linking CMeKG's 135k
#: names takes seconds, and runs that share a graph and table (seeds, ablations) share one lookup.
_LOOKUPS: dict[tuple, KnowledgeLookup] = {}
_MAX_LOOKUPS = 2


def _file_key(path) -> tuple:
    from pathlib import Path

    path = Path(path)
    stamp = path / "manifest.json" if path.is_dir() else path
    return (str(path.resolve()), stamp.stat().st_mtime_ns) if stamp.exists() else (str(path),)


def knowledge_inputs(run, progress: bool) -> KnowledgeLookup:
    """The fine-tuning inputs of a SMedBERT model: the graph and PEPR table of its pre-training run.

    ``run`` is a :class:`~kgplm.training.run.RunDirectory` of the pre-training run: the table it
    computed (``kg/neighbors.npz``), or the one it was given (``kgplm.train(neighbor_table=...)``).
    A lookup is stateless once built, so runs with the same graph and table files share one.
    """
    from pathlib import Path

    from kgplm.exceptions import MissingFileError
    from kgplm.kg.pepr import NeighborTable

    table_path = run.neighbor_table_path
    if not table_path.is_file() and run.read_run_config().get("neighbor_table"):
        table_path = Path(run.read_run_config()["neighbor_table"])
    if not table_path.is_file():
        raise MissingFileError(table_path, "PEPR neighbour table of the pre-training run (a SMedBERT model needs "
                                           "the graph and neighbour table it was trained with)")
    graph = run.store_dir if (run.store_dir / "manifest.json").is_file() else run.read_run_config()["graph"]
    key = (_file_key(graph), _file_key(table_path))
    if key not in _LOOKUPS:
        while len(_LOOKUPS) >= _MAX_LOOKUPS:
            _LOOKUPS.pop(next(iter(_LOOKUPS)))
        _LOOKUPS[key] = KnowledgeLookup(run.open_store(progress=progress), NeighborTable.load(table_path))
    return _LOOKUPS[key]
