"""Knowledge-graph embeddings: TransE and TransR training, filtered evaluation, import and export.

SMedBERT uses TransR entity embeddings (200-d) and KeBioLM initialises its entity table from
TransE (100-d). Both papers trained them outside their code with OpenKE; kgplm trains them itself.

TransE (Bordes et al., NeurIPS 2013, "Translating Embeddings for Modeling Multi-relational Data")
    energy  d(h, r, t) = ‖h + r − t‖_p                                   (p = 1 or 2)
    loss    L = Σ_{(h,r,t)} Σ_{(h',r,t')} [γ + d(h, r, t) − d(h', r, t')]_+
    entity vectors are renormalised to ‖e‖₂ = 1 before every minibatch (Algorithm 1, line 5);
    relation and entity vectors start uniform in ±6/√k, relations normalised once.

TransR (Lin et al., AAAI 2015, "Learning Entity and Relation Embeddings for Knowledge Graph
Completion")
    h_r = h M_r,  t_r = t M_r            (M_r ∈ R^{k×d}, entity space k → relation space d)
    energy  f_r(h, t) = ‖h_r + r − t_r‖_p
    constraints ‖h‖₂ ≤ 1, ‖r‖₂ ≤ 1, ‖h M_r‖₂ ≤ 1, ‖t M_r‖₂ ≤ 1
    same margin loss; M_r starts as the identity, entity and relation vectors from TransE
    (pass ``initialize_from=`` a TransE result, as the paper does).

Negatives corrupt the head or the tail with a uniformly drawn entity; the side is chosen with
probability 1/2 ("uniform") or, per relation, with probability tph/(tph + hpt) of replacing the
head ("bernoulli", Wang et al. 2014, used by the TransR paper). Negatives are not filtered
against known triples (as in both papers).

Choices and deviations, each stated here so that nobody has to read the code to find them:

* The loss is the *mean* of the hinge terms over the batch instead of the sum: it only rescales
  the learning rate and keeps one learning rate usable across batch sizes.
* Distances are not squared (TransR writes ‖·‖²₂). Squaring does not change any ranking but would
  change what the margin means; ``norm=2`` gives the plain L2 distance.
* TransR's constraints: entity and relation rows used by a batch are projected back into the unit
  ball after each step (hard constraint), and the projected vectors h M_r, t M_r are rescaled to
  norm ≤ 1 inside the energy (x / max(1, ‖x‖), differentiable), so that training and evaluation
  score with the same function. The paper leaves the enforcement open; OpenKE instead forces unit
  norm, which changes the model.
* All parameters are sparse embedding tables (the projection matrices are one row of k·d values
  per relation), so an optimiser step touches only the rows a batch uses: ``SparseAdam`` (default),
  sparse ``SGD`` or ``Adagrad``. This is what makes 4M-triple graphs train in seconds per epoch.
* TransR computes projections grouped by relation: the batch is sorted by relation and each group
  is one matrix product (no per-triple matrix gather).
* Memory. Training holds the tables, the optimiser's state for them, the triples as
  given (the store's int32 array, memory-mapped when the store is: no int64 copy; a batch is cast
  when it is drawn), one permutation of their indices per epoch (8 bytes a triple) and one batch:

      bytes ≈ 4 · (1 + s) · (E·k + R·d + R·k·d) + 8 · T + (12 · T if the triples are in RAM) + batch

  with s the optimiser's copies (2 for ``sparse_adam``, 1 for ``adagrad``, 0 for ``sgd``), E
  entities of size k, R relations of size d (TransE: d = k, no R·k·d term), T triples. The
  Bernoulli statistics sort one int64 key array once (8 bytes a triple, freed before the tables
  exist); the final constraint pass works in place, a chunk of rows at a time, and the tables are
  returned without a copy. TransR's projections are one (k × d) matrix per relation, R·k·d floats:
  for UMLS-sized graphs (R in the hundreds, k = d = 100, a few MB a relation) they are negligible
  next to the entity table, which sets the size: at E = 4M, k = 100 with Adam the tables take
  4.8 GB (k = 200: 9.6 GB; with ``adagrad`` 6.4 GB). Sizing rule: pick k so that 4·(1+s)·E·k fits
  the budget, and keep d ≪ E / R so that R·k·d stays a small share of E·k. A batch gathers the
  projection rows of the relations it contains only (at most R·k·d floats).
* Evaluation uses filtered ranks (Bordes et al. 2013) and, for ties, the *realistic* rank: the
  mean of the optimistic and the pessimistic rank (PyKEEN's default), so that a model that scores
  every entity the same does not look perfect.

Formats: safetensors + JSON (:meth:`KGEmbeddings.save`), OpenKE's JSON parameter dump (what the
SMedBERT code reads: ``ent_embeddings.weight``, ``rel_embeddings.weight``,
``transfer_matrix.weight``) with ``entity2id.txt``/``relation2id.txt``, DGL-KE's ``.npy`` files
with ``entities.tsv``/``relations.tsv``, and a labelled triples TSV that PyKEEN's
``TriplesFactory.from_path`` reads.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from kgplm.kg import _embedding_kernels as _kernels
from kgplm._io import atomic_directory, atomic_file, iter_lines, require_file
from kgplm.exceptions import ArtifactError, ConfigurationError, DataFormatError, MissingFileError

if TYPE_CHECKING:  # pragma: no cover
    from kgplm.kg.store import KGStore

__all__ = [
    "KGEmbeddings",
    "train_kg_embeddings",
    "split_triples",
    "write_triples_tsv",
    "rank_triples",
    "triples_to_ids",
]

logger = logging.getLogger(__name__)

METHODS = ("transe", "transr")
FORMAT_VERSION = 1


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
def _clamp_to_unit_ball(vectors: torch.Tensor) -> torch.Tensor:
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
        both = _clamp_to_unit_ball(both)
        head_vectors, tail_vectors = both[:, 0], both[:, 1]  # (n, d) each
    return (head_vectors + relation_vectors - tail_vectors).norm(p=norm, dim=-1)


def _identity_projections(num_relations: int, entity_dim: int, relation_dim: int) -> torch.Tensor:
    """(R, k, d) identity (rectangular when k ≠ d): TransR's initial M_r."""
    return torch.eye(entity_dim, relation_dim).expand(num_relations, entity_dim, relation_dim).clone()


