"""EMBERT's batches: entity replacement (CECP), sub-entity labels (ES) and atomic/adjective masking (BEM).

The linked corpus holds token ids, mention spans and entity ids, not text. A mention's surface is
found again from its word pieces: :class:`EntityLexicon` tokenizes every KG name once with the
run's tokenizer and maps word-piece sequences back to names, whose sub-entity ends and
atomic/adjective split (:class:`~kgplm.methods.embert.segments.EntitySegments`, character offsets)
it converts to token positions through the tokenizer's offsets. The thesaurus' surfaces
(:class:`~kgplm.methods.embert.thesaurus.Thesaurus`) become per-entity lists of names that can be
spliced in.

:class:`EmbertCollator` per example, all draws from the example's own generator
(:mod:`kgplm.training.collator`):

1. ``make_example``: after the SOP pairing, replace some mentions (CECP) — the replacement's word
   pieces are spliced in place of the mention's, every later position (mention spans, token types,
   word ids) shifts by the change in length, so every other mention keeps its tokens — and choose
   the BEM mentions and which of their parts is masked;
2. ``mask_example``: the scheme's masks over the tokens that are neither replaced nor part of a
   BEM mention, plus every token of the masked BEM parts;
3. ``method_inputs``: the tensors the model reads and the target counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import torch

from kgplm.exceptions import ConfigurationError
from kgplm.methods.embert.configuration import CECP_NEGATIVES
from kgplm.training.collator import Batch, PretrainingCollator, PretrainingExample

__all__ = ["EntityLexicon", "EmbertExample", "EmbertCollator"]


def _key(ids: np.ndarray) -> bytes:
    return np.asarray(ids, dtype=np.int64).tobytes()


#: Scripts of a surface: ``HAN`` when any of its characters is a CJK ideograph, else ``LATIN``.
LATIN, HAN = 0, 1


def is_han(text: str) -> bool:
    """Whether ``text`` holds a CJK unified ideograph (basic block, extension A or compatibility)."""
    return any("\u4e00" <= c <= "\u9fff" or "\u3400" <= c <= "\u4dbf" or "\uf900" <= c <= "\ufaff" for c in text)


def capped_weights(frequencies: np.ndarray, max_share: float) -> np.ndarray:
    """min(f, T) per entity, T the largest level at which no entity holds more than ``max_share`` of
    Σ min(f, T) (water-filling); ``frequencies`` unchanged when no entity exceeds it, and equal
    weights for the entities with a frequency when ``max_share`` cannot be met (fewer than 1/max_share)."""
    weights = np.asarray(frequencies, dtype=np.float64)
    positive = np.sort(weights[weights > 0])[::-1]
    if not len(positive) or positive[0] <= max_share * positive.sum():
        return weights
    suffix = np.cumsum(positive[::-1])[::-1]  # suffix[k] = Σ_{i ≥ k} f_(i)
    for capped in range(1, len(positive)):
        if capped * max_share >= 1:
            break
        level = max_share * suffix[capped] / (1 - capped * max_share)  # the top `capped` entities sit at the level
        if positive[capped] <= level:
            return np.minimum(weights, level)
    return np.where(weights > 0, positive[-1], 0.0)


class EntityLexicon:
    """The KG's names as word pieces of one tokenizer, with their segmentation and the thesaurus per entity.

    Args:
        thesaurus: per-entity surfaces (:class:`~kgplm.methods.embert.thesaurus.Thesaurus`).
        segments: sub-entities of every name (:class:`~kgplm.methods.embert.segments.EntitySegments`).
        tokenizer: the run's fast tokenizer.
        type_ids: ``store.primary_type_ids()`` (−1 untyped), for same-type random entities.
        frequencies: mentions per entity in the corpus; random entities are drawn in proportion to
            them (uniformly when ``None``, or when no entity of the type was mentioned), capped.
        max_replacement_tokens: longer surfaces are not spliced in.
        neighbors: the KG's 1-hop adjacency (``store.adjacency(symmetric=True)``, any CSR matrix
            with ``indptr``/``indices``); an inconsistent replacement is never a neighbour of the
            original entity (``None``: no exclusion).
        max_entity_share: the cap on any one entity's share of the frequencies that choose which
            mentions are replaced and which entities replace them (:func:`capped_weights`; 1: no cap).
    """

    def __init__(
        self,
        thesaurus,
        segments,
        tokenizer,
        type_ids: np.ndarray,
        frequencies: np.ndarray | None = None,
        *,
        max_replacement_tokens: int = 16,
        neighbors=None,
        max_entity_share: float = 1.0,
    ) -> None:
        names = segments.names
        encoded = (
            tokenizer(
                names,
                add_special_tokens=False,
                return_offsets_mapping=True,
                return_attention_mask=False,
                return_token_type_ids=False,
            )
            if names
            else {"input_ids": [], "offset_mapping": []}
        )
        unknown = tokenizer.unk_token_id
        self.names = names
        self.name_ids: list[np.ndarray] = []
        self.positives: list[np.ndarray] = []  # token offsets of the last token of each sub-entity
        self.split = np.full(len(names), -1, dtype=np.int64)  # token offset where the atomic term begins
        usable = np.zeros(len(names), dtype=bool)
        self.canonical = np.arange(len(names), dtype=np.int64)  # the first name with the same word pieces
        self._by_tokens: dict[bytes, int] = {}
        for row, (ids, offsets) in enumerate(zip(encoded["input_ids"], encoded["offset_mapping"])):
            ids = np.asarray(ids, dtype=np.int64)
            offsets = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)
            self.name_ids.append(ids)
            if not len(ids):
                self.positives.append(np.zeros(0, np.int64))
                continue
            self.canonical[row] = self._by_tokens.setdefault(_key(ids), row)
            usable[row] = len(ids) <= max_replacement_tokens and unknown not in ids
            ends = segments.ends(row)
            # the last token starting before a sub-entity's end is its last token
            last_tokens = np.searchsorted(offsets[:, 0], np.asarray(ends), side="left") - 1
            self.positives.append(np.unique(np.clip(last_tokens, 0, len(ids) - 1)))
            atomic = int(segments.atomic_start[row])
            if atomic > 0:
                first = int(np.searchsorted(offsets[:, 0], atomic, side="left"))  # first token of the atomic term
                if 0 < first < len(ids) and offsets[first - 1, 1] <= atomic:  # no token straddles the split
                    self.split[row] = first
        self.usable = usable
        self.script = np.array([HAN if is_han(name) else LATIN for name in names], dtype=np.int64)
        vocabulary = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
        self.han_tokens = np.array([is_han(token) for token in vocabulary], dtype=bool)  # per token id
        self.neighbors = neighbors
        # per entity, the usable names of its surfaces (CSR)
        entity_ptr, entity_names = [0], []
        display = np.full(thesaurus.num_entities, -1, dtype=np.int64)  # canonical name of the display name
        for entity in range(thesaurus.num_entities):
            surfaces = thesaurus.surface_ids(entity).tolist()
            for position, surface in enumerate(surfaces):
                row = segments.index(thesaurus.surfaces[surface])
                if position == 0 and row >= 0:
                    display[entity] = self.canonical[row]
                if row >= 0 and usable[row]:
                    entity_names.append(row)
            entity_ptr.append(len(entity_names))
        self.entity_ptr = np.asarray(entity_ptr, dtype=np.int64)
        self.entity_names = np.asarray(entity_names, dtype=np.int64)
        owner = np.repeat(np.arange(thesaurus.num_entities), np.diff(self.entity_ptr))
        self.is_alias = self.canonical[self.entity_names] != display[owner]  # per (entity, name): not its display name
        # keep[e]: how much of a mention's replacement probability its entity keeps under the cap. The
        # cap is taken over the entities that can be replaced (two usable names of one script: a
        # mention has a synonym in its own script), not over every mentioned entity, whose far larger
        # total would let one replaceable entity hold a large share of the replacements
        counts = np.ones(thesaurus.num_entities) if frequencies is None else np.asarray(frequencies, np.float64)
        names_per_script = np.unique(
            np.stack([owner, self.script[self.entity_names], self.canonical[self.entity_names]], 1), axis=0
        )
        pairs, per_pair = np.unique(names_per_script[:, :2], axis=0, return_counts=True)
        replaceable = np.zeros(thesaurus.num_entities, dtype=bool)
        replaceable[pairs[per_pair >= 2, 0]] = True
        self.weights = capped_weights(np.where(replaceable, counts, 0.0), max_entity_share)
        self.keep = np.divide(self.weights, counts, out=np.ones(len(counts)), where=replaceable & (counts > 0))
        # entities with a usable name other than their display name, by (primary type, script) (None: any)
        type_ids = np.asarray(type_ids, dtype=np.int64)
        self.type_ids = type_ids
        self._pools = {}
        for script in (None, LATIN, HAN):
            wanted = self.is_alias if script is None else self.is_alias & (self.script[self.entity_names] == script)
            aliased = np.flatnonzero(np.bincount(owner[wanted], minlength=thesaurus.num_entities) > 0)
            weights = counts[aliased] if frequencies is not None else np.ones(len(aliased))
            # capped inside each pool: no entity above max_entity_share of the draws from its pool
            # (when the pool holds at least 1 / max_entity_share mentioned entities)
            self._pools[None, script] = self._pool(aliased, capped_weights(weights, max_entity_share))
            for kind in np.unique(type_ids[aliased]).tolist():
                members = type_ids[aliased] == kind
                self._pools[kind, script] = self._pool(
                    aliased[members], capped_weights(weights[members], max_entity_share)
                )

    @staticmethod
    def _draw(pool: np.ndarray, cumulative: np.ndarray, excluded: int, rng: np.random.Generator) -> int | None:
        """An entity of ``pool`` other than ``excluded``, in proportion to its weight (uniformly when only
        ``excluded`` has weight); None when there is none."""
        index = int(np.searchsorted(pool, excluded))  # pools are sorted
        inside = index < len(pool) and int(pool[index]) == excluded
        below = float(cumulative[index - 1]) if index else 0.0
        excluded_weight = float(cumulative[index]) - below if inside else 0.0
        total = float(cumulative[-1]) - excluded_weight if len(pool) else 0.0
        if total <= 0:
            others = pool[pool != excluded]
            return int(others[rng.integers(len(others))]) if len(others) else None
        draw = rng.random() * total
        if inside and draw >= below:
            draw += excluded_weight  # skip the excluded entity's share
        position = min(int(np.searchsorted(cumulative, draw, side="right")), len(pool) - 1)
        while position > 0 and (int(pool[position]) == excluded or cumulative[position] == cumulative[position - 1]):
            position -= 1  # rounding at the very end: the last other entity with weight
        return None if int(pool[position]) == excluded else int(pool[position])

    @staticmethod
    def _pool(entities: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(entities, cumulative weights) to draw from; uniform when no entity has weight."""
        if not weights.sum():
            weights = np.ones(len(entities))
        return entities, np.cumsum(weights)

    @cached_property
    def fixed_surface(self) -> tuple[int, int] | None:
        """``(entity, name)`` of the positive control's one inconsistent surface (``cecp_negatives="fixed_surface"``):
        the first alias (by name row) in Chinese characters of the lowest-numbered entity that has one
        (in Latin letters when no entity has a Chinese alias; None without aliases). Chosen from the
        lexicon alone, so the same graph and tokenizer always give the same surface."""
        for script in (HAN, LATIN):
            pool = self._pools[None, script][0]
            if len(pool):
                entity = int(pool[0])
                start, end = self.entity_ptr[entity], self.entity_ptr[entity + 1]
                rows = self.entity_names[start:end][
                    self.is_alias[start:end] & (self.script[self.entity_names[start:end]] == script)
                ]
                return entity, int(rows.min())
        return None

    def fixed_inconsistent(self, entity: int) -> tuple[int, int] | None:
        """The positive control's inconsistent replacement of ``entity``: always :attr:`fixed_surface`, in any
        script; None when that surface names ``entity`` itself (or one of its names tokenizes the same),
        when it would be consistent."""
        fixed = self.fixed_surface
        if (
            fixed is None
            or fixed[0] == entity
            or int(self.canonical[fixed[1]]) in set(self.canonical[self.entity_rows(entity)].tolist())
        ):
            return None
        return fixed

    def lookup(self, ids: np.ndarray) -> int:
        """The name whose word pieces are ``ids`` (−1 when no KG name tokenizes so)."""
        return self._by_tokens.get(_key(ids), -1)

    def entity_rows(self, entity: int) -> np.ndarray:
        """The usable names of ``entity``'s surfaces."""
        return self.entity_names[self.entity_ptr[entity] : self.entity_ptr[entity + 1]]

    def span_script(self, ids: np.ndarray) -> int:
        """``HAN`` when any of the word pieces ``ids`` holds a CJK ideograph, else ``LATIN``."""
        return HAN if bool(self.han_tokens[np.asarray(ids, dtype=np.int64)].any()) else LATIN

    def synonyms(self, entity: int, current: int, script: int | None = None) -> np.ndarray:
        """Usable names of ``entity`` whose word pieces differ from those of name ``current`` (−1: unknown),
        of ``script`` only when given."""
        rows = self.entity_rows(entity)
        if script is not None:
            rows = rows[self.script[rows] == script]
        if current < 0:
            return rows
        return rows[self.canonical[rows] != self.canonical[current]]

    def is_neighbor(self, entity: int, other: int) -> bool:
        """Whether a KG triple joins ``entity`` and ``other`` (either direction); False without ``neighbors``."""
        if self.neighbors is None:
            return False
        start, end = self.neighbors.indptr[entity], self.neighbors.indptr[entity + 1]
        return bool(np.isin(other, self.neighbors.indices[start:end]))

    def other_entity(
        self, entity: int, rng: np.random.Generator, script: int | None = None, tries: int = 32
    ) -> tuple[int, int] | None:
        """``(entity', name)`` for an inconsistent replacement of ``entity``, or None when none is found.

        entity' is drawn among the entities of ``entity``'s type (all entities when no other entity of
        it qualifies) that have a usable name of ``script`` (any script when ``None``) besides their
        display name, in proportion to their capped corpus frequency, and the name uniformly among
        those. A consistent replacement puts another name of a mentioned entity in place of the one
        in the text (mostly its display name); drawn so, an inconsistent one is the same kind of
        surface of an entity as common, so that the surface alone (an English name, a rare long
        name) does not give the label away. A name that is also a surface of ``entity`` is never
        drawn, nor an entity that a KG triple joins to ``entity`` (its neighbours include the
        near-synonyms that the thesaurus misses: a hypernym's alias, a symptom named like its disease).
        """
        own = set(self.canonical[self.entity_rows(entity)].tolist())
        pool, cumulative = self._pools.get((int(self.type_ids[entity]), script), self._pools[None, script])
        if not len(pool) or (len(pool) == 1 and int(pool[0]) == entity):
            pool, cumulative = self._pools[None, script]
        for _ in range(tries):
            other = self._draw(pool, cumulative, entity, rng)
            if other is None:
                return None
            start, end = self.entity_ptr[other], self.entity_ptr[other + 1]
            wanted = self.is_alias[start:end]
            if script is not None:
                wanted = wanted & (self.script[self.entity_names[start:end]] == script)
            rows = self.entity_names[start:end][wanted]
            row = int(rows[rng.integers(len(rows))])
            if int(self.canonical[row]) not in own and not self.is_neighbor(entity, other):
                return other, row
        return None


