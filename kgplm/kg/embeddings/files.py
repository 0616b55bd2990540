"""KG embedding files: kgplm's own format, OpenKE's and DGL-KE's, and a labelled triples TSV.

* kgplm: ``embeddings.safetensors`` (``entity_embeddings``, ``relation_embeddings`` and for TransR
  ``projections``) and ``config.json`` (the method, norm, shapes, store fingerprint, training
  arguments and loss history), written atomically.
* OpenKE's JSON parameter dump (what the SMedBERT code reads: ``ent_embeddings.weight``,
  ``rel_embeddings.weight``, ``transfer_matrix.weight``) with ``entity2id.txt``/``relation2id.txt``.
* DGL-KE's ``.npy`` files with ``entities.tsv``/``relations.tsv``.
* A labelled triples TSV that PyKEEN's ``TriplesFactory.from_path`` reads.

The writers take a :class:`~kgplm.kg.embeddings.models.KGEmbeddings`; the readers return its parts
(the tables in the store's id order when a store and id maps are given), from which
:class:`~kgplm.kg.embeddings.models.KGEmbeddings`' ``load``, ``from_openke`` and ``from_dglke``
build the object.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from kgplm._io import atomic_directory, atomic_file, iter_lines, require_file
from kgplm.exceptions import ArtifactError, ConfigurationError, DataFormatError, MissingFileError

if TYPE_CHECKING:  # pragma: no cover
    from kgplm.kg.embeddings.models import KGEmbeddings
    from kgplm.kg.store import KGStore

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "save_embeddings",
    "read_embeddings",
    "write_openke",
    "read_openke",
    "write_dglke",
    "read_dglke",
    "dglke_model_name",
    "write_triples_tsv",
]

#: the ``format`` field of kgplm's ``config.json``
FORMAT = "kgplm-kg-embeddings"
FORMAT_VERSION = 1


# -- kgplm's own format ----------------------------------------------------------------------------
def save_embeddings(embeddings: KGEmbeddings, directory: str | os.PathLike) -> Path:
    """Write ``embeddings.safetensors`` and ``config.json`` to ``directory`` (atomically)."""
    from safetensors.torch import save_file

    tensors = {
        "entity_embeddings": embeddings.entity_embeddings.detach().contiguous().float(),
        "relation_embeddings": embeddings.relation_embeddings.detach().contiguous().float(),
    }
    if embeddings.projections is not None:
        tensors["projections"] = embeddings.projections.detach().contiguous().float()
    meta = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "method": embeddings.method,
        "norm": embeddings.norm,
        "num_entities": embeddings.num_entities,
        "num_relations": embeddings.num_relations,
        "entity_dim": embeddings.entity_dim,
        "relation_dim": embeddings.relation_dim,
        "store_fingerprint": embeddings.store_fingerprint,
        "config": embeddings.config,
        "history": embeddings.history,
    }
    with atomic_directory(directory) as temporary:
        save_file(tensors, str(temporary / "embeddings.safetensors"))
        (temporary / "config.json").write_text(json.dumps(meta, ensure_ascii=False, indent=1), encoding="utf-8")
    return Path(directory)


def read_embeddings(directory: str | os.PathLike) -> dict[str, Any]:
    """What :func:`save_embeddings` wrote, as the keyword arguments of
    :class:`~kgplm.kg.embeddings.models.KGEmbeddings`."""
    from safetensors.torch import load_file

    directory = Path(directory)
    if not directory.is_dir():
        raise MissingFileError(directory, "embeddings directory")
    meta_path = require_file(directory / "config.json", "embeddings config")
    tensors_path = require_file(directory / "embeddings.safetensors", "embeddings tensors")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise DataFormatError(f"not valid JSON: {error.msg}", path=meta_path, line=error.lineno) from None
    if meta.get("format") != FORMAT:
        raise ArtifactError(f"{meta_path} is not a kgplm embeddings config (format {meta.get('format')!r})")
    from safetensors import SafetensorError

    try:
        tensors = load_file(str(tensors_path))
    except (SafetensorError, OSError) as error:  # a header or data cut short, or overwritten
        raise ArtifactError(
            f"{tensors_path}: not a complete safetensors file ({error}); the embeddings are damaged: train them again"
        ) from None
    return dict(
        method=meta["method"],
        entity_embeddings=tensors["entity_embeddings"],
        relation_embeddings=tensors["relation_embeddings"],
        projections=tensors.get("projections"),
        norm=int(meta["norm"]),
        config=meta.get("config", {}),
        history=meta.get("history", []),
        store_fingerprint=meta.get("store_fingerprint"),
    )


# -- OpenKE ----------------------------------------------------------------------------------------
def write_openke(embeddings: KGEmbeddings, directory: str | os.PathLike, store: "KGStore | None" = None) -> Path:
    """Write OpenKE's parameter dump ``embedding.vec.json`` and, with ``store``, its id maps.

    Keys: ``ent_embeddings.weight`` (E, k), ``rel_embeddings.weight`` (R, d) and for TransR
    ``transfer_matrix.weight`` (R, k·d), row-major, the layout OpenKE's TransR reshapes to
    (k, d) and multiplies as ``e @ M``. ``entity2id.txt``/``relation2id.txt`` hold the count on
    the first line, then ``IRI<TAB>id``.
    """
    parameters = {
        "ent_embeddings.weight": embeddings.entity_embeddings.tolist(),
        "rel_embeddings.weight": embeddings.relation_embeddings.tolist(),
    }
    if embeddings.projections is not None:
        parameters["transfer_matrix.weight"] = embeddings.projections.reshape(embeddings.num_relations, -1).tolist()
    with atomic_directory(directory) as temporary:
        with open(temporary / "embedding.vec.json", "w", encoding="utf-8") as handle:
            json.dump(parameters, handle)
        if store is not None:
            embeddings.check_compatible(store)
            _write_id_maps(temporary, store, ("entity2id.txt", "relation2id.txt"), openke=True)
    return Path(directory)


def read_openke(
    path: str | os.PathLike,
    store: "KGStore | None" = None,
    *,
    entity2id: str | os.PathLike | None = None,
    relation2id: str | os.PathLike | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, Path]:
    """The tables of an OpenKE JSON dump (a file, or a directory holding ``embedding.vec.json``) and
    the JSON file's path.

    With ``store`` and the id maps (``entity2id.txt``/``relation2id.txt``, found beside the
    JSON when not given), rows are reordered to the store's ids by name or IRI; without id
    maps the tables keep the file's order.
    """
    path = Path(path)
    json_path = path / "embedding.vec.json" if path.is_dir() else path
    json_path = require_file(json_path, "OpenKE embedding file")
    try:
        with open(json_path, encoding="utf-8") as handle:
            parameters = json.load(handle)
    except json.JSONDecodeError as error:
        raise DataFormatError(
            f"not valid JSON: {error.msg}", path=json_path, line=error.lineno, expected="OpenKE's parameter dump"
        ) from None
    missing = [key for key in ("ent_embeddings.weight", "rel_embeddings.weight") if key not in parameters]
    if missing:
        raise ArtifactError(f"{json_path} lacks {', '.join(missing)}; it has keys {sorted(parameters)}")
    entities = torch.tensor(parameters["ent_embeddings.weight"], dtype=torch.float32)
    relations = torch.tensor(parameters["rel_embeddings.weight"], dtype=torch.float32)
    projections = None
    if "transfer_matrix.weight" in parameters:
        flat = torch.tensor(parameters["transfer_matrix.weight"], dtype=torch.float32)
        if flat.shape != (relations.shape[0], entities.shape[1] * relations.shape[1]):
            raise ArtifactError(
                f"{json_path}: transfer_matrix.weight has shape {tuple(flat.shape)}; expected "
                f"({relations.shape[0]}, {entities.shape[1] * relations.shape[1]}) = (relations, "
                f"entity_dim × relation_dim) from ent_embeddings {tuple(entities.shape)} and rel_embeddings "
                f"{tuple(relations.shape)}"
            )
        projections = flat.view(relations.shape[0], entities.shape[1], relations.shape[1])
    if store is not None:
        base = json_path.parent
        entity2id = entity2id or (base / "entity2id.txt" if (base / "entity2id.txt").is_file() else None)
        relation2id = relation2id or (base / "relation2id.txt" if (base / "relation2id.txt").is_file() else None)
        entity_map = None if entity2id is None else (_read_openke_id_map(entity2id), Path(entity2id))
        relation_map = None if relation2id is None else (_read_openke_id_map(relation2id), Path(relation2id))
        entities, relations, projections = _apply_id_maps(
            entities, relations, projections, store, entity_map, relation_map, json_path
        )
    return entities, relations, projections, json_path


# -- DGL-KE ----------------------------------------------------------------------------------------
def dglke_model_name(method: str, norm: int) -> str:
    """DGL-KE's model name in its file names: ``TransE_l1``, ``TransE_l2`` or ``TransR``."""
    return "TransR" if method == "transr" else f"TransE_l{norm}"


