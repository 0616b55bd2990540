"""The linked mentions of a task text, as attribution inputs of any encoder at fine-tuning.

SMedBERT's fine-tuning lookup (:class:`kgplm.methods.smedbert.KnowledgeLookup`) gives its encoder the
dictionary linker's mentions; the lookups here give exactly those mentions (:func:`linked_token_spans`,
shared with it: the same linker, the same token spans, the same entity ids) to an encoder without graph
knowledge:

* :class:`MentionSpanLookup`: the spans alone, through
  :class:`~kgplm.models.finetuning.MentionSpanIndicator` (``kgplm.finetune(mention_spans=True)``);
* :class:`TypedGazetteerLookup`: each mention's span and entity id, through
  :class:`~kgplm.models.finetuning.TypedMentionGazetteer`: begin/inside markers per mention, the
  entity's KG type and its own KG vector, no neighbours (``kgplm.finetune(mention_spans="typed")``).

:func:`fine_tuning_knowledge` picks the provider a fine-tuned model's config asks for (the method's own
inputs, or one of these), for ``kgplm.finetune``, ``kgplm.evaluate`` and every re-scoring alike.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from kgplm.exceptions import ConfigurationError, MissingFileError
from kgplm.models.finetuning import GAZETTEER_ENTITIES, GAZETTEER_TOKENS, SPAN_INDICATOR_INPUT
from kgplm.text.alignment import char_spans_to_token_spans

__all__ = [
    "MENTION_SPAN_OPTIONS",
    "linked_token_spans",
    "MentionSpanLookup",
    "TypedGazetteerLookup",
    "span_lookup",
    "gazetteer_lookup",
    "gazetteer_embeddings_dir",
    "GazetteerTables",
    "gazetteer_tables",
    "fine_tuning_knowledge",
]

logger = logging.getLogger(__name__)

#: ``kgplm.finetune(mention_spans=...)``: none, the span indicator, the typed gazetteer
MENTION_SPAN_OPTIONS = (False, True, "typed")


def linked_token_spans(linker, text: str, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(spans, entity_ids)``: token ``[start, end)`` spans over ``offsets``' tokens of the linker's
    mentions of ``text`` that map onto tokens, and each one's best entity."""
    starts, ends, entries = linker.find(text)
    entity_ids = np.asarray(linker.best_entities(entries), dtype=np.int64)
    spans = char_spans_to_token_spans(offsets, np.stack([starts, ends], 1) if len(starts) else [])
    kept = np.flatnonzero(spans[:, 0] >= 0)
    return spans[kept].reshape(-1, 2), entity_ids[kept]