@dataclass
class EmbertExample(PretrainingExample):
    """A :class:`~kgplm.training.collator.PretrainingExample` after EMBERT's replacements.

    ``mention_entities``/``mention_names``: per mention, its entity and its name in the lexicon (−1
    unknown) after replacement; ``replaced``/``consistent``: the CECP mentions and their labels;
    ``bem_context``/``bem_target``: (k, 2) token spans of the visible and the masked part of each BEM mention.
    """

    mention_entities: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    mention_names: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    replaced: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    consistent: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    bem_context: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), np.int64))
    bem_target: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), np.int64))


def _at_least_one(
    candidates: np.ndarray, rate: float, rng: np.random.Generator, keep: np.ndarray | None = None
) -> np.ndarray:
    """Each candidate with probability ``rate`` (× ``keep`` per candidate when given); one drawn
    uniformly when none was and there is one — with ``keep``, one drawn in proportion to ``keep`` and
    kept with probability keep (a sequence that mentions only a capped entity is not always replaced)."""
    if not len(candidates):
        return candidates
    chosen = rng.random(len(candidates)) < (rate if keep is None else rate * keep)
    if not chosen.any():
        if keep is None:
            chosen[rng.integers(len(candidates))] = True
        elif keep.sum():  # one in proportion to keep, itself kept with its probability keep (the cap holds)
            index = min(
                int(np.searchsorted(np.cumsum(keep), rng.random() * keep.sum(), side="right")), len(candidates) - 1
            )
            chosen[index] = rng.random() < keep[index]
    return candidates[chosen]


