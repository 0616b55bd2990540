"""TransE and TransR: the energies, their constraints, and the embeddings object (:class:`KGEmbeddings`).

SMedBERT uses TransR entity embeddings (200-d) and KeBioLM initialises its entity table from
TransE (100-d). Both papers trained them outside their code with OpenKE; kgplm trains them itself
(:mod:`kgplm.kg.embeddings.training`).

TransE (Bordes et al., NeurIPS 2013, "Translating Embeddings for Modeling Multi-relational Data")
    energy  d(h, r, t) = ‖h + r − t‖_p                                   (p = 1 or 2)
    entity vectors are renormalised to ‖e‖₂ = 1 before every minibatch (Algorithm 1, line 5);
    relation and entity vectors start uniform in ±6/√k, relations normalised once.

TransR (Lin et al., AAAI 2015, "Learning Entity and Relation Embeddings for Knowledge Graph
Completion")
    h_r = h M_r,  t_r = t M_r            (M_r ∈ R^{k×d}, entity space k → relation space d)
    energy  f_r(h, t) = ‖h_r + r − t_r‖_p
    constraints ‖h‖₂ ≤ 1, ‖r‖₂ ≤ 1, ‖h M_r‖₂ ≤ 1, ‖t M_r‖₂ ≤ 1
    M_r starts as the identity, entity and relation vectors from TransE
    (pass ``initialize_from=`` a TransE result, as the paper does).

Choices and deviations, each stated here so that nobody has to read the code to find them:

* Distances are not squared (TransR writes ‖·‖²₂). Squaring does not change any ranking but would
  change what the margin means; ``norm=2`` gives the plain L2 distance.
* TransR's constraints: entity and relation rows used by a training batch are projected back into
  the unit ball after each step (hard constraint), and the projected vectors h M_r, t M_r are
  rescaled to norm ≤ 1 inside the energy (x / max(1, ‖x‖), differentiable), so that training and
  evaluation score with the same function. The paper leaves the enforcement open; OpenKE instead
  forces unit norm, which changes the model.

Training, link prediction and the file formats live beside this module:
:mod:`~kgplm.kg.embeddings.training`, :mod:`~kgplm.kg.embeddings.evaluation`,
:mod:`~kgplm.kg.embeddings.files`.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from kgplm.exceptions import ArtifactError, ConfigurationError
from kgplm.kg.embeddings import evaluation, files
from kgplm.kg.embeddings.triples import id_triples

if TYPE_CHECKING:  # pragma: no cover
    from kgplm.kg.store import KGStore

__all__ = [
    "METHODS",
    "KGEmbeddings",
    "translation_energy",
    "clamp_to_unit_ball",
    "identity_projections",
    "store_fingerprint",
]

METHODS = ("transe", "transr")


# -- identity of a store ---------------------------------------------------------------------------
def store_fingerprint(store: "KGStore") -> str:
    """A hash of the store's entity and relation IRIs in id order: embeddings are tied to it."""
    digest = hashlib.sha256()
    for index in range(store.num_entities):
        digest.update(store.entity_iri(index).encode("utf-8"))
        digest.update(b"\n")
    digest.update(b"\x00")
    for iri in store.relation_iris:
        digest.update(iri.encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


# -- the scoring function, shared by training and evaluation ----------------------------------------
def clamp_to_unit_ball(vectors: torch.Tensor) -> torch.Tensor:
    """x / max(1, ‖x‖₂): the TransR constraint ‖x M_r‖ ≤ 1, differentiable."""
    return vectors * vectors.norm(dim=-1, keepdim=True).clamp_min(1.0).reciprocal()


def translation_energy(
    head_vectors: torch.Tensor,
    relation_vectors: torch.Tensor,
    tail_vectors: torch.Tensor,
    norm: int,
    *,
    matrices: torch.Tensor | None = None,
    group_sizes: list[int] | None = None,
) -> torch.Tensor:
    """‖h + r − t‖_p per row (TransE), or ‖h M_r + r − t M_r‖_p with the projections clamped (TransR).

    For TransR the rows must be sorted by relation: ``group_sizes[g]`` consecutive rows use
    ``matrices[g]`` (shape (groups, k, d)), one matrix product per group.
    """
    if matrices is not None:
        both = torch.stack([head_vectors, tail_vectors], dim=1)  # (n, 2, k)
        pieces = torch.split(both, group_sizes)
        both = torch.cat([piece @ matrix for piece, matrix in zip(pieces, matrices)])  # (n, 2, d)
        both = clamp_to_unit_ball(both)
        head_vectors, tail_vectors = both[:, 0], both[:, 1]  # (n, d) each
    return (head_vectors + relation_vectors - tail_vectors).norm(p=norm, dim=-1)


def identity_projections(num_relations: int, entity_dim: int, relation_dim: int) -> torch.Tensor:
    """(R, k, d) identity (rectangular when k ≠ d): TransR's initial M_r."""
    return torch.eye(entity_dim, relation_dim).expand(num_relations, entity_dim, relation_dim).clone()


# -- the result object ------------------------------------------------------------------------------
@dataclass
class KGEmbeddings:
    """Trained (or imported) TransE / TransR embeddings of one store.

    ``entity_embeddings`` (num_entities, entity_dim), ``relation_embeddings`` (num_relations,
    relation_dim) and, for TransR, ``projections`` (num_relations, entity_dim, relation_dim) with
    h_r = h @ projections[r]. ``config`` holds the training arguments that replay the run, and
    ``history`` the mean loss per epoch. ``timings`` (``training_seconds``, ``triples_per_second``)
    is how long training took where it ran: kept on the object and logged, never saved, so two
    identical trainings save byte-identical directories.
    """

    method: str
    entity_embeddings: torch.Tensor
    relation_embeddings: torch.Tensor
    projections: torch.Tensor | None = None
    norm: int = 1
    config: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, float]] = field(default_factory=list)
    store_fingerprint: str | None = None
    timings: dict[str, float] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ConfigurationError(f"method must be one of {METHODS}, got {self.method!r}")
        if self.norm not in (1, 2):
            raise ConfigurationError(f"norm must be 1 or 2, got {self.norm!r}")
        if self.method == "transr" and self.projections is None:
            raise ArtifactError("TransR embeddings need projection matrices (num_relations, entity_dim, relation_dim)")
        if self.method == "transe" and self.entity_dim != self.relation_dim:
            raise ArtifactError(
                f"TransE needs entity and relation vectors of one size; got entity {tuple(self.entity_embeddings.shape)}"
                f" and relation {tuple(self.relation_embeddings.shape)}"
            )
        if self.projections is not None:
            expected = (self.num_relations, self.entity_dim, self.relation_dim)
            if tuple(self.projections.shape) != expected:
                raise ArtifactError(
                    f"projection matrices have shape {tuple(self.projections.shape)}; "
                    f"expected {expected} from the entity and relation tables"
                )

    # -- shapes -------------------------------------------------------------------------------
    @property
    def num_entities(self) -> int:
        return int(self.entity_embeddings.shape[0])

    @property
    def num_relations(self) -> int:
        return int(self.relation_embeddings.shape[0])

    @property
    def entity_dim(self) -> int:
        return int(self.entity_embeddings.shape[1])

    @property
    def relation_dim(self) -> int:
        return int(self.relation_embeddings.shape[1])

    def __repr__(self) -> str:
        return (
            f"KGEmbeddings(method={self.method!r}, num_entities={self.num_entities:,}, "
            f"num_relations={self.num_relations:,}, entity_dim={self.entity_dim}, "
            f"relation_dim={self.relation_dim}, norm={self.norm})"
        )

    def check_compatible(self, store: "KGStore") -> None:
        """Raise :class:`ArtifactError` when these embeddings were not made for ``store``."""
        expected = (store.num_entities, store.num_relations)
        found = (self.num_entities, self.num_relations)
        if expected != found:
            raise ArtifactError(
                f"the embeddings have {found[0]:,} entity rows and {found[1]:,} relation rows "
                f"(entity table {tuple(self.entity_embeddings.shape)}, relation table "
                f"{tuple(self.relation_embeddings.shape)}), but the store has {expected[0]:,} entities and "
                f"{expected[1]:,} relations"
            )
        if self.store_fingerprint is not None and self.store_fingerprint != store_fingerprint(store):
            raise ArtifactError(
                "the embeddings have the store's shapes but were trained on a store with other "
                "entity or relation IRIs (fingerprints differ)"
            )

    # -- scoring ------------------------------------------------------------------------------
    @torch.no_grad()
    def energy(self, triples: np.ndarray | torch.Tensor) -> torch.Tensor:
        """The energy of each (head, relation, tail) row; lower means more plausible."""
        triples = id_triples(triples, self.num_entities, self.num_relations)
        if self.projections is None:
            return translation_energy(
                self.entity_embeddings[triples[:, 0]],
                self.relation_embeddings[triples[:, 1]],
                self.entity_embeddings[triples[:, 2]],
                self.norm,
            )
        order = torch.argsort(triples[:, 1], stable=True)
        ordered = triples[order]
        present, group_sizes = torch.unique_consecutive(ordered[:, 1], return_counts=True)
        energies = translation_energy(
            self.entity_embeddings[ordered[:, 0]],
            self.relation_embeddings[ordered[:, 1]],
            self.entity_embeddings[ordered[:, 2]],
            self.norm,
            matrices=self.projections[present],
            group_sizes=group_sizes.tolist(),
        )
        result = torch.empty_like(energies)
        result[order] = energies
        return result

    def projected_entities(self, relation: int) -> torch.Tensor:
        """All entity vectors in relation ``relation``'s space, constraint applied: (num_entities, relation_dim)."""
        if self.projections is None:
            return self.entity_embeddings
        return clamp_to_unit_ball(self.entity_embeddings @ self.projections[relation])

    def evaluate(
        self,
        test_triples,
        *,
        filter_triples=None,
        store: "KGStore | None" = None,
        sides: tuple[str, ...] = ("head", "tail"),
        batch_size: int = 256,
        progress: bool = True,
    ) -> dict[str, float]:
        """Filtered link prediction of these embeddings:
        :func:`~kgplm.kg.embeddings.evaluation.evaluate_link_prediction`, whose docstring describes the
        arguments. Returns ``{"mrr", "hits@1", "hits@3", "hits@10", "mean_rank", "num_ranks"}``."""
        return evaluation.evaluate_link_prediction(
            self,
            test_triples,
            filter_triples=filter_triples,
            store=store,
            sides=sides,
            batch_size=batch_size,
            progress=progress,
        )

    # -- files (:mod:`kgplm.kg.embeddings.files`) -------------------------------------------------
    def save(self, directory: str | os.PathLike) -> Path:
        """Write ``embeddings.safetensors`` and ``config.json`` to ``directory`` (atomically)."""
        return files.save_embeddings(self, directory)

    @classmethod
    def load(cls, directory: str | os.PathLike, *, store: "KGStore | None" = None) -> "KGEmbeddings":
        """Read what :meth:`save` wrote; with ``store``, check the embeddings belong to it."""
        embeddings = cls(**files.read_embeddings(directory))
        if store is not None:
            embeddings.check_compatible(store)
        return embeddings

    @classmethod
    def _imported(
        cls, method, entities, relations, projections, norm, origin: str, store: "KGStore | None"
    ) -> "KGEmbeddings":
        embeddings = cls(
            method=method,
            entity_embeddings=entities,
            relation_embeddings=relations,
            projections=projections,
            norm=norm,
            config={"imported_from": origin},
        )
        if store is not None:
            embeddings.check_compatible(store)
            embeddings.store_fingerprint = store_fingerprint(store)
        return embeddings

    def to_openke(self, directory: str | os.PathLike, store: "KGStore | None" = None) -> Path:
        """Write OpenKE's parameter dump ``embedding.vec.json`` and, with ``store``, its id maps.

        Keys: ``ent_embeddings.weight`` (E, k), ``rel_embeddings.weight`` (R, d) and for TransR
        ``transfer_matrix.weight`` (R, k·d), row-major, the layout OpenKE's TransR reshapes to
        (k, d) and multiplies as ``e @ M``. ``entity2id.txt``/``relation2id.txt`` hold the count on
        the first line, then ``IRI<TAB>id``.
        """
        return files.write_openke(self, directory, store)

    @classmethod
    def from_openke(
        cls,
        path: str | os.PathLike,
        store: "KGStore | None" = None,
        *,
        method: str | None = None,
        norm: int = 1,
        entity2id: str | os.PathLike | None = None,
        relation2id: str | os.PathLike | None = None,
    ) -> "KGEmbeddings":
        """Read an OpenKE JSON dump (a file, or a directory holding ``embedding.vec.json``).

        With ``store`` and the id maps (``entity2id.txt``/``relation2id.txt``, found beside the
        JSON when not given), rows are reordered to the store's ids by name or IRI; without id
        maps the tables must have exactly the store's shapes. ``method`` defaults to TransR when
        the dump has ``transfer_matrix.weight``.
        """
        entities, relations, projections, json_path = files.read_openke(
            path, store, entity2id=entity2id, relation2id=relation2id
        )
        method = method or ("transr" if projections is not None else "transe")
        return cls._imported(method, entities, relations, projections, norm, f"openke:{json_path}", store)

    def to_dglke(self, directory: str | os.PathLike, store: "KGStore | None" = None, *, dataset: str = "kgplm") -> Path:
        """Write DGL-KE's files: ``{dataset}_{model}_entity.npy``, ``..._relation.npy``, for TransR
        ``..._projection.npy`` (R, k·d), and with ``store`` ``entities.tsv``/``relations.tsv`` (``id<TAB>IRI``)."""
        return files.write_dglke(self, directory, store, dataset=dataset)

    @classmethod
    def from_dglke(
        cls, directory: str | os.PathLike, store: "KGStore | None" = None, *, norm: int | None = None
    ) -> "KGEmbeddings":
        """Read DGL-KE's ``*_entity.npy``/``*_relation.npy`` (and ``*projection.npy`` for TransR).

        The method and norm come from the file names (``TransE_l1``, ``TransE_l2``, ``TransR``).
        With ``store`` and ``entities.tsv``/``relations.tsv`` beside them, rows are reordered to
        the store's ids.
        """
        method, norm, entities, relations, projections = files.read_dglke(directory, store, norm=norm)
        return cls._imported(method, entities, relations, projections, norm, f"dglke:{directory}", store)
