"""Product attribute triples (title t, attribute name n, values v) for EP-PLM's product attribute prediction.

EP-PLM (Liu et al. 2022, §3.2) draws (product title, attribute name, attribute values) from a
medicinal-product database. Here they come from two sources, merged:

* the knowledge graph: every subject of a relation or literal attribute whose name is in
  ``graph_attributes`` is a title (its name), the relation's objects (their names) or the literal
  values are the values. The default names are CMeKG's drug attributes 适应症 (indications),
  功能主治 (functions and indications), 成份 (ingredients) and 不良反应 (adverse reactions); in
  CMeKG only drugs carry them.
* a user table in EP-PLM's format, one line per (title, attribute): ``title<TAB>attribute<TAB>v1|v2|…``
  (UTF-8; blank lines skipped).

The stage :func:`kgplm.methods.epplm.stage.product_attributes_stage` (artefact ``product_attributes``) reads
``kgplm.train(method_data={...})``:

* ``graph_attributes``: the predicate names to read from the graph (default the four above;
  ``[]`` reads none);
* ``product_attributes``: the path of a user table;
* ``exclude_attributes``: the path of a table in the same format whose (title, attribute, value)
  triples are removed — a held-out set for evaluation (``experiments/electra_family.py``);
* ``pap_held_out``: a number n of drugs whose PAP evaluation pairs are held out
  (:mod:`kgplm.methods.epplm.evaluation`, the ``PAP AUC`` evaluation of the method's record):
  one 适应症 value of each of n drugs (seed 0, from the graph), and every triple of the drug's
  other attributes (不良反应, 功能主治 text …, which often restate the indication), are removed.

Removed triples are *withheld*, not forgotten: the artefact keeps them, and a withheld value is
never drawn as a PAP negative for its own title (it is true of it; training it as false would teach
the opposite of what the held-out evaluation asks).

A graph without any of the attributes gives an empty, valid artefact (PAP then never has a batch
and the method trains plain RTD; a warning says so). The artefact is saved as JSON in
``kg/product_attributes.json`` of the run.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kgplm._io import atomic_file, iter_lines
from kgplm.exceptions import ArtifactError, DataFormatError

__all__ = [
    "AttributeGroup",
    "ProductAttributes",
    "DEFAULT_GRAPH_ATTRIBUTES",
    "read_attribute_table",
    "METHOD_DATA_KEYS",
]

logger = logging.getLogger(__name__)

#: CMeKG's drug attributes the issue and the paper's example name (indications, functions, ingredients, adverse reactions).
DEFAULT_GRAPH_ATTRIBUTES = ("适应症", "功能主治", "成份", "不良反应")
#: The keys of ``kgplm.train(method_data=...)`` the stage reads.
METHOD_DATA_KEYS = ("graph_attributes", "product_attributes", "exclude_attributes", "pap_held_out")
FORMAT = "kgplm-product-attributes"


@dataclass(frozen=True)
class AttributeGroup:
    """One (title, attribute name) and all its values."""

    title: str
    attribute: str
    values: tuple[str, ...]


class ProductAttributes:
    """(title, attribute) groups with their values; groups are unique and sorted, values unique and sorted.

    ``value_ids(group)`` and ``pool(attribute)`` index :attr:`values` (every distinct value text):
    the pool of an attribute is every value any title has for it (where PAP's negatives come from),
    ``pool_counts(attribute)`` how many titles have each (its popularity). ``withheld`` are true
    (title, attribute) → values removed from training (:meth:`without`): never a negative of
    their title (:meth:`own_value_ids`).
    """

    def __init__(
        self,
        groups: Iterable[AttributeGroup] = (),
        withheld: Iterable[AttributeGroup] = (),
        held_out: Iterable[Sequence[str]] = (),
    ) -> None:
        merged: dict[tuple[str, str], set[str]] = {}
        for group in groups:
            merged.setdefault((group.title, group.attribute), set()).update(group.values)
        self.groups = [
            AttributeGroup(title, attribute, tuple(sorted(values)))
            for (title, attribute), values in sorted(merged.items())
            if values
        ]
        self.values = sorted({value for group in self.groups for value in group.values})
        index = {value: i for i, value in enumerate(self.values)}
        self._group_value_ids = [np.array([index[v] for v in group.values], dtype=np.int64) for group in self.groups]
        pools: dict[str, set[int]] = {}
        for group, ids in zip(self.groups, self._group_value_ids):
            pools.setdefault(group.attribute, set()).update(ids.tolist())
        self._pools = {attribute: np.array(sorted(ids), dtype=np.int64) for attribute, ids in pools.items()}
        counts = {attribute: np.zeros(len(values), dtype=np.int64) for attribute, values in self._pools.items()}
        for group, ids in zip(self.groups, self._group_value_ids):
            counts[group.attribute][np.searchsorted(self._pools[group.attribute], ids)] += 1
        self._pool_counts = counts
        kept: dict[tuple[str, str], set[str]] = {}
        for group in withheld:
            kept.setdefault((group.title, group.attribute), set()).update(group.values)
        self.withheld = [
            AttributeGroup(title, attribute, tuple(sorted(values)))
            for (title, attribute), values in sorted(kept.items())
            if values
        ]
        self._withheld = {(g.title, g.attribute): g.values for g in self.withheld}
        self._index = index
        #: the (title, attribute, value) evaluation pairs held out (``method_data["pap_held_out"]``), sorted
        self.held_out = sorted({tuple(triple) for triple in held_out})

    def __len__(self) -> int:
        return len(self.groups)

    def __repr__(self) -> str:
        return (
            f"ProductAttributes({len(self.groups):,} (title, attribute) groups, {self.num_triples:,} triples, "
            f"attributes {sorted(self._pools)})"
        )

    @property
    def num_triples(self) -> int:
        return sum(len(group.values) for group in self.groups)

    @property
    def attributes(self) -> list[str]:
        return sorted(self._pools)

    def value_ids(self, group: int) -> np.ndarray:
        return self._group_value_ids[group]

    def pool(self, attribute: str) -> np.ndarray:
        return self._pools.get(attribute, np.zeros(0, dtype=np.int64))

    def pool_counts(self, attribute: str) -> np.ndarray:
        """How many titles have each value of :meth:`pool` (``attribute``) in these groups."""
        return self._pool_counts.get(attribute, np.zeros(0, dtype=np.int64))

    def own_value_ids(self, group: int) -> np.ndarray:
        """The group's values and its withheld ones (those among :attr:`values`), sorted: never its negatives."""
        title, attribute = self.groups[group].title, self.groups[group].attribute
        withheld = [self._index[v] for v in self._withheld.get((title, attribute), ()) if v in self._index]
        return np.union1d(self._group_value_ids[group], np.array(withheld, dtype=np.int64))

    def true_values(self, title: str, attribute: str) -> set[str]:
        """Every value known true of (title, attribute): trained or withheld."""
        index = self._group_index().get((title, attribute))
        trained = set(self.groups[index].values) if index is not None else set()
        return trained | set(self._withheld.get((title, attribute), ()))

    def _group_index(self) -> dict[tuple[str, str], int]:
        if not hasattr(self, "_groups_by_key"):
            self._groups_by_key = {(g.title, g.attribute): i for i, g in enumerate(self.groups)}
        return self._groups_by_key

    def triples(self) -> list[tuple[str, str, str]]:
        return [(group.title, group.attribute, value) for group in self.groups for value in group.values]

    # -- combining -----------------------------------------------------------------------------------
    def merge(self, other: "ProductAttributes") -> "ProductAttributes":
        return ProductAttributes(
            [*self.groups, *other.groups], [*self.withheld, *other.withheld], [*self.held_out, *other.held_out]
        )

    def without(self, triples: Iterable[Sequence[str]]) -> "ProductAttributes":
        """These groups minus the (title, attribute, value) ``triples``; the removed true ones are withheld."""
        removed: dict[tuple[str, str], set[str]] = {}
        for title, attribute, value in triples:
            removed.setdefault((title, attribute), set()).add(value)
        kept, withheld = [], list(self.withheld)
        for g in self.groups:
            gone = removed.get((g.title, g.attribute), set())
            kept.append(AttributeGroup(g.title, g.attribute, tuple(v for v in g.values if v not in gone)))
            withheld.append(AttributeGroup(g.title, g.attribute, tuple(v for v in g.values if v in gone)))
        return ProductAttributes(kept, withheld, self.held_out)

    def holding_out(self, pairs: Iterable[Sequence[str]], triples: Iterable[Sequence[str]]) -> "ProductAttributes":
        """These groups minus ``triples`` (withheld), recording the (title, attribute, value) evaluation ``pairs``."""
        reduced = self.without(triples)
        return ProductAttributes(reduced.groups, reduced.withheld, [*self.held_out, *pairs])

    # -- sources -------------------------------------------------------------------------------------
    @classmethod
    def from_store(cls, store, attribute_names: Iterable[str] = DEFAULT_GRAPH_ATTRIBUTES) -> "ProductAttributes":
        """Groups from the relations and literal attributes of ``store`` named ``attribute_names``."""
        wanted = set(attribute_names)
        collected: dict[tuple[str, str], set[str]] = {}
        relation_names = store.relation_names
        chosen = [r for r, name in enumerate(relation_names) if name in wanted]
        if chosen:
            triples = np.asarray(store.triples)
            selected = triples[np.isin(triples[:, 1], chosen)]
            names: dict[int, str] = {}

            def name(entity: int) -> str:
                if entity not in names:
                    names[entity] = store.entity_name(entity)
                return names[entity]

            for head, relation, tail in selected.tolist():
                collected.setdefault((name(head), relation_names[relation]), set()).add(name(tail))
        if wanted & set(store.attribute_predicate_names):
            for entity, predicate, value in store.iter_attributes():
                if predicate in wanted and value.strip():
                    collected.setdefault((store.entity_name(entity), predicate), set()).add(value.strip())
        return cls(AttributeGroup(title, attribute, tuple(values)) for (title, attribute), values in collected.items())

    @classmethod
    def from_table(cls, path: str | os.PathLike) -> "ProductAttributes":
        return cls(read_attribute_table(path))

    # -- files -----------------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> Path:
        path = Path(path)
        with atomic_file(path, "w", encoding="utf-8") as handle:
            json.dump(
                {
                    "format": FORMAT,
                    "version": 1,
                    "groups": [[g.title, g.attribute, list(g.values)] for g in self.groups],
                    "withheld": [[g.title, g.attribute, list(g.values)] for g in self.withheld],
                    "held_out": [list(triple) for triple in self.held_out],
                },
                handle,
                ensure_ascii=False,
            )
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> "ProductAttributes":
        path = Path(path)
        content = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(content, dict) or content.get("format") != FORMAT:
            raise ArtifactError(f"{path} is not a kgplm product-attribute file (format {FORMAT!r})")
        return cls(
            (AttributeGroup(title, attribute, tuple(values)) for title, attribute, values in content["groups"]),
            (
                AttributeGroup(title, attribute, tuple(values))
                for title, attribute, values in content.get("withheld", [])
            ),
            content.get("held_out", []),
        )

    def write_table(self, path: str | os.PathLike) -> Path:
        """Write the groups as a ``title<TAB>attribute<TAB>v1|v2|…`` table (what :func:`read_attribute_table` reads)."""
        path = Path(path)
        with atomic_file(path, "w", encoding="utf-8") as handle:
            for group in self.groups:
                handle.write(f"{group.title}\t{group.attribute}\t{'|'.join(group.values)}\n")
        return path


def read_attribute_table(path: str | os.PathLike) -> list[AttributeGroup]:
    """Groups of a ``title<TAB>attribute<TAB>v1|v2|…`` table; a malformed line raises :class:`DataFormatError`."""
    groups = []
    for line_number, line in iter_lines(path):
        if not line.strip():
            continue
        fields = line.split("\t")
        expected = "title<TAB>attribute<TAB>v1|v2|… with a non-empty title, attribute and at least one value"
        if len(fields) != 3:
            raise DataFormatError(f"{len(fields)} tab-separated fields", path=path, line=line_number, expected=expected)
        title, attribute = fields[0].strip(), fields[1].strip()
        values = tuple(value.strip() for value in fields[2].split("|") if value.strip())
        if not title or not attribute or not values:
            raise DataFormatError(
                "an empty title, attribute or value list", path=path, line=line_number, expected=expected
            )
        if any(char in value for value in values for char in "\t\n"):
            raise DataFormatError("a value holds a tab or newline", path=path, line=line_number, expected=expected)
        groups.append(AttributeGroup(title, attribute, values))
    return groups
