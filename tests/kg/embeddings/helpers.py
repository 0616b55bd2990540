"""Helpers of the KG embedding tests: small stores and embeddings with known contents."""

from __future__ import annotations

import hashlib

import torch

from kgplm import KGStore
from kgplm.kg.embeddings import KGEmbeddings

NUM_GROUPS = 12


def store_from_rows(tmp_path, rows, name="kg.tsv") -> KGStore:
    path = tmp_path / name
    path.write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in rows), encoding="utf-8")
    return KGStore.from_triples(path, show_progress=False)


def random_embeddings(
    method: str,
    num_entities: int,
    num_relations: int,
    *,
    seed: int = 0,
    norm: int = 1,
    entity_dim: int = 6,
    relation_dim: int = 4,
) -> KGEmbeddings:
    generator = torch.Generator().manual_seed(seed)
    relation_dim = entity_dim if method == "transe" else relation_dim
    return KGEmbeddings(
        method=method,
        entity_embeddings=torch.randn(num_entities, entity_dim, generator=generator),
        relation_embeddings=torch.randn(num_relations, relation_dim, generator=generator),
        projections=(
            torch.randn(num_relations, entity_dim, relation_dim, generator=generator) * 0.3
            if method == "transr"
            else None
        ),
        norm=norm,
    )


def file_hashes(directory):
    return {
        path.relative_to(directory).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.rglob("*"))
        if path.is_file()
    }
