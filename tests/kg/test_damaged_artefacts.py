"""A store or linker directory with a missing or cut-short array fails with an ArtifactError naming the file;
one in another format version is refused by name with its version."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgplm import KGStore
from kgplm.exceptions import ArtifactError
from kgplm.text import EntityLinker

TOY_GRAPH = Path(__file__).resolve().parents[2] / "graphs" / "toy_medical.ttl"


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    work = tmp_path_factory.mktemp("damaged")
    store = KGStore.from_rdf(TOY_GRAPH, show_progress=False)
    return {"store": store.save(work / "store"), "linker": EntityLinker(store).save(work / "linker")}


def _load(kind: str, directory: Path, mmap: bool):
    return KGStore.load(directory, mmap=mmap) if kind == "store" else EntityLinker.load(directory, mmap=mmap)


def _arrays(saved, kind):
    return sorted(p.name for p in saved[kind].glob("*.npy"))


@pytest.mark.parametrize("kind", ["store", "linker"])
@pytest.mark.parametrize("damage", ["missing", "cut short", "header only"])
@pytest.mark.parametrize("mmap", [True, False])
def test_every_damaged_array_is_named(saved, tmp_path, kind, damage, mmap):
    import shutil

    names = _arrays(saved, kind)
    assert len(names) >= 3
    for name in names:
        directory = tmp_path / f"{kind}-{name}"
        shutil.copytree(saved[kind], directory)
        path = directory / name
        data = path.read_bytes()
        if damage == "missing":
            path.unlink()
        elif damage == "cut short":
            path.write_bytes(data[: max(1, len(data) - 7)] if len(data) > 140 else data[:60])
        else:
            path.write_bytes(data[:10])
        with pytest.raises(ArtifactError, match=name.replace(".", r"\.")):
            _load(kind, directory, mmap)


@pytest.mark.parametrize("kind", ["store", "linker"])
def test_another_format_version_is_refused_by_name_with_its_version(saved, tmp_path, kind):
    import shutil

    directory = shutil.copytree(saved[kind], tmp_path / kind)
    manifest = json.loads((directory / "manifest.json").read_text())
    (directory / "manifest.json").write_text(json.dumps({**manifest, "format_version": 0}))
    with pytest.raises(ArtifactError, match=f"{'store' if kind == 'store' else 'linker'} format version 0"):
        _load(kind, directory, True)


def test_a_cut_short_neighbour_table_or_embeddings_file_is_named(tmp_path):
    from kgplm.kg import pepr
    from kgplm.kg.embeddings import KGEmbeddings, train_kg_embeddings

    store = KGStore.from_rdf(TOY_GRAPH, show_progress=False)
    table = pepr.top_k_neighbors(store, k=3).save(tmp_path / "neighbors.npz")
    train_kg_embeddings(store, method="transe", dim=8, epochs=1).save(tmp_path / "embeddings")
    for path, load in (
        (tmp_path / "neighbors.npz", lambda: pepr.NeighborTable.load(table)),
        (tmp_path / "embeddings" / "embeddings.safetensors", lambda: KGEmbeddings.load(tmp_path / "embeddings")),
    ):
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
        with pytest.raises(ArtifactError, match=path.name.replace(".", r"\.") + ": not a complete"):
            load()
        path.write_bytes(data)
        load()  # whole again: reads