def _mention_tokens(spans: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For (m, 2) spans: each covered token's position, its mention (0 … m − 1) and whether it is the
    mention's first token."""
    lengths = spans[:, 1] - spans[:, 0]
    mention = np.repeat(np.arange(len(spans), dtype=np.int64), lengths)
    within = np.arange(lengths.sum(), dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return np.repeat(spans[:, 0], lengths) + within, mention, within == 0


class MentionSpanLookup:
    """The :class:`~kgplm.finetuning.encoding.TaskEncoder` knowledge provider of the span indicator:
    :meth:`features` per text, :meth:`collate` per batch (``span_indicator_tokens``, (2, tokens))."""

    def __init__(self, linker) -> None:
        self.linker = linker

    def features(self, text: str, offsets: np.ndarray) -> dict[str, np.ndarray]:
        return {"mention_spans": linked_token_spans(self.linker, text, offsets)[0]}

    def collate(self, parts: list[dict[str, np.ndarray]]) -> dict[str, torch.Tensor]:
        rows, positions = [], []
        for row, part in enumerate(parts):
            position, _, _ = _mention_tokens(np.asarray(part["mention_spans"], dtype=np.int64).reshape(-1, 2))
            positions.append(position)
            rows.append(np.full(len(position), row, dtype=np.int64))
        tokens = (
            np.stack([np.concatenate(rows), np.concatenate(positions)]).astype(np.int64)
            if parts
            else np.zeros((2, 0), np.int64)
        )
        return {SPAN_INDICATOR_INPUT: torch.from_numpy(tokens)}


class TypedGazetteerLookup:
    """The knowledge provider of the typed gazetteer: :meth:`features` gives a text's linked mentions
    (``mention_spans`` (m, 2) token spans, ``mention_entity_ids`` (m,)) exactly as SMedBERT's lookup
    links them; :meth:`collate` gives a batch's ``gazetteer_tokens`` (4, tokens: sequence, position,
    marker 0 = B / 1 = I, mention) and ``gazetteer_entity_ids`` (mentions,). Types and KG vectors are
    the model's own tables (:meth:`TypedMentionGazetteer.load_tables
    <kgplm.models.finetuning.TypedMentionGazetteer.load_tables>`)."""

    def __init__(self, linker) -> None:
        self.linker = linker

    def features(self, text: str, offsets: np.ndarray) -> dict[str, np.ndarray]:
        spans, entity_ids = linked_token_spans(self.linker, text, offsets)
        return {"mention_spans": spans, "mention_entity_ids": entity_ids}

    def collate(self, parts: list[dict[str, np.ndarray]]) -> dict[str, torch.Tensor]:
        columns, entities, offset = [], [], 0
        for row, part in enumerate(parts):
            spans = np.asarray(part["mention_spans"], dtype=np.int64).reshape(-1, 2)
            position, mention, first = _mention_tokens(spans)
            columns.append(np.stack([np.full(len(position), row), position, np.where(first, 0, 1), mention + offset]))
            entities.append(np.asarray(part["mention_entity_ids"], dtype=np.int64).reshape(-1))
            offset += len(spans)
        tokens = np.concatenate(columns, 1).astype(np.int64) if parts else np.zeros((4, 0), np.int64)
        entity_ids = np.concatenate(entities) if parts else np.zeros(0, np.int64)
        return {GAZETTEER_TOKENS: torch.from_numpy(tokens), GAZETTEER_ENTITIES: torch.from_numpy(entity_ids)}


def span_lookup(run, progress: bool = False) -> MentionSpanLookup:
    """The span lookup of a pre-training run: the linker its corpus was linked with, as SMedBERT's lookup builds it."""
    from kgplm.text.linking import recorded_linker

    return MentionSpanLookup(recorded_linker(run.open_store(progress=progress), run.read_run_config()))


def gazetteer_lookup(run, progress: bool = False) -> TypedGazetteerLookup:
    """The typed-gazetteer lookup of a pre-training run: the linker its corpus was linked with (as :func:`span_lookup`)."""
    from kgplm.text.linking import recorded_linker

    return TypedGazetteerLookup(recorded_linker(run.open_store(progress=progress), run.read_run_config()))


def gazetteer_embeddings_dir(run, kg_embeddings=None) -> Path:
    """The KG embedding table the typed gazetteer reads: ``kg_embeddings`` when given, else the pre-training
    run's own (the table it was given, ``kgplm.train(kg_embeddings=...)``, or the TransR, else TransE table
    it computed). A run without one (a text-only control) needs ``kg_embeddings``."""
    if kg_embeddings is not None:
        candidates = [Path(kg_embeddings)]
    else:
        given = run.read_run_config().get("kg_embeddings")
        candidates = ([Path(given)] if given else []) + [run.embeddings_dir("transr"), run.embeddings_dir("transe")]
    for candidate in candidates:
        if candidate.is_dir():
            return candidate
    raise MissingFileError(
        candidates[0],
        "KG embeddings for the typed gazetteer (the pre-training run has none of its own: pass "
        "kg_embeddings=, a TransE or TransR directory of the run's graph)",
    )


@dataclass(frozen=True)
class GazetteerTables:
    """The typed gazetteer's fixed tables over a run's graph: each entity's KG vector and primary type id
    (−1: untyped), the number of types and the KG embeddings' directory."""

    kg_vectors: np.ndarray  # (entities, kg_dim)
    type_ids: np.ndarray  # (entities,)
    num_types: int
    directory: Path

    @property
    def sizes(self) -> dict[str, int]:
        """The ``KgplmConfig.mention_gazetteer`` record of these tables."""
        return {
            "num_entities": int(self.kg_vectors.shape[0]),
            "num_types": self.num_types,
            "kg_dim": int(self.kg_vectors.shape[1]),
        }


def gazetteer_tables(run, kg_embeddings=None, progress: bool = False) -> GazetteerTables:
    """The typed gazetteer's tables over ``run``'s graph (:func:`gazetteer_embeddings_dir` says which KG
    embeddings); the embeddings must be of that graph (same entities, in order)."""
    from kgplm.kg.embeddings import KGEmbeddings

    store = run.open_store(progress=progress)
    directory = gazetteer_embeddings_dir(run, kg_embeddings)
    embeddings = KGEmbeddings.load(directory)
    if embeddings.num_entities != store.num_entities:
        raise ConfigurationError(
            f"the KG embeddings in {directory} have {embeddings.num_entities} entities; the run's graph has "
            f"{store.num_entities}: the typed gazetteer needs a table of the graph the text is linked with"
        )
    return GazetteerTables(
        kg_vectors=embeddings.entity_embeddings.detach().float().numpy(),
        type_ids=np.asarray(store.primary_type_ids(), dtype=np.int64),
        num_types=int(store.num_types),
        directory=directory,
    )


def fine_tuning_knowledge(config, run, *, encoder_inputs: bool = True, progress: bool = False):
    """The knowledge provider a fine-tuning model reads (``None``: the text alone).

    The method's own inputs (``MethodSpec.finetuning_inputs``, e.g. SMedBERT's mentions and neighbours)
    unless ``encoder_inputs`` is false; the span indicator's or the typed gazetteer's when ``config`` has
    one (``mention_span_indicator``, ``mention_gazetteer``), which a method reading its own mentions may
    only take on the text alone. ``run``: the pre-training run the inputs are built from."""
    from kgplm.registry import get

    spec = get(config.method)
    own = spec.finetuning_inputs is not None and encoder_inputs
    indicator = bool(getattr(config, "mention_span_indicator", False))
    gazetteer = bool(getattr(config, "mention_gazetteer", None))
    if indicator and gazetteer:
        raise ConfigurationError("a model takes the mention span indicator or the typed gazetteer, not both")
    if own and (indicator or gazetteer):
        raise ConfigurationError(
            f"mention_spans: a {config.method!r} encoder already reads the linked mentions; "
            f"pass encoder_inputs=False to give it the {'span indicator' if indicator else 'typed gazetteer'} instead"
        )
    if (own or indicator or gazetteer) and run is None:
        raise MissingFileError(
            "<model>",
            "pre-training run next to the model: the encoder's inputs are built from its graph and artefacts",
        )
    if own:
        return spec.finetuning_inputs(run, progress)
    if indicator:
        return span_lookup(run, progress)
    if gazetteer:
        return gazetteer_lookup(run, progress)
    return None
