"""Round trips through kgplm's, OpenKE's and DGL-KE's files and the labelled triples TSV."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from kgplm.exceptions import ArtifactError, DataFormatError
from kgplm.kg.embeddings import KGEmbeddings, train_kg_embeddings, write_triples_tsv


def test_save_load_round_trip_is_exact(tmp_path, composition_store):
    emb = train_kg_embeddings(
        composition_store, method="transr", dim=6, relation_dim=4, epochs=2, batch_size=8, progress=False
    )
    emb.save(tmp_path / "emb")
    loaded = KGEmbeddings.load(tmp_path / "emb", store=composition_store)
    assert loaded.method == "transr" and loaded.norm == emb.norm and loaded.config == emb.config
    for name in ("entity_embeddings", "relation_embeddings", "projections"):
        assert torch.equal(getattr(loaded, name), getattr(emb, name))
    assert torch.equal(loaded.energy(composition_store.triples), emb.energy(composition_store.triples))
    assert not list(tmp_path.glob(".emb.tmp-*"))


def test_openke_round_trip_and_reordering(tmp_path, composition_store):
    store = composition_store
    emb = train_kg_embeddings(store, method="transr", dim=6, relation_dim=4, epochs=1, batch_size=8, progress=False)
    emb.to_openke(tmp_path / "openke", store)
    parameters = json.loads((tmp_path / "openke" / "embedding.vec.json").read_text())
    assert sorted(parameters) == ["ent_embeddings.weight", "rel_embeddings.weight", "transfer_matrix.weight"]
    assert np.array(parameters["transfer_matrix.weight"]).shape == (store.num_relations, 24)
    back = KGEmbeddings.from_openke(tmp_path / "openke", store)
    assert back.method == "transr"
    for name in ("entity_embeddings", "relation_embeddings", "projections"):
        assert torch.equal(getattr(back, name), getattr(emb, name))

    # a dump whose ids are in another order is mapped back through entity2id.txt
    permutation = np.random.default_rng(0).permutation(store.num_entities)
    shuffled = {
        "ent_embeddings.weight": emb.entity_embeddings[permutation].tolist(),
        "rel_embeddings.weight": emb.relation_embeddings.tolist(),
        "transfer_matrix.weight": parameters["transfer_matrix.weight"],
    }
    other = tmp_path / "shuffled"
    other.mkdir()
    (other / "embedding.vec.json").write_text(json.dumps(shuffled))
    (other / "entity2id.txt").write_text(
        f"{store.num_entities}\n" + "".join(f"{store.entity_iri(int(e))}\t{row}\n" for row, e in enumerate(permutation))
    )
    remapped = KGEmbeddings.from_openke(other, store)
    assert torch.equal(remapped.entity_embeddings, emb.entity_embeddings)


def test_openke_shape_mismatch_is_reported(tmp_path, composition_store):
    path = tmp_path / "bad.json"
    path.write_text(
        json.dumps(
            {
                "ent_embeddings.weight": [[0.0] * 4] * 3,
                "rel_embeddings.weight": [[0.0] * 2] * 2,
                "transfer_matrix.weight": [[0.0] * 5] * 2,
            }
        )
    )
    with pytest.raises(ArtifactError, match=r"\(2, 5\).*\(2, 8\)"):
        KGEmbeddings.from_openke(path)
    path.write_text(json.dumps({"ent_embeddings.weight": [[0.0] * 4] * 3, "rel_embeddings.weight": [[0.0] * 4]}))
    with pytest.raises(ArtifactError, match=r"3 entity rows.*48 entities"):
        KGEmbeddings.from_openke(path, composition_store)
    (tmp_path / "broken.json").write_text('{"ent_embeddings.weight": [[1.0, ')
    with pytest.raises(DataFormatError, match="broken.json:1"):
        KGEmbeddings.from_openke(tmp_path / "broken.json")


@pytest.mark.parametrize("method", ["transe", "transr"])
def test_dglke_round_trip(tmp_path, composition_store, method):
    emb = train_kg_embeddings(
        composition_store,
        method=method,
        dim=6,
        relation_dim=6 if method == "transe" else 4,
        epochs=1,
        batch_size=8,
        progress=False,
    )
    emb.to_dglke(tmp_path / "dglke", composition_store, dataset="toy")
    expected_name = "toy_TransR_entity.npy" if method == "transr" else "toy_TransE_l1_entity.npy"
    assert (tmp_path / "dglke" / expected_name).is_file()
    back = KGEmbeddings.from_dglke(tmp_path / "dglke", composition_store)
    assert (back.method, back.norm) == (method, emb.norm)
    assert torch.equal(back.entity_embeddings, emb.entity_embeddings)
    if method == "transr":
        assert torch.equal(back.projections, emb.projections)


def test_triples_tsv_reads_back_as_the_same_graph(tmp_path, composition_store):
    path = write_triples_tsv(composition_store, tmp_path / "triples.tsv")
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == composition_store.num_triples and all(line.count("\t") == 2 for line in lines)
    head, relation, tail = lines[0].split("\t")
    h, r, t = composition_store.triples[0]
    assert (head, relation, tail) == (
        composition_store.entity_iri(h),
        composition_store.relation_iris[r],
        composition_store.entity_iri(t),
    )
