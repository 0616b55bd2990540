"""The TransE and TransR energies and the embeddings object: scores against hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from kgplm.exceptions import ArtifactError
from kgplm.kg.embeddings import KGEmbeddings, translation_energy
from tests.kg.embeddings.helpers import random_embeddings


def test_transr_energy_matches_per_triple_matrix_products():
    emb = random_embeddings("transr", 9, 3, norm=2)
    triples = np.array([[0, 2, 1], [3, 0, 4], [5, 1, 5], [8, 2, 0], [2, 0, 7]])
    expected = []
    for head, relation, tail in triples:
        matrix = emb.projections[relation]
        h = emb.entity_embeddings[head] @ matrix
        t = emb.entity_embeddings[tail] @ matrix
        h = h / max(1.0, float(h.norm()))
        t = t / max(1.0, float(t.norm()))
        expected.append(float((h + emb.relation_embeddings[relation] - t).norm(p=2)))
    torch.testing.assert_close(emb.energy(triples), torch.tensor(expected), rtol=1e-5, atol=1e-6)


def test_transe_energy_is_the_l1_distance():
    emb = random_embeddings("transe", 5, 2, norm=1)
    e, r = emb.entity_embeddings, emb.relation_embeddings
    expected = (e[1] + r[0] - e[3]).abs().sum()
    torch.testing.assert_close(emb.energy([[1, 0, 3]])[0], expected)


def test_translation_energy_gradient_reaches_every_input():
    vectors = [torch.randn(4, 3, requires_grad=True) for _ in range(3)]
    matrices = torch.randn(2, 3, 3, requires_grad=True)
    translation_energy(*vectors, 2, matrices=matrices, group_sizes=[1, 3]).sum().backward()
    for tensor in (*vectors, matrices):
        assert tensor.grad is not None and bool(tensor.grad.abs().sum() > 0)


def test_loading_for_another_store_names_both_shapes(tmp_path, composition_store):
    emb = random_embeddings("transe", 7, 2)
    emb.save(tmp_path / "emb")
    with pytest.raises(ArtifactError, match=r"7 entity rows.*\(7, 6\).*48 entities"):
        KGEmbeddings.load(tmp_path / "emb", store=composition_store)