# -- row-wise trainable tables ----------------------------------------------------------------------
OPTIMIZERS = ("sparse_adam", "adagrad", "sgd")


class _RowTable:
    """One embedding table trained by row-wise updates: a batch gathers its rows, projected onto
    the constraint set and written back (the paper's "normalise before each minibatch"), as a
    leaf tensor; after ``backward`` the optimiser updates those rows only.

    With ``use_kernels`` (the numba backend, CPU only) the gather and the updates are numba
    kernels (:mod:`kgplm.kg._embedding_kernels`); otherwise the same math runs as torch index
    operations on the table's device (the torch backend, CUDA's path). The batch's ids stay on
    the CPU, where they are made: the distinct rows and the inverse index are computed there and
    copied to the device, so a step never waits on the device for ``torch.unique``'s size.
    """

    def __init__(
        self, weight: torch.Tensor, *, optimizer: str, lr: float, constraint: int, use_kernels: bool | None = None
    ) -> None:
        if optimizer not in OPTIMIZERS:
            raise ConfigurationError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}")
        self.weight = weight.detach().contiguous().float()
        self.optimizer = optimizer
        self.lr = lr
        self.constraint = constraint
        self.use_kernels = self.weight.device.type == "cpu" if use_kernels is None else use_kernels
        if self.use_kernels and self.weight.device.type != "cpu":
            raise ConfigurationError(f"the numba row kernels run on CPU tables; this one is on {self.weight.device}")
        self.state = [
            torch.zeros_like(self.weight) for _ in range({"sparse_adam": 2, "adagrad": 1, "sgd": 0}[optimizer])
        ]
        self.step_count = 0
        self._rows: torch.Tensor | None = None
        self._leaf: torch.Tensor | None = None

    def gather(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(leaf_rows, inverse)`` with ``leaf_rows[inverse] == table[ids]`` after the constraint.

        ``ids`` may live on the CPU whatever the table's device; ``inverse`` is on the table's device.
        """
        rows, inverse = torch.unique(ids, return_inverse=True)
        if self.use_kernels:
            gathered = np.empty((len(rows), self.weight.shape[1]), dtype=np.float32)
            _kernels.gather_constrained(self.weight.numpy(), rows.numpy(), self.constraint, gathered)
            leaf = torch.from_numpy(gathered)
        else:
            device = self.weight.device
            rows = rows.to(device, non_blocking=True)
            inverse = inverse.to(device, non_blocking=True)
            leaf = self.weight.index_select(0, rows)
            if self.constraint == _kernels.CONSTRAINT_UNIT_SPHERE:
                leaf = F.normalize(leaf, dim=1, eps=0.0).nan_to_num_(0.0)
            elif self.constraint == _kernels.CONSTRAINT_UNIT_BALL:
                leaf = _clamp_to_unit_ball(leaf)
            self.weight.index_copy_(0, rows, leaf)
        self._rows, self._leaf = rows, leaf.requires_grad_()
        return self._leaf, inverse

    @torch.no_grad()
    def step(self) -> None:
        """Apply the optimiser to the rows of the last :meth:`gather`, with their gradient."""
        rows, gradient = self._rows, self._leaf.grad
        self._rows = self._leaf = None
        if gradient is None:
            return
        self.step_count += 1
        if self.use_kernels:
            arguments = (self.weight.numpy(), *(state.numpy() for state in self.state), rows.numpy(), gradient.numpy())
            if self.optimizer == "sparse_adam":
                _kernels.adam_rows(*arguments, self.lr, 0.9, 0.999, 1e-8, self.step_count)
            elif self.optimizer == "adagrad":
                _kernels.adagrad_rows(*arguments, self.lr, 1e-10)
            else:
                _kernels.sgd_rows(*arguments, self.lr)
            return
        if self.optimizer == "sparse_adam":
            first, second = self.state
            m = first.index_select(0, rows).mul_(0.9).add_(gradient, alpha=0.1)
            v = second.index_select(0, rows).mul_(0.999).addcmul_(gradient, gradient, value=0.001)
            first.index_copy_(0, rows, m)
            second.index_copy_(0, rows, v)
            step_scale = math.sqrt(1 - 0.999**self.step_count) / (1 - 0.9**self.step_count)
            update = step_scale * m / (v.sqrt() + 1e-8)
        elif self.optimizer == "adagrad":
            (accumulator,) = self.state
            accumulated = accumulator.index_select(0, rows).addcmul_(gradient, gradient)
            accumulator.index_copy_(0, rows, accumulated)
            update = gradient / (accumulated.sqrt() + 1e-10)
        else:
            update = gradient
        self.weight.index_add_(0, rows, update, alpha=-self.lr)

    def release_optimizer_state(self) -> None:
        """Drop the optimiser's moments (two table copies for Adam) once training is over."""
        self.state = []

    @torch.no_grad()
    def apply_constraint_everywhere(self, rows_per_chunk: int = 65536) -> None:
        """Project every row onto the constraint set, in place, a chunk of rows at a time (no
        temporary copy of the table)."""
        for start in range(0, self.weight.shape[0], rows_per_chunk):
            chunk = self.weight[start : start + rows_per_chunk]
            if self.constraint == _kernels.CONSTRAINT_UNIT_SPHERE:
                chunk.copy_(F.normalize(chunk, dim=1, eps=0.0).nan_to_num_(0.0))
            elif self.constraint == _kernels.CONSTRAINT_UNIT_BALL:
                chunk.copy_(_clamp_to_unit_ball(chunk))


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
        triples = _as_triples(triples, self.num_entities, self.num_relations)
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
        return _clamp_to_unit_ball(self.entity_embeddings @ self.projections[relation])

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
        """Filtered link prediction: rank every test triple's head and tail against all entities.

        ``test_triples`` (and ``filter_triples``) are ``(n, 3)`` id arrays, or labelled triples — rows
        of (head, relation, tail) strings as PyKEEN users read them from a TSV: IRIs, names or aliases
        of entities and IRIs or names of relations, mapped through ``store`` (required for labels;
        an unknown or ambiguous label raises a :class:`KgplmError` naming it).
        ``filter_triples`` are the known true triples (usually train + valid + test); the other
        true answers of a query are removed before ranking. Without it the ranks are *raw*.
        Returns ``{"mrr", "hits@1", "hits@3", "hits@10", "mean_rank", "num_ranks"}`` over both sides.
        """
        test_triples = triples_to_ids(test_triples, store)
        if filter_triples is not None:
            filter_triples = triples_to_ids(filter_triples, store)
        ranks = np.concatenate(
            [
                rank_triples(
                    self,
                    test_triples,
                    side=side,
                    filter_triples=filter_triples,
                    batch_size=batch_size,
                    progress=progress,
                )
                for side in sides
            ]
        )
        return {
            "mrr": float(np.mean(1.0 / ranks)),
            "hits@1": float(np.mean(ranks <= 1)),
            "hits@3": float(np.mean(ranks <= 3)),
            "hits@10": float(np.mean(ranks <= 10)),
            "mean_rank": float(np.mean(ranks)),
            "num_ranks": int(len(ranks)),
        }

    # -- kgplm's own format ---------------------------------------------------------------------
    def save(self, directory: str | os.PathLike) -> Path:
        """Write ``embeddings.safetensors`` and ``config.json`` to ``directory`` (atomically)."""
        from safetensors.torch import save_file

        tensors = {
            "entity_embeddings": self.entity_embeddings.detach().contiguous().float(),
            "relation_embeddings": self.relation_embeddings.detach().contiguous().float(),
        }
        if self.projections is not None:
            tensors["projections"] = self.projections.detach().contiguous().float()
        meta = {
            "format": "kgplm-kg-embeddings",
            "version": FORMAT_VERSION,
            "method": self.method,
            "norm": self.norm,
            "num_entities": self.num_entities,
            "num_relations": self.num_relations,
            "entity_dim": self.entity_dim,
            "relation_dim": self.relation_dim,
            "store_fingerprint": self.store_fingerprint,
            "config": self.config,
            "history": self.history,
        }
        with atomic_directory(directory) as temporary:
            save_file(tensors, str(temporary / "embeddings.safetensors"))
            (temporary / "config.json").write_text(json.dumps(meta, ensure_ascii=False, indent=1), encoding="utf-8")
        return Path(directory)

    @classmethod
    def load(cls, directory: str | os.PathLike, *, store: "KGStore | None" = None) -> "KGEmbeddings":
        """Read what :meth:`save` wrote; with ``store``, check the embeddings belong to it."""
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
        if meta.get("format") != "kgplm-kg-embeddings":
            raise ArtifactError(f"{meta_path} is not a kgplm embeddings config (format {meta.get('format')!r})")
        from safetensors import SafetensorError

        try:
            tensors = load_file(str(tensors_path))
        except (SafetensorError, OSError) as error:  # a header or data cut short, or overwritten
            raise ArtifactError(
                f"{tensors_path}: not a complete safetensors file ({error}); the embeddings are "
                f"damaged: train them again"
            ) from None
        embeddings = cls(
            method=meta["method"],
            entity_embeddings=tensors["entity_embeddings"],
            relation_embeddings=tensors["relation_embeddings"],
            projections=tensors.get("projections"),
            norm=int(meta["norm"]),
            config=meta.get("config", {}),
            history=meta.get("history", []),
            store_fingerprint=meta.get("store_fingerprint"),
        )
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

    # -- OpenKE ---------------------------------------------------------------------------------
    def to_openke(self, directory: str | os.PathLike, store: "KGStore | None" = None) -> Path:
        """Write OpenKE's parameter dump ``embedding.vec.json`` and, with ``store``, its id maps.

        Keys: ``ent_embeddings.weight`` (E, k), ``rel_embeddings.weight`` (R, d) and for TransR
        ``transfer_matrix.weight`` (R, k·d), row-major, the layout OpenKE's TransR reshapes to
        (k, d) and multiplies as ``e @ M``. ``entity2id.txt``/``relation2id.txt`` hold the count on
        the first line, then ``IRI<TAB>id``.
        """
        parameters = {
            "ent_embeddings.weight": self.entity_embeddings.tolist(),
            "rel_embeddings.weight": self.relation_embeddings.tolist(),
        }
        if self.projections is not None:
            parameters["transfer_matrix.weight"] = self.projections.reshape(self.num_relations, -1).tolist()
        with atomic_directory(directory) as temporary:
            with open(temporary / "embedding.vec.json", "w", encoding="utf-8") as handle:
                json.dump(parameters, handle)
            if store is not None:
                self.check_compatible(store)
                _write_id_maps(temporary, store, ("entity2id.txt", "relation2id.txt"), openke=True)
        return Path(directory)

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
        method = method or ("transr" if projections is not None else "transe")
        if store is not None:
            base = json_path.parent
            entity2id = entity2id or (base / "entity2id.txt" if (base / "entity2id.txt").is_file() else None)
            relation2id = relation2id or (base / "relation2id.txt" if (base / "relation2id.txt").is_file() else None)
            entity_map = None if entity2id is None else (_read_openke_id_map(entity2id), Path(entity2id))
            relation_map = None if relation2id is None else (_read_openke_id_map(relation2id), Path(relation2id))
            entities, relations, projections = _apply_id_maps(
                entities, relations, projections, store, entity_map, relation_map, json_path
            )
        return cls._imported(method, entities, relations, projections, norm, f"openke:{json_path}", store)

    # -- DGL-KE ---------------------------------------------------------------------------------
    def _dglke_model_name(self) -> str:
        return "TransR" if self.method == "transr" else f"TransE_l{self.norm}"

    def to_dglke(self, directory: str | os.PathLike, store: "KGStore | None" = None, *, dataset: str = "kgplm") -> Path:
        """Write DGL-KE's files: ``{dataset}_{model}_entity.npy``, ``..._relation.npy``, for TransR
        ``..._projection.npy`` (R, k·d), and with ``store`` ``entities.tsv``/``relations.tsv`` (``id<TAB>IRI``)."""
        prefix = f"{dataset}_{self._dglke_model_name()}"
        with atomic_directory(directory) as temporary:
            np.save(temporary / f"{prefix}_entity.npy", self.entity_embeddings.numpy())
            np.save(temporary / f"{prefix}_relation.npy", self.relation_embeddings.numpy())
            if self.projections is not None:
                np.save(
                    temporary / f"{prefix}_projection.npy", self.projections.reshape(self.num_relations, -1).numpy()
                )
            if store is not None:
                self.check_compatible(store)
                _write_id_maps(temporary, store, ("entities.tsv", "relations.tsv"), openke=False)
        return Path(directory)

    @classmethod
    def from_dglke(
        cls, directory: str | os.PathLike, store: "KGStore | None" = None, *, norm: int | None = None
    ) -> "KGEmbeddings":
        """Read DGL-KE's ``*_entity.npy``/``*_relation.npy`` (and ``*projection.npy`` for TransR).

        The method and norm come from the file names (``TransE_l1``, ``TransE_l2``, ``TransR``).
        With ``store`` and ``entities.tsv``/``relations.tsv`` beside them, rows are reordered to
        the store's ids.
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
        return cls._imported(method, entities, relations, projections, norm, f"dglke:{directory}", store)


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


# -- triples helpers -------------------------------------------------------------------------------
def _is_labelled(triples) -> bool:
    """True for triples of strings (labels), False for id arrays and tensors."""
    if isinstance(triples, torch.Tensor):
        return False
    values = triples if isinstance(triples, np.ndarray) else np.asarray(triples, dtype=object)
    if values.dtype.kind in "iub":
        return False
    return any(isinstance(value, str) for value in values.ravel()[:1000].tolist())


def triples_to_ids(triples, store: "KGStore | None" = None) -> np.ndarray | torch.Tensor:
    """Labelled triples (rows of head, relation, tail strings) as an ``(n, 3)`` id array through
    :meth:`KGStore.triple_ids`; id triples are returned unchanged."""
    if not _is_labelled(triples):
        return triples
    if store is None:
        raise ConfigurationError("the triples hold labels (strings); pass store= to map them to the store's ids")
    return store.triple_ids(triples)


def _as_triples(triples, num_entities: int, num_relations: int) -> torch.Tensor:
    if _is_labelled(triples):
        raise ConfigurationError(
            "the triples hold labels (strings), not ids; map them with "
            "triples_to_ids(triples, store) or pass store= to evaluate()"
        )
    tensor = torch.as_tensor(
        np.array(triples, dtype=np.int64) if not isinstance(triples, torch.Tensor) else triples, dtype=torch.long
    )
    if tensor.ndim != 2 or tensor.shape[1] != 3:
        raise ConfigurationError(
            f"triples must have shape (n, 3) of (head, relation, tail) ids; got {tuple(tensor.shape)}"
        )
    if len(tensor):
        if int(tensor[:, [0, 2]].min()) < 0 or int(tensor[:, [0, 2]].max()) >= num_entities:
            raise ConfigurationError(f"triples hold entity ids outside 0..{num_entities - 1}")
        if int(tensor[:, 1].min()) < 0 or int(tensor[:, 1].max()) >= num_relations:
            raise ConfigurationError(f"triples hold relation ids outside 0..{num_relations - 1}")
    return tensor


def split_triples(
    triples: np.ndarray, *, test_fraction: float = 0.05, seed: int = 0, keep_entities_in_train: bool = True
) -> tuple[np.ndarray, np.ndarray]:
    """A seeded train/test split of ``triples`` (n, 3).

    With ``keep_entities_in_train`` a triple goes to test only if its head, tail and relation
    still occur in the remaining training triples (otherwise no embedding model could rank it),
    so the test share can come out slightly below ``test_fraction``.
    """
    if not 0.0 < test_fraction < 1.0:
        raise ConfigurationError(f"test_fraction must be in (0, 1), got {test_fraction}")
    triples = np.asarray(triples, dtype=np.int64)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(triples))
    wanted = int(round(test_fraction * len(triples)))
    if not keep_entities_in_train:
        return triples[np.sort(order[wanted:])], triples[np.sort(order[:wanted])]
    entity_counts = np.bincount(triples[:, [0, 2]].ravel(), minlength=int(triples[:, [0, 2]].max()) + 1)
    relation_counts = np.bincount(triples[:, 1])
    is_test = np.zeros(len(triples), dtype=bool)
    taken = 0
    for index in order:
        if taken == wanted:
            break
        head, relation, tail = triples[index]
        if head == tail:
            if entity_counts[head] <= 2:
                continue
        elif entity_counts[head] <= 1 or entity_counts[tail] <= 1:
            continue
        if relation_counts[relation] <= 1:
            continue
        entity_counts[head] -= 1
        entity_counts[tail] -= 1
        relation_counts[relation] -= 1
        is_test[index] = True
        taken += 1
    return triples[~is_test], triples[is_test]


def write_triples_tsv(store: "KGStore", path: str | os.PathLike, triples: np.ndarray | None = None) -> Path:
    """Write ``head<TAB>relation<TAB>tail`` with IRIs, the file PyKEEN's ``TriplesFactory.from_path`` reads."""
    triples = store.triples if triples is None else np.asarray(triples)
    relation_iris = store.relation_iris
    with atomic_file(path, "w", encoding="utf-8", newline="\n") as handle:
        for head, relation, tail in np.asarray(triples).tolist():
            handle.write(f"{store.entity_iri(head)}\t{relation_iris[relation]}\t{store.entity_iri(tail)}\n")
    return Path(path)


# -- evaluation ------------------------------------------------------------------------------------
class _AnswerIndex:
    """The known answers of (anchor, relation, ?) queries, for filtering."""

    def __init__(self, triples: np.ndarray, side: str, num_relations: int) -> None:
        anchors = triples[:, 2] if side == "head" else triples[:, 0]
        answers = triples[:, 0] if side == "head" else triples[:, 2]
        keys = anchors.astype(np.int64) * num_relations + triples[:, 1]
        order = np.argsort(keys, kind="stable")
        self.keys = keys[order]
        self.answers = answers[order].astype(np.int64)
        self.num_relations = num_relations

    def lookup(self, anchors: np.ndarray, relations: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(query_rows, answers)`` pairs: every known answer of each query."""
        keys = anchors.astype(np.int64) * self.num_relations + relations
        starts = np.searchsorted(self.keys, keys, side="left")
        ends = np.searchsorted(self.keys, keys, side="right")
        lengths = ends - starts
        rows = np.repeat(np.arange(len(keys)), lengths)
        offsets = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        return rows, self.answers[np.repeat(starts, lengths) + offsets]


def rank_triples(
    embeddings: KGEmbeddings,
    triples,
    *,
    side: Literal["head", "tail"] = "tail",
    filter_triples=None,
    batch_size: int = 256,
    progress: bool = False,
) -> np.ndarray:
    """The (filtered, realistic) rank of each triple's ``side`` among all entities; float array.

    realistic rank = (optimistic + pessimistic) / 2 with optimistic = 1 + #{strictly lower
    energy} and pessimistic = #{lower or equal energy}, counting candidates that are not
    filtered. Queries are grouped by relation so that TransR projects all entities once per relation.
    """
    if side not in ("head", "tail"):
        raise ConfigurationError(f"side must be 'head' or 'tail', got {side!r}")
    triples = _as_triples(triples, embeddings.num_entities, embeddings.num_relations).numpy()
    index = None
    if filter_triples is not None:
        index = _AnswerIndex(np.asarray(filter_triples, dtype=np.int64), side, embeddings.num_relations)
    ranks = np.empty(len(triples), dtype=np.float64)
    order = np.argsort(triples[:, 1], kind="stable")
    relation_starts = np.flatnonzero(np.r_[True, np.diff(triples[order, 1]) != 0, True])
    bar = tqdm(total=len(triples), desc=f"ranking {side}s", unit="triple", disable=not progress, leave=False)
    with torch.no_grad():
        for group_start, group_end in zip(relation_starts[:-1], relation_starts[1:]):
            group = order[group_start:group_end]
            relation = int(triples[group[0], 1])
            candidates = embeddings.projected_entities(relation)  # (E, d)
            relation_vector = embeddings.relation_embeddings[relation]  # (d,)
            for batch_start in range(0, len(group), batch_size):
                rows = group[batch_start : batch_start + batch_size]
                batch = triples[rows]
                anchors = batch[:, 2] if side == "head" else batch[:, 0]
                truths = batch[:, 0] if side == "head" else batch[:, 2]
                anchor_vectors = candidates[torch.from_numpy(anchors)]  # (b, d)
                # tail query: ‖h_r + r − t_r‖ → targets h_r + r; head query: ‖h_r − (t_r − r)‖
                targets = anchor_vectors + relation_vector if side == "tail" else anchor_vectors - relation_vector
                energies = torch.cdist(
                    targets.unsqueeze(0),
                    candidates.unsqueeze(0),
                    p=float(embeddings.norm),
                    compute_mode="donot_use_mm_for_euclid_dist",
                ).squeeze(0)  # (b, E)
                truth_energies = energies[torch.arange(len(rows)), torch.from_numpy(truths)].clone()
                if index is not None:
                    query_rows, answers = index.lookup(anchors, batch[:, 1])
                    keep = answers != truths[query_rows]
                    energies[torch.from_numpy(query_rows[keep]), torch.from_numpy(answers[keep])] = math.inf
                better = (energies < truth_energies.unsqueeze(1)).sum(dim=1)
                better_or_equal = (energies <= truth_energies.unsqueeze(1)).sum(dim=1)
                ranks[rows] = ((1 + better) + better_or_equal).double().numpy() / 2.0
                bar.update(len(rows))
    bar.close()
    return ranks


# -- training --------------------------------------------------------------------------------------
def _bernoulli_head_probabilities(triples: np.ndarray, num_relations: int) -> np.ndarray:
    """Per relation, tph / (tph + hpt): the probability of corrupting the head (Wang et al. 2014).

    tph = the relation's triples / its distinct heads, hpt = its triples / its distinct tails;
    relations without triples keep 1/2. The distinct (relation, head) and (relation, tail) pairs are
    counted on one int64 key array sorted in place (8 bytes a triple), not with a mask per relation.
    """
    triples = np.asarray(triples)
    rows_per_relation = np.bincount(triples[:, 1], minlength=num_relations)
    present = np.flatnonzero(rows_per_relation)
    distinct = []
    for column in (0, 2):
        base = int(triples[:, column].max(initial=0)) + 1
        keys = triples[:, 1].astype(np.int64)
        keys *= base
        keys += triples[:, column]
        keys.sort()  # grouped by relation, each relation's entities ascending
        first = np.ones(len(keys), dtype=bool)  # the first row of each distinct (relation, entity)
        np.not_equal(keys[1:], keys[:-1], out=first[1:])
        keys //= base  # the relation of each row, ascending
        starts = np.searchsorted(keys, present, side="left")
        ends = np.searchsorted(keys, present, side="right")
        counts = np.zeros(num_relations, dtype=np.int64)
        counts[present] = [np.count_nonzero(first[start:end]) for start, end in zip(starts, ends)]
        distinct.append(counts)
        del keys, first
    heads, tails = distinct
    probabilities = np.full(num_relations, 0.5)
    for relation in present:
        tails_per_head = int(rows_per_relation[relation]) / int(heads[relation])
        heads_per_tail = int(rows_per_relation[relation]) / int(tails[relation])
        probabilities[relation] = tails_per_head / (tails_per_head + heads_per_tail)
    return probabilities


def _training_triples(triples, num_entities: int, num_relations: int) -> np.ndarray:
    """The (n, 3) id array to train on, without a copy when it already is an integer numpy array
    (the store's int32 triples, memory-mapped or not): a batch is cast to int64 when it is drawn.
    Ids are checked with column reductions (no fancy-indexed copy)."""
    if isinstance(triples, torch.Tensor):
        triples = triples.numpy()
    if _is_labelled(triples):
        raise ConfigurationError(
            "the triples hold labels (strings), not ids; map them with triples_to_ids(triples, store)"
        )
    triples = np.asarray(triples)
    if triples.dtype.kind not in "iu":
        triples = np.asarray(triples, dtype=np.int64)
    if triples.ndim != 2 or triples.shape[1] != 3:
        raise ConfigurationError(
            f"triples must have shape (n, 3) of (head, relation, tail) ids; got {tuple(triples.shape)}"
        )
    if len(triples):
        low, high = triples.min(axis=0), triples.max(axis=0)
        if min(int(low[0]), int(low[2])) < 0 or max(int(high[0]), int(high[2])) >= num_entities:
            raise ConfigurationError(f"triples hold entity ids outside 0..{num_entities - 1}")
        if int(low[1]) < 0 or int(high[1]) >= num_relations:
            raise ConfigurationError(f"triples hold relation ids outside 0..{num_relations - 1}")
    return triples


def train_kg_embeddings(
    store: "KGStore",
    *,
    method: Literal["transe", "transr"] = "transe",
    dim: int = 100,
    relation_dim: int | None = None,
    epochs: int = 20,
    batch_size: int = 8192,
    num_negatives: int = 1,
    margin: float = 1.0,
    lr: float = 0.01,
    norm: int | None = None,
    negative_sampling: Literal["uniform", "bernoulli"] = "bernoulli",
    optimizer: Literal["sparse_adam", "adagrad", "sgd"] = "sparse_adam",
    triples: np.ndarray | None = None,
    initialize_from: KGEmbeddings | None = None,
    seed: int = 0,
    device: str | torch.device = "cpu",
    backend: Literal["auto", "numba", "torch"] = "auto",
    progress: bool = True,
) -> KGEmbeddings:
    """Train TransE or TransR embeddings of ``store`` with the margin ranking loss.

    ``triples`` restricts training to some of the store's triples (a training split); by default
    all of them. ``dim`` is the entity size k, ``relation_dim`` TransR's relation size d (default
    ``dim``). ``norm`` is the p of the distance (default 1 for TransE as in OpenKE and PyKEEN, 2 for
    TransR as in its paper). ``optimizer`` updates only the rows a batch touches: ``sparse_adam``
    (lazy Adam, as ``torch.optim.SparseAdam``), ``adagrad`` or ``sgd``. ``initialize_from`` starts
    from earlier embeddings (TransR from TransE, as Lin et al. do). Every stochastic step uses
    ``seed``. See the module docstring for the equations and the choices made.

    ``device`` holds the tables and runs the energies. ``backend`` runs the row-wise optimisers:
    ``"numba"`` (CPU kernels), ``"torch"`` (index operations on ``device``: the CUDA path, also
    selectable on CPU) or ``"auto"`` (numba on CPU, torch elsewhere). Both give the same result up to
    float rounding: negatives and batch order are drawn on the CPU from ``seed`` whatever the device,
    and the torch path does not wait on the device inside a step (the loss is read back every 20
    batches for the progress bar and once per epoch).
    """
    if method not in METHODS:
        raise ConfigurationError(f"method must be one of {METHODS}, got {method!r}")
    relation_dim = dim if relation_dim is None else relation_dim
    if method == "transe" and relation_dim != dim:
        raise ConfigurationError(f"TransE has one embedding size; got dim={dim} and relation_dim={relation_dim}")
    norm = (1 if method == "transe" else 2) if norm is None else norm
    if norm not in (1, 2):
        raise ConfigurationError(f"norm must be 1 or 2, got {norm!r}")
    for name, value in (
        ("dim", dim),
        ("relation_dim", relation_dim),
        ("epochs", epochs),
        ("batch_size", batch_size),
        ("num_negatives", num_negatives),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigurationError(f"{name} must be a positive integer, got {value!r}")
    if negative_sampling not in ("uniform", "bernoulli"):
        raise ConfigurationError(f"negative_sampling must be 'uniform' or 'bernoulli', got {negative_sampling!r}")
    if optimizer not in OPTIMIZERS:
        raise ConfigurationError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}")
    device = torch.device(device)
    if backend not in ("auto", "numba", "torch"):
        raise ConfigurationError(f"backend must be 'auto', 'numba' or 'torch', got {backend!r}")
    if backend == "auto":
        backend = "numba" if device.type == "cpu" else "torch"
    if backend == "numba" and device.type != "cpu":
        raise ConfigurationError(f"backend='numba' runs on CPU tables; device={str(device)!r} needs backend='torch'")
    # the store's int32 triples as they are (memory-mapped when the store is): an epoch holds them,
    # the tables and one batch (cast to int64 when drawn), and a permutation of the triples' indices
    train = _training_triples(store.triples if triples is None else triples, store.num_entities, store.num_relations)
    if len(train) == 0:
        store.require_links("training KG embeddings (TransE, TransR)")
        raise ConfigurationError("no training triples")
    config = {
        "method": method,
        "dim": dim,
        "relation_dim": relation_dim,
        "epochs": epochs,
        "batch_size": batch_size,
        "num_negatives": num_negatives,
        "margin": margin,
        "lr": lr,
        "norm": norm,
        "negative_sampling": negative_sampling,
        "optimizer": optimizer,
        "backend": backend,
        "seed": seed,
        "num_training_triples": int(len(train)),
        "initialized_from": None if initialize_from is None else initialize_from.config.get("method", "given"),
    }

    # before the tables exist: the statistics' sort buffer (8 bytes a triple) is freed by then
    head_probability = torch.as_tensor(
        _bernoulli_head_probabilities(train, store.num_relations)
        if negative_sampling == "bernoulli"
        else np.full(store.num_relations, 0.5),
        dtype=torch.float32,
    )

    # -- initial tables (TransE: uniform ±6/√k, entities on the unit sphere; TransR: M_r = I)
    generator = torch.Generator().manual_seed(seed)
    entity_weight = torch.empty(store.num_entities, dim).uniform_(
        -6 / math.sqrt(dim), 6 / math.sqrt(dim), generator=generator
    )
    relation_weight = torch.empty(store.num_relations, relation_dim).uniform_(
        -6 / math.sqrt(relation_dim), 6 / math.sqrt(relation_dim), generator=generator
    )
    relation_weight = F.normalize(relation_weight, dim=1)
    projection_weight = (
        _identity_projections(store.num_relations, dim, relation_dim).flatten(1) if method == "transr" else None
    )
    if initialize_from is not None:
        initialize_from.check_compatible(store)
        if initialize_from.entity_dim != dim:
            raise ConfigurationError(f"initialize_from has entity size {initialize_from.entity_dim}, not {dim}")
        entity_weight = initialize_from.entity_embeddings.clone()
        if initialize_from.relation_dim == relation_dim:
            relation_weight = initialize_from.relation_embeddings.clone()
        if projection_weight is not None and initialize_from.projections is not None:
            projection_weight = initialize_from.projections.reshape(store.num_relations, -1).clone()
    entity_constraint = _kernels.CONSTRAINT_UNIT_SPHERE if method == "transe" else _kernels.CONSTRAINT_UNIT_BALL
    relation_constraint = _kernels.CONSTRAINT_NONE if method == "transe" else _kernels.CONSTRAINT_UNIT_BALL
    use_kernels = backend == "numba"
    entities = _RowTable(
        entity_weight.to(device), optimizer=optimizer, lr=lr, constraint=entity_constraint, use_kernels=use_kernels
    )
    relations = _RowTable(
        relation_weight.to(device), optimizer=optimizer, lr=lr, constraint=relation_constraint, use_kernels=use_kernels
    )
    projections = (
        None
        if projection_weight is None
        else _RowTable(
            projection_weight.to(device),
            optimizer=optimizer,
            lr=lr,
            constraint=_kernels.CONSTRAINT_NONE,
            use_kernels=use_kernels,
        )
    )
    tables = [table for table in (entities, relations, projections) if table is not None]

    num_batches = math.ceil(len(train) / batch_size)
    history: list[dict[str, float]] = []
    bar = tqdm(total=epochs * num_batches, desc=f"{method} training", unit="batch", disable=not progress)
    started = time.perf_counter()
    for epoch in range(epochs):
        permutation = torch.randperm(len(train), generator=generator).numpy()
        epoch_loss = torch.zeros((), dtype=torch.float64, device=device)  # read back once per epoch
        for batch_index in range(num_batches):
            rows = permutation[batch_index * batch_size : (batch_index + 1) * batch_size]
            positives = torch.from_numpy(train[rows].astype(np.int64, copy=False))  # (b, 3)
            count = len(positives)
            negatives = positives.repeat_interleave(num_negatives, dim=0)  # (b·n, 3)
            corrupt_head = torch.rand(len(negatives), generator=generator) < head_probability[negatives[:, 1]]
            random_entities = torch.randint(0, store.num_entities, (len(negatives),), generator=generator)
            negatives[:, 0] = torch.where(corrupt_head, random_entities, negatives[:, 0])
            negatives[:, 2] = torch.where(corrupt_head, negatives[:, 2], random_entities)
            batch = torch.cat([positives, negatives])  # (b·(1+n), 3): positives first
            order = None
            if projections is not None:
                # TransR multiplies per relation group: sort once, undo on the energies
                order = torch.argsort(batch[:, 1], stable=True)
                batch = batch[order]
            # the batch's ids stay on the CPU: the tables gather their rows on their own device
            entity_rows, entity_index = entities.gather(torch.cat([batch[:, 0], batch[:, 2]]))
            relation_rows, relation_index = relations.gather(batch[:, 1])
            vectors = entity_rows.index_select(0, entity_index)  # (2·m, k)
            head_vectors, tail_vectors = vectors.chunk(2)  # (m, k) each
            relation_vectors = relation_rows.index_select(0, relation_index)  # (m, d)
            if projections is None:
                energies = translation_energy(head_vectors, relation_vectors, tail_vectors, norm)
            else:
                projection_rows, _ = projections.gather(batch[:, 1])  # rows of the present relations, sorted
                # the batch is sorted by relation: group sizes from the CPU ids, no device round trip
                group_sizes = torch.unique_consecutive(batch[:, 1], return_counts=True)[1].tolist()
                energies = translation_energy(
                    head_vectors,
                    relation_vectors,
                    tail_vectors,
                    norm,
                    matrices=projection_rows.view(-1, dim, relation_dim),
                    group_sizes=group_sizes,
                )
                energies = energies.index_select(0, torch.argsort(order).to(device, non_blocking=True))  # batch order
            positive_energy = energies[:count].repeat_interleave(num_negatives)  # (b·n,)
            negative_energy = energies[count:]  # (b·n,)
            loss = F.relu(margin + positive_energy - negative_energy).mean()
            loss.backward()
            for table in tables:
                table.step()
            epoch_loss += loss.detach().double() * count
            bar.update(1)
            if progress and batch_index % 20 == 0:
                bar.set_postfix(epoch=epoch + 1, loss=f"{float(loss):.4f}")
        history.append({"epoch": epoch + 1, "loss": float(epoch_loss) / len(train)})
        logger.info("%s epoch %d: mean loss %.5f", method, epoch + 1, history[-1]["loss"])
    bar.close()
    elapsed = time.perf_counter() - started
    # wall time depends on the machine and its load: logged and kept on the object, out of the saved config
    timings = {
        "training_seconds": round(elapsed, 3),
        "triples_per_second": round(epochs * len(train) / max(elapsed, 1e-9), 1),
    }
    logger.info(
        "%s trained in %.1f s (%s triples/s)",
        method,
        timings["training_seconds"],
        f"{timings['triples_per_second']:,.0f}",
    )
    for table in tables:
        table.release_optimizer_state()  # the moments are not returned: free them before the last pass
    for table in (entities, relations):
        # the saved tables satisfy the constraints, whichever rows the last batches touched
        table.apply_constraint_everywhere()
    # the tables are handed over, not copied (this function holds no other reference to them)
    return KGEmbeddings(
        method=method,
        entity_embeddings=entities.weight.cpu(),
        relation_embeddings=relations.weight.cpu(),
        projections=None if projections is None else projections.weight.cpu().view(-1, dim, relation_dim),
        norm=norm,
        config=config,
        history=history,
        store_fingerprint=store_fingerprint(store),
        timings=timings,
    )
