"""Head–relation–tail tables (OpenKE, PyKEEN, DGL-KE style TSV/CSV) as a :class:`KGStore`.

Each row names a head entity, a relation and a tail entity (column order set by ``order``).
Entities and relations are named by the strings in the file; their IRIs are minted under
``namespace``. Blank lines and lines starting with ``#`` are skipped.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import TYPE_CHECKING

from tqdm.auto import tqdm

from kgplm._io import iter_lines, require_file
from kgplm.exceptions import ConfigurationError, DataFormatError
from kgplm.kg.collector import GraphCollector
from kgplm.kg.vocabulary import KGPLM_NAMESPACE, LABEL_ROLES, mint_iri

if TYPE_CHECKING:  # pragma: no cover
    from kgplm.kg.store import KGStore

__all__ = ["read_triples"]


def read_triples(
    path: str | os.PathLike,
    *,
    order: str = "hrt",
    delimiter: str | None = None,
    header: bool = False,
    skip_first_line: bool = False,
    namespace: str | None = None,
    show_progress: bool = True,
) -> KGStore:
    """Read a TSV/CSV of triples.

    Args:
        path: the file (``.gz`` allowed).
        order: column order, a permutation of ``"hrt"`` (``"htr"`` for OpenKE's ``train2id.txt``).
        delimiter: field separator; by default ``,`` for ``.csv`` files and tab otherwise.
        header: the first line holds column names (skipped).
        skip_first_line: skip a first line that holds the triple count (OpenKE).
        namespace: IRI namespace for minted entity and relation IRIs.
    """
    path = require_file(path, "triples file")
    if sorted(order) != ["h", "r", "t"]:
        raise ConfigurationError(f"order must be a permutation of 'hrt', got {order!r}")
    if delimiter is None:
        suffixes = [s.lower() for s in path.suffixes]
        delimiter = "," if ".csv" in suffixes else "\t"
    namespace = namespace or f"{KGPLM_NAMESPACE}{_slug(path)}/"
    positions = {role: order.index(role) for role in "hrt"}
    collector = GraphCollector(source="triples", location=str(path))
    label_role = LABEL_ROLES.index("label")
    named: set[int] = set()

    def entity(name: str) -> int:
        index = collector.entity(mint_iri(namespace, "entity", name))
        if index not in named:
            named.add(index)
            collector.add_label(index, name, "", label_role)
        return index

    lines = iter_lines(path)
    skip = int(header) + int(skip_first_line)
    for line_number, line in tqdm(
        lines, desc=f"reading {path.name}", unit=" lines", unit_scale=True, disable=not show_progress, leave=False
    ):
        if line_number <= skip or not line.strip() or line.startswith("#"):
            continue
        fields = next(csv.reader([line], delimiter=delimiter)) if delimiter == "," else line.split(delimiter)
        if len(fields) != 3:
            raise DataFormatError(
                f"{len(fields)} fields separated by {delimiter!r}",
                path=path,
                line=line_number,
                expected=f"3 fields in the order {order!r} (head, relation, tail)",
            )
        fields = [f.strip() for f in fields]
        if not all(fields):
            raise DataFormatError(
                "an empty field", path=path, line=line_number, expected="non-empty head, relation and tail"
            )
        head, relation, tail = fields[positions["h"]], fields[positions["r"]], fields[positions["t"]]
        collector.add_triple(
            entity(head), collector.relation(mint_iri(namespace, "relation", relation), relation), entity(tail)
        )
    return collector.build(extra_manifest={"prefixes": {"ent": namespace + "entity/", "rel": namespace + "relation/"}})


def _slug(path: Path) -> str:
    name = path.name.split(".")[0] or "kg"
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)