def write_dglke(
    embeddings: KGEmbeddings,
    directory: str | os.PathLike,
    store: "KGStore | None" = None,
    *,
    dataset: str = "kgplm",
) -> Path:
    """Write DGL-KE's files: ``{dataset}_{model}_entity.npy``, ``..._relation.npy``, for TransR
    ``..._projection.npy`` (R, k·d), and with ``store`` ``entities.tsv``/``relations.tsv`` (``id<TAB>IRI``)."""
    prefix = f"{dataset}_{dglke_model_name(embeddings.method, embeddings.norm)}"
    with atomic_directory(directory) as temporary:
        np.save(temporary / f"{prefix}_entity.npy", embeddings.entity_embeddings.numpy())
        np.save(temporary / f"{prefix}_relation.npy", embeddings.relation_embeddings.numpy())
        if embeddings.projections is not None:
            np.save(
                temporary / f"{prefix}_projection.npy",
                embeddings.projections.reshape(embeddings.num_relations, -1).numpy(),
            )
        if store is not None:
            embeddings.check_compatible(store)
            _write_id_maps(temporary, store, ("entities.tsv", "relations.tsv"), openke=False)
    return Path(directory)


def read_dglke(
    directory: str | os.PathLike, store: "KGStore | None" = None, *, norm: int | None = None
) -> tuple[str, int, torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """``(method, norm, entities, relations, projections)`` from DGL-KE's ``*_entity.npy``/``*_relation.npy``
    (and ``*projection.npy`` for TransR).

    The method and norm come from the file names (``TransE_l1``, ``TransE_l2``, ``TransR``); a given
    ``norm`` overrides the name's. With ``store`` and ``entities.tsv``/``relations.tsv`` beside them, rows
    are reordered to the store's ids.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise MissingFileError(directory, "DGL-KE embedding directory")
    entity_files = sorted(directory.glob("*_entity.npy"))
    if len(entity_files) != 1:
        raise ArtifactError(
            f"{directory} should hold exactly one '*_entity.npy' file; found {[p.name for p in entity_files]}"
        )
    prefix = entity_files[0].name[: -len("_entity.npy")]
    relation_path = require_file(directory / f"{prefix}_relation.npy", "DGL-KE relation embeddings")
    method = "transr" if prefix.endswith("TransR") else "transe"
    if norm is None:
        norm = 1 if prefix.endswith("_l1") else 2
    entities = torch.from_numpy(np.load(entity_files[0], allow_pickle=False)).float()
    relations = torch.from_numpy(np.load(relation_path, allow_pickle=False)).float()
    projections = None
    if method == "transr":
        candidates = sorted(directory.glob("*projection.npy"))
        if not candidates:
            raise ArtifactError(f"{directory}: TransR files ({prefix}) but no '*projection.npy'")
        flat = torch.from_numpy(np.load(candidates[0], allow_pickle=False)).float()
        expected = (relations.shape[0], entities.shape[1] * relations.shape[1])
        if tuple(flat.shape) != expected:
            raise ArtifactError(f"{candidates[0]} has shape {tuple(flat.shape)}; expected {expected}")
        projections = flat.view(relations.shape[0], entities.shape[1], relations.shape[1])
    if store is not None:
        maps = []
        for name in ("entities.tsv", "relations.tsv"):
            path = directory / name
            maps.append((_read_dglke_id_map(path), path) if path.is_file() else None)
        entities, relations, projections = _apply_id_maps(
            entities, relations, projections, store, *maps, entity_files[0]
        )
    return method, norm, entities, relations, projections


# -- id maps ---------------------------------------------------------------------------------------
def _write_id_maps(directory: Path, store: "KGStore", file_names: tuple[str, str], *, openke: bool) -> None:
    """Entity and relation id maps: OpenKE ``count`` line then ``IRI<TAB>id``; DGL-KE ``id<TAB>IRI``."""
    entity_iris = (store.entity_iri(i) for i in range(store.num_entities))
    for file_name, names, count in (
        (file_names[0], entity_iris, store.num_entities),
        (file_names[1], store.relation_iris, store.num_relations),
    ):
        with open(directory / file_name, "w", encoding="utf-8") as handle:
            if openke:
                handle.write(f"{count}\n")
            for index, name in enumerate(names):
                handle.write(f"{name}\t{index}\n" if openke else f"{index}\t{name}\n")


def _apply_id_maps(
    entities: torch.Tensor,
    relations: torch.Tensor,
    projections: torch.Tensor | None,
    store: "KGStore",
    entity_map,
    relation_map,
    source: Path,
):
    """Reorder imported tables to the store's ids; each map is ``(rows, path)`` or None (keep the order)."""
    if entity_map is not None:
        entities = _reorder_rows(entities, entity_map[0], entity_map[1], store, "entity", source)
    if relation_map is not None:
        order = _reorder_rows(
            torch.arange(relations.shape[0]).unsqueeze(1).float(),
            relation_map[0],
            relation_map[1],
            store,
            "relation",
            source,
        )
        index = order.squeeze(1).long()
        relations = relations[index]
        projections = None if projections is None else projections[index]
    return entities, relations, projections


def _read_openke_id_map(path: str | os.PathLike) -> list[tuple[str, int, int]]:
    """``(name, id, line)`` rows of an OpenKE ``*2id.txt`` (count on line 1, then ``name<TAB>id``)."""
    rows = []
    for line_number, line in iter_lines(path):
        if line_number == 1 or not line.strip():
            continue
        parts = line.rsplit("\t", 1) if "\t" in line else line.rsplit(" ", 1)
        if len(parts) != 2 or not parts[1].strip().isdigit():
            raise DataFormatError(f"cannot read {line!r}", path=path, line=line_number, expected="name<TAB>id")
        rows.append((parts[0], int(parts[1]), line_number))
    return rows


def _read_dglke_id_map(path: str | os.PathLike) -> list[tuple[str, int, int]]:
    rows = []
    for line_number, line in iter_lines(path):
        if not line.strip():
            continue
        parts = line.split("\t", 1)
        if len(parts) != 2 or not parts[0].strip().isdigit():
            raise DataFormatError(f"cannot read {line!r}", path=path, line=line_number, expected="id<TAB>name")
        rows.append((parts[1], int(parts[0]), line_number))
    return rows


def _reorder_rows(
    table: torch.Tensor,
    id_map: list[tuple[str, int, int]],
    id_map_path: Path,
    store: "KGStore",
    kind: str,
    source: Path,
) -> torch.Tensor:
    """Rows of ``table`` (numbered by the file's ids) placed at the store's ids, matched by IRI or name."""
    size = store.num_entities if kind == "entity" else store.num_relations
    result = torch.empty(size, table.shape[1], dtype=table.dtype)
    filled = torch.zeros(size, dtype=torch.bool)
    for name, file_id, line in id_map:
        if not 0 <= file_id < table.shape[0]:
            raise DataFormatError(
                f"{kind} id {file_id} is outside the table of {table.shape[0]} rows in {source}",
                path=id_map_path,
                line=line,
                expected=f"ids 0..{table.shape[0] - 1}",
            )
        if kind == "entity":
            found = store.entity_ids(name)
            if len(found) != 1:
                continue
            store_id = found[0]
        else:
            try:
                store_id = store.relation_id(name)
            except ConfigurationError:
                continue
        result[store_id] = table[file_id]
        filled[store_id] = True
    if not bool(filled.all()):
        missing = torch.flatnonzero(~filled)[:5].tolist()
        names = [store.entity_iri(i) if kind == "entity" else store.relation_iris[i] for i in missing]
        raise ArtifactError(
            f"{int((~filled).sum()):,} of the store's {size:,} {kind}s have no row in {source} "
            f"(table shape {tuple(table.shape)}), e.g. {names}"
        )
    return result


# -- a labelled triples TSV ------------------------------------------------------------------------
def write_triples_tsv(store: "KGStore", path: str | os.PathLike, triples: np.ndarray | None = None) -> Path:
    """Write ``head<TAB>relation<TAB>tail`` with IRIs, the file PyKEEN's ``TriplesFactory.from_path`` reads."""
    triples = store.triples if triples is None else np.asarray(triples)
    relation_iris = store.relation_iris
    with atomic_file(path, "w", encoding="utf-8", newline="\n") as handle:
        for head, relation, tail in np.asarray(triples).tolist():
            handle.write(f"{store.entity_iri(head)}\t{relation_iris[relation]}\t{store.entity_iri(tail)}\n")
    return Path(path)