class EmbertCollator(PretrainingCollator):
    """:class:`~kgplm.training.collator.PretrainingCollator` plus EMBERT's three tasks (see the module docstring).

    Args:
        lexicon: the :class:`EntityLexicon` of the run.
        use_cecp, use_es, use_bem: which tasks get targets.
        cecp_rate, bem_rate, bem_max_positions: as in :class:`~kgplm.methods.embert.EmbertConfig`.
        cecp_negatives: ``"shipped"`` (the method's inconsistent draws, :meth:`EntityLexicon.other_entity`)
            or ``"fixed_surface"``, the diagnostic positive control whose inconsistent replacements are all
            one surface (:meth:`EntityLexicon.fixed_inconsistent`) — not the paper's method.
        max_sequence_length: replacements never make a sequence longer (the position embeddings).
    """

    def __init__(
        self,
        *,
        lexicon: EntityLexicon,
        use_cecp: bool = True,
        use_es: bool = True,
        use_bem: bool = True,
        cecp_rate: float = 0.15,
        cecp_negatives: str = "shipped",
        bem_rate: float = 0.15,
        bem_max_positions: int = 64,
        max_sequence_length: int = 512,
        **options,
    ) -> None:
        if cecp_negatives not in CECP_NEGATIVES:
            raise ConfigurationError(f"cecp_negatives must be one of {CECP_NEGATIVES}, got {cecp_negatives!r}")
        super().__init__(**options)
        self.cecp_negatives = cecp_negatives
        self.lexicon = lexicon
        self.use_cecp, self.use_es, self.use_bem = use_cecp, use_es, use_bem
        self.cecp_rate, self.bem_rate = cecp_rate, bem_rate
        self.bem_max_positions = bem_max_positions
        self.max_sequence_length = max_sequence_length

    # -- 1. replacement and BEM choice ---------------------------------------------------------------
    def make_example(self, rows: dict, index: int, rng: np.random.Generator) -> EmbertExample:
        base = super().make_example(rows, index, rng)
        lexicon = self.lexicon
        spans = base.mention_spans
        entities = (
            np.asarray(rows["mention_entity_ids"][index], dtype=np.int64)[base.mention_rows]
            if "mention_entity_ids" in rows
            else np.zeros(len(spans), np.int64)
        )
        names = np.array([lexicon.lookup(base.input_ids[start:end]) for start, end in spans.tolist()], dtype=np.int64)
        example = EmbertExample(
            base.input_ids,
            base.token_type_ids,
            base.word_ids,
            spans,
            base.mention_rows,
            base.sentence_order_label,
            mention_entities=entities,
            mention_names=names,
        )
        if self.use_cecp and len(spans):
            self._replace(example, rng)
        if self.use_bem and len(example.mention_spans):
            self._choose_bem(example, rng)
        return example

    def _replace(self, example: EmbertExample, rng: np.random.Generator) -> None:
        lexicon = self.lexicon
        # each mention is replaced by a surface in its own script (a Chinese name in Chinese text)
        scripts = [lexicon.span_script(example.input_ids[start:end]) for start, end in example.mention_spans.tolist()]
        eligible = np.array(
            [
                m
                for m in range(len(example.mention_spans))
                if len(lexicon.synonyms(int(example.mention_entities[m]), int(example.mention_names[m]), scripts[m]))
            ],
            dtype=np.int64,
        )
        chosen = _at_least_one(eligible, self.cecp_rate, rng, lexicon.keep[example.mention_entities[eligible]])
        length = len(example.input_ids)
        replacements: dict[int, tuple[int, int, int]] = {}  # mention → (entity, name, consistent)
        for mention in sorted(chosen.tolist(), key=lambda m: example.mention_spans[m, 0]):
            entity, current = int(example.mention_entities[mention]), int(example.mention_names[mention])
            if rng.random() < 0.5:
                candidates = lexicon.synonyms(entity, current, scripts[mention])
                drawn: tuple[int, int] | None = (entity, int(candidates[rng.integers(len(candidates))]))
                label = 1
            else:
                drawn = (
                    lexicon.fixed_inconsistent(entity)
                    if self.cecp_negatives == "fixed_surface"
                    else lexicon.other_entity(entity, rng, scripts[mention])
                )
                label = 0
            if drawn is None:
                continue
            start, end = example.mention_spans[mention]
            growth = len(lexicon.name_ids[drawn[1]]) - (end - start)
            if length + growth > self.max_sequence_length:
                continue
            length += growth
            replacements[mention] = (drawn[0], drawn[1], label)
        if replacements:
            self._splice(example, replacements)

    def _splice(self, example: EmbertExample, replacements: dict[int, tuple[int, int, int]]) -> None:
        """Put each replacement's word pieces in place of its mention's; shift every later position."""
        lexicon = self.lexicon
        ids, types, words = example.input_ids, example.token_type_ids, example.word_ids
        new_ids, new_types, new_words = [], [], []
        next_word = (int(words.max()) + 1) if words is not None and len(words) else 0
        spans = example.mention_spans
        shift = np.zeros(len(ids) + 1, dtype=np.int64)  # old position → how far it moves
        cursor = 0
        for mention in sorted(replacements, key=lambda m: example.mention_spans[m, 0]):
            start, end = (int(v) for v in example.mention_spans[mention])
            entity, name, _ = replacements[mention]
            pieces = lexicon.name_ids[name]
            new_ids += [ids[cursor:start], pieces]
            new_types += [types[cursor:start], np.full(len(pieces), types[start], dtype=types.dtype)]
            if words is not None:
                new_words += [words[cursor:start], np.full(len(pieces), next_word, dtype=words.dtype)]
                next_word += 1
            shift[end:] += len(pieces) - (end - start)
            example.mention_entities[mention] = entity
            example.mention_names[mention] = name
            cursor = end
        new_ids.append(ids[cursor:])
        new_types.append(types[cursor:])
        if words is not None:
            new_words.append(words[cursor:])
        # every span moves by the shift at its start; a replaced span gets its replacement's length
        lengths = spans[:, 1] - spans[:, 0]
        starts = spans[:, 0] + shift[spans[:, 0]]
        for mention, (_, name, _) in replacements.items():
            lengths[mention] = len(lexicon.name_ids[name])
        example.mention_spans = np.stack([starts, starts + lengths], 1)
        example.input_ids = np.concatenate(new_ids)
        example.token_type_ids = np.concatenate(new_types)
        if words is not None:
            example.word_ids = np.concatenate(new_words)
        order = sorted(replacements)
        example.replaced = np.asarray(order, dtype=np.int64)
        example.consistent = np.asarray([replacements[m][2] for m in order], dtype=np.int64)

    def _choose_bem(self, example: EmbertExample, rng: np.random.Generator) -> None:
        splits = self.lexicon.split
        replaced = set(example.replaced.tolist())
        candidates = np.array(
            [
                m
                for m, name in enumerate(example.mention_names.tolist())
                if name >= 0 and splits[name] > 0 and m not in replaced
            ],
            dtype=np.int64,
        )
        context, target = [], []
        for mention in _at_least_one(candidates, self.bem_rate, rng).tolist():
            start, end = (int(v) for v in example.mention_spans[mention])
            cut = start + int(splits[example.mention_names[mention]])
            adjective, atomic = (start, cut), (cut, end)
            masked, visible = (atomic, adjective) if rng.random() < 0.5 else (adjective, atomic)
            if masked[1] - masked[0] > self.bem_max_positions:
                continue
            context.append(visible)
            target.append(masked)
        example.bem_context = np.asarray(context, dtype=np.int64).reshape(-1, 2)
        example.bem_target = np.asarray(target, dtype=np.int64).reshape(-1, 2)

    # -- 2. masks ----------------------------------------------------------------------------------------
    def mask_example(
        self,
        example: PretrainingExample,
        input_ids: np.ndarray,
        maskable: np.ndarray,
        rng: np.random.Generator,
        word_ids: np.ndarray | None,
    ) -> tuple[np.ndarray, np.ndarray]:
        kept = np.zeros(len(input_ids), dtype=bool)  # never chosen by the scheme
        forced = np.zeros(len(input_ids), dtype=bool)  # always chosen
        if isinstance(example, EmbertExample):
            for mention in example.replaced.tolist():
                start, end = example.mention_spans[mention]
                kept[start:end] = True
            for (context_start, context_end), (target_start, target_end) in zip(
                example.bem_context.tolist(), example.bem_target.tolist()
            ):
                kept[context_start:context_end] = True
                forced[target_start:target_end] = True
        allowed = maskable & ~kept & ~forced
        chosen = self.masker.choose(self.masker.units(allowed, word_ids, example.mention_spans), rng)
        return self.masker.corrupt(input_ids, chosen | forced, rng)

    # -- 3. tensors ---------------------------------------------------------------------------------------
    def method_inputs(
        self,
        batch: Batch,
        rows: dict,
        examples: list[PretrainingExample],
        original_ids: np.ndarray,
        labels: np.ndarray,
        rngs: list[np.random.Generator],
    ) -> None:
        lexicon = self.lexicon
        if self.use_cecp:
            rows_, spans, consistent = [], [], []
            for row, example in enumerate(examples):
                if len(example.replaced):
                    rows_.append(np.full(len(example.replaced), row, np.int64))
                    spans.append(example.mention_spans[example.replaced])
                    consistent.append(example.consistent)
            batch["cecp_batch"] = torch.from_numpy(np.concatenate(rows_) if rows_ else np.zeros(0, np.int64))
            batch["cecp_spans"] = torch.from_numpy(
                np.concatenate(spans).astype(np.int64) if spans else np.zeros((0, 2), np.int64)
            )
            batch["cecp_labels"] = torch.from_numpy(np.concatenate(consistent) if consistent else np.zeros(0, np.int64))
            batch.target_counts["cecp"] = len(batch["cecp_labels"])
        if self.use_es:
            es = np.full(original_ids.shape, -100, dtype=np.int64)
            for row, example in enumerate(examples):
                for (start, end), name in zip(example.mention_spans.tolist(), example.mention_names.tolist()):
                    es[row, start:end] = 0
                    if name >= 0 and len(lexicon.name_ids[name]) == end - start:
                        es[row, start + lexicon.positives[name]] = 1
                    else:
                        es[row, end - 1] = 1
            batch["es_labels"] = torch.from_numpy(es)
            batch.target_counts["es"] = int((es >= 0).sum())
        if self.use_bem:
            rows_ = [np.full(len(example.bem_target), row, np.int64) for row, example in enumerate(examples)]
            batch["bem_batch"] = torch.from_numpy(np.concatenate(rows_))
            batch["bem_context_spans"] = torch.from_numpy(np.concatenate([e.bem_context for e in examples]))
            batch["bem_target_spans"] = torch.from_numpy(np.concatenate([e.bem_target for e in examples]))
            batch.target_counts["bem"] = int((batch["bem_target_spans"][:, 1] - batch["bem_target_spans"][:, 0]).sum())
