"""SMedBERT's batches: knowledge mentions and MNeM targets at pre-training, linked mentions at fine-tuning.

Pre-training (:class:`SmedbertCollator`): after masking, each example's linked mentions are split
into two disjoint sets, as in the authors' code (see :mod:`kgplm.methods.smedbert.modeling`):
mentions whose tokens were all chosen for masking are *knowledge* mentions (neighbours injected,
MMeM targets); the others are *MNeM targets* (no injection; their neighbours are predicted),
except those naming the entity of a knowledge mention of their sequence (:func:`split_mentions`).

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
from kgplm.methods.smedbert.modeling import type_groups
from kgplm.models.modules import mention_token_index, neighbor_graph
from kgplm.training.collator import Batch, PretrainingCollator, PretrainingExample
from kgplm.finetuning.mention_inputs import linked_token_spans

__all__ = ["TypeFrequencySampler", "SmedbertCollator", "KnowledgeLookup", "knowledge_inputs", "split_mentions"]


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
        positives = np.asarray(positives, dtype=np.int64)
        return self.draw(positives, rng.random((len(positives), num_samples)))

    def draw(self, positives: np.ndarray, uniforms: np.ndarray) -> np.ndarray:
        """The entities of ``uniforms`` (positives, samples) in [0, 1): Q's inverse CDF within each positive's type."""
        buckets = self.buckets[np.asarray(positives, dtype=np.int64)]
        draws = buckets[:, None] + uniforms  # (edges, samples)
        positions = np.searchsorted(self.table, draws, side="left")
        # rounding can put a draw just past its bucket's last entry: stay inside the bucket
        return self.order[np.minimum(positions, self.bucket_last[buckets][:, None])]


def _tensor(array: np.ndarray, dtype=np.int64) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(array, dtype=dtype))


def _knowledge_indices(
    mention_batch: np.ndarray,
    spans: np.ndarray,
    edge_mention: np.ndarray,
    type_ids: np.ndarray,
    num_types: int | None,
    relational: bool,
) -> dict[str, torch.Tensor]:
    """The indices the SMedBERT encoder would otherwise compute on the device (see ``SmedbertEncoding.encode``),
    built on the CPU with the same functions."""
    indices = {"mention_tokens": torch.stack(mention_token_index(_tensor(mention_batch), _tensor(spans)))}
    if len(edge_mention) and num_types is not None:
        indices["neighbor_type_group"], indices["type_group_mention"] = type_groups(
            _tensor(edge_mention), _tensor(type_ids), num_types
        )
    if len(edge_mention) and relational:
        indices.update(neighbor_graph(_tensor(edge_mention)))
    return indices


def split_mentions(
    mention_batch: np.ndarray, entity_ids: np.ndarray | None, masked: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """``(knowledge, targets)``: positions of the knowledge mentions and of the MNeM targets.

    Knowledge mentions are the masked ones (``masked``: every token chosen for masking). An unmasked
    mention is an MNeM target unless a knowledge mention *of the same entity* sits in the same
    sequence: that one's neighbours (the same PEPR row) are injected, and MNeM could copy them
    instead of predicting them. Such a mention is neither injected nor predicted (it stays plain
    text for MLM). ``entity_ids`` ``None`` (a corpus without the column) keeps every unmasked mention.
    """
    knowledge, unmasked = np.flatnonzero(masked), np.flatnonzero(~masked)
    if entity_ids is None or not len(knowledge) or not len(unmasked):
        return knowledge, unmasked
    # one key per (sequence, entity): the sequence's injected entities against each unmasked mention's
    width = int(entity_ids.max()) + 1
    keys = mention_batch * width + entity_ids
    return knowledge, unmasked[~np.isin(keys[unmasked], keys[knowledge])]


#: The corpus columns of each mention's PEPR row, by short name.
NEIGHBOR_COLUMNS = {
    "ids": "neighbor_ids",
    "relations": "neighbor_relations",
    "directions": "neighbor_directions",
    "types": "neighbor_types",
}


class SmedbertCollator(PretrainingCollator):
    """:class:`~kgplm.training.collator.PretrainingCollator` plus SMedBERT's mention and neighbour tensors.

    Args:
        sampler, num_negatives: MNeM negatives (types of the positives are the corpus's ``neighbor_types``).
        knowledge_losses: whether MNeM/MMeM targets are counted (``use_knowledge_losses``).
        num_entity_types, relational: the model's ``num_entity_types`` and whether it runs the R-GCN;
            with them the collator also builds the type-attention groups and the R-GCN graph, so
            that the forward pass does not synchronise with the device (``None``/``False``: the
            model builds them itself).

    The batch is built without a loop over mentions: all mentions of the batch are one flat array
    (per-example work is limited to reading each example's PEPR rows and drawing its negatives
    from its own generator, which keeps an example independent of its batch partners).
    """

    def __init__(
        self,
        *,
        sampler: TypeFrequencySampler | None,
        num_negatives: int,
        knowledge_losses: bool = True,
        num_entity_types: int | None = None,
        relational: bool = False,
        **options,
    ) -> None:
        super().__init__(**options)
        self.sampler = sampler
        self.num_negatives = num_negatives
        self.knowledge_losses = knowledge_losses
        self.num_entity_types = num_entity_types
        self.relational = relational

    @staticmethod
    def _neighbor_rows(rows: dict, examples: list[PretrainingExample], counts: np.ndarray) -> dict[str, np.ndarray]:
        """Each surviving mention's PEPR row, (mentions, K) per column, in the flat mention order."""
        parts: dict[str, list[np.ndarray]] = {name: [] for name in NEIGHBOR_COLUMNS}
        for row, example in enumerate(examples):
            if not counts[row]:
                continue
            num_corpus_mentions = len(rows["mention_spans"][row])
            for name, column in NEIGHBOR_COLUMNS.items():
                table = np.asarray(rows[column][row], dtype=np.int64).reshape(num_corpus_mentions, -1)
                parts[name].append(table[example.mention_rows])
        return {
            name: np.concatenate(chunks) if chunks else np.zeros((0, 0), np.int64) for name, chunks in parts.items()
        }

    @staticmethod
    def _mention_entities(rows: dict, examples: list[PretrainingExample], counts: np.ndarray) -> np.ndarray | None:
        """Each surviving mention's entity, in the flat mention order (``None`` without the column)."""
        if "mention_entity_ids" not in rows:
            return None
        parts = [
            np.asarray(rows["mention_entity_ids"][row], dtype=np.int64)[example.mention_rows]
            for row, example in enumerate(examples)
            if counts[row]
        ]
        return np.concatenate(parts) if parts else np.zeros(0, np.int64)

    def method_inputs(
        self,
        batch: Batch,
        rows: dict,
        examples: list[PretrainingExample],
        original_ids: np.ndarray,
        labels: np.ndarray,
        rngs: list[np.random.Generator],
    ) -> None:
        # every mention of the batch, flat: its sequence and token span
        counts = np.array([len(example.mention_spans) for example in examples], dtype=np.int64)
        mention_batch = np.repeat(np.arange(len(examples)), counts)  # (mentions,)
        spans = np.concatenate([example.mention_spans.reshape(-1, 2) for example in examples]).astype(np.int64)
        # knowledge mentions: every token chosen for masking (chosen tokens counted by prefix sums)
        chosen = np.concatenate([np.zeros((len(labels), 1), np.int64), np.cumsum(labels >= 0, 1)], 1)
        masked = (chosen[mention_batch, spans[:, 1]] - chosen[mention_batch, spans[:, 0]]) == spans[:, 1] - spans[:, 0]
        entities = self._mention_entities(rows, examples, counts)
        knowledge, targets = split_mentions(mention_batch, entities, masked)
        batch["mention_batch"], batch["mention_spans"] = _tensor(mention_batch[knowledge]), _tensor(spans[knowledge])
        if self.knowledge_losses:
            batch.target_counts["mmem"] = len(knowledge)
        if "neighbor_ids" not in rows:
            batch["mention_tokens"] = torch.stack(mention_token_index(batch["mention_batch"], batch["mention_spans"]))
            return
        neighbors = self._neighbor_rows(rows, examples, counts)  # (mentions, K) each
        member, slot = np.nonzero(neighbors["ids"][knowledge] >= 0)  # valid neighbour edges, mention-major
        mention_of_edge = knowledge[member]
        edges = {name: neighbors[name][mention_of_edge, slot] for name in NEIGHBOR_COLUMNS}
        batch["neighbor_mention"] = _tensor(member)
        for name, key in (
            ("ids", "neighbor_entity_ids"),
            ("relations", "neighbor_relation_ids"),
            ("directions", "neighbor_directions"),
            ("types", "neighbor_type_ids"),
        ):
            batch[key] = _tensor(edges[name])
        batch.update(
            _knowledge_indices(
                mention_batch[knowledge],
                spans[knowledge],
                member,
                edges["types"],
                self.num_entity_types,
                self.relational,
            )
        )
        if self.sampler is None:
            return
        member, slot = np.nonzero(neighbors["ids"][targets] >= 0)  # MNeM edges, grouped by example
        mention_of_edge = targets[member]
        entity = neighbors["ids"][mention_of_edge, slot]
        edges_per_example = np.bincount(mention_batch[mention_of_edge], minlength=len(examples))
        # each example's negatives from its own generator, as many rows as it has edges
        uniforms = [
            rngs[row].random((count, self.num_negatives)) for row, count in enumerate(edges_per_example) if count
        ]
        negatives = self.sampler.draw(
            entity, np.concatenate(uniforms) if uniforms else np.zeros((0, self.num_negatives))
        )  # (edges, negatives)
        batch["mnem_mention_batch"], batch["mnem_mention_spans"] = (
            _tensor(mention_batch[targets]),
            _tensor(spans[targets]),
        )
        batch["mnem_mention_tokens"] = torch.stack(
            mention_token_index(batch["mnem_mention_batch"], batch["mnem_mention_spans"])
        )
        batch["mnem_edge_mention"], batch["mnem_entity_ids"] = _tensor(member), _tensor(entity)
        batch["mnem_relation_ids"] = _tensor(neighbors["relations"][mention_of_edge, slot])
        batch["mnem_directions"] = _tensor(neighbors["directions"][mention_of_edge, slot])
        batch["mnem_negative_ids"] = _tensor(negatives.reshape(-1, self.num_negatives))
        batch["mnem_log_q"] = _tensor(
            self.sampler.log_q[np.concatenate([entity[:, None], negatives], 1)], np.float32
        ).reshape(-1, self.num_negatives + 1)
        if self.knowledge_losses:
            batch.target_counts["mnem"] = len(entity)


class KnowledgeLookup:
    """Links mentions in a task text and attaches each mention's PEPR neighbours, as in pre-training.

    Mentions of entities outside the neighbour table (entities the pre-training corpus never
    mentioned) keep their mention but get no neighbours; the hybrid attention then contributes a
    zero summary for them. :meth:`features` gives one example's arrays, :meth:`collate` a batch
    (with the encoder's precomputed indices; ``relational``: also the R-GCN graph).
    """

    def __init__(self, store, table, linker=None, relational: bool = False) -> None:
        from kgplm.text.linking import EntityLinker

        self.store, self.table = store, table
        self.linker = linker if linker is not None else EntityLinker(store)
        self.primary_types = store.primary_type_ids()
        self.num_types, self.relational = store.num_types, relational
        self.row_of_entity = np.full(store.num_entities, -1, dtype=np.int64)  # entity → its table row
        self.row_of_entity[np.asarray(table.seeds, dtype=np.int64)] = np.arange(len(table.seeds))
        self.neighbors = np.asarray(table.neighbors)
        self.relations = np.asarray(table.relations)
        self.directions = np.asarray(table.directions)

    def features(self, text: str, offsets: np.ndarray) -> dict[str, np.ndarray]:
        """Token spans (over ``offsets``' tokens), entity ids and neighbour rows of the linked mentions of ``text``."""
        spans, entity_ids = linked_token_spans(self.linker, text, offsets)  # the span indicator's spans too
        table_rows = self.row_of_entity[entity_ids]
        in_table = table_rows >= 0
        k = self.neighbors.shape[1]
        neighbors = np.full((len(spans), k), -1, dtype=np.int64)
        relations, directions = neighbors.copy(), neighbors.copy()
        neighbors[in_table] = self.neighbors[table_rows[in_table]]
        relations[in_table] = self.relations[table_rows[in_table]]
        directions[in_table] = self.directions[table_rows[in_table]]
        types = np.where(neighbors >= 0, self.primary_types[np.maximum(neighbors, 0)], -1)
        return {
            "mention_spans": spans,
            "mention_entity_ids": entity_ids,  # what the neighbour rows are of (the typed gazetteer's input too)
            "neighbor_ids": neighbors,
            "neighbor_relations": relations,
            "neighbor_directions": directions,
            "neighbor_types": types,
        }

    def collate(self, parts: list[dict[str, np.ndarray]]) -> dict[str, torch.Tensor]:
        """The encoder's knowledge inputs for a batch of :meth:`features` results (one per sequence)."""
        counts = np.array([len(part["mention_spans"]) for part in parts], dtype=np.int64)
        mention_batch = np.repeat(np.arange(len(parts)), counts)
        spans = np.concatenate([part["mention_spans"].reshape(-1, 2) for part in parts]).astype(np.int64)
        k = self.neighbors.shape[1]
        table = {
            name: np.concatenate([part[column].reshape(-1, k) for part in parts])
            for name, column in NEIGHBOR_COLUMNS.items()
        }  # (mentions, K)
        edge_mention, slot = np.nonzero(table["ids"] >= 0)
        edges = {name: values[edge_mention, slot] for name, values in table.items()}
        return {
            "mention_batch": _tensor(mention_batch),
            "mention_spans": _tensor(spans).reshape(-1, 2),
            "neighbor_mention": _tensor(edge_mention),
            "neighbor_entity_ids": _tensor(edges["ids"]),
            "neighbor_relation_ids": _tensor(edges["relations"]),
            "neighbor_directions": _tensor(edges["directions"]),
            "neighbor_type_ids": _tensor(edges["types"]),
            **_knowledge_indices(mention_batch, spans, edge_mention, edges["types"], self.num_types, self.relational),
        }


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
    computed (``kg/neighbors.npz``), or the one it was given (``kgplm.train(neighbor_table=...)``);
    its model's config says whether the encoder runs the R-GCN (whose graph the batches then carry).
    A lookup is stateless once built, so runs with the same graph and table files share one.
    """
    import json
    from pathlib import Path

    from kgplm.exceptions import MissingFileError
    from kgplm.kg.pepr import NeighborTable
    from kgplm.text.linking import recorded_linker

    table_path = run.neighbor_table_path
    if not table_path.is_file() and run.read_run_config().get("neighbor_table"):
        table_path = Path(run.read_run_config()["neighbor_table"])
    if not table_path.is_file():
        raise MissingFileError(
            table_path,
            "PEPR neighbour table of the pre-training run (a SMedBERT model needs "
            "the graph and neighbour table it was trained with)",
        )
    config_path = run.model_dir / "config.json"
    relational = (
        config_path.is_file()
        and json.loads(config_path.read_text(encoding="utf-8")).get("relational_encoder") == "rgcn"
    )
    graph = run.store_dir if (run.store_dir / "manifest.json").is_file() else run.read_run_config()["graph"]
    run_config = run.read_run_config()
    linking = json.dumps([run_config.get("linking"), run_config.get("stages", {}).get("linking")], sort_keys=True)
    key = (_file_key(graph), _file_key(table_path), relational, linking)
    if key not in _LOOKUPS:
        while len(_LOOKUPS) >= _MAX_LOOKUPS:
            _LOOKUPS.pop(next(iter(_LOOKUPS)))
        store = run.open_store(progress=progress)
        # the mentions pre-training saw: the run's own linking options, not the defaults
        _LOOKUPS[key] = KnowledgeLookup(
            store, NeighborTable.load(table_path), relational=relational, linker=recorded_linker(store, run_config)
        )
    return _LOOKUPS[key]
