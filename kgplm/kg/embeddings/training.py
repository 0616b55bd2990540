"""Training TransE and TransR with the margin ranking loss (:func:`train_kg_embeddings`).

The energies and constraints are in :mod:`kgplm.kg.embeddings.models`. Training minimises

    L = Σ_{(h,r,t)} Σ_{(h',r,t')} [γ + d(h, r, t) − d(h', r, t')]_+

over minibatches of the training triples (Bordes et al., NeurIPS 2013, Algorithm 1). Negatives
corrupt the head or the tail with a uniformly drawn entity; the side is chosen with probability 1/2
("uniform") or, per relation, with probability tph/(tph + hpt) of replacing the head ("bernoulli",
Wang et al., AAAI 2014, "Knowledge Graph Embedding by Translating on Hyperplanes", used by the
TransR paper). Negatives are not filtered against known triples (as in both papers).

Choices and deviations, each stated here so that nobody has to read the code to find them:

* The loss is the *mean* of the hinge terms over the batch instead of the sum: it only rescales
  the learning rate and keeps one learning rate usable across batch sizes.
* TransE's entity vectors are renormalised to ‖e‖₂ = 1 when a batch gathers them (Algorithm 1,
  line 5); TransR's entity and relation rows used by a batch are projected back into the unit ball
  (hard constraint). After the last epoch every row is projected, so the returned tables satisfy
  the constraints whichever rows the last batches touched.
* All parameters are row-wise trained tables (:mod:`kgplm.kg.embeddings.optimizers`): an
  optimiser step touches only the rows a batch uses.
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
"""

from __future__ import annotations

import logging
import math
import time
from typing import TYPE_CHECKING, Literal

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from kgplm._deprecation import renamed_keywords
from kgplm.exceptions import ConfigurationError
from kgplm.kg.embeddings import kernels
from kgplm.kg.embeddings.models import (
    METHODS,
    KGEmbeddings,
    identity_projections,
    store_fingerprint,
    translation_energy,
)
from kgplm.kg.embeddings.optimizers import OPTIMIZERS, RowTable
from kgplm.kg.embeddings.triples import is_labelled

if TYPE_CHECKING:  # pragma: no cover
    from kgplm.kg.store import KGStore

__all__ = ["train_kg_embeddings", "bernoulli_head_probabilities"]

logger = logging.getLogger(__name__)


def bernoulli_head_probabilities(triples: np.ndarray, num_relations: int) -> np.ndarray:
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
    if is_labelled(triples):
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


@renamed_keywords({"lr": "learning_rate"})
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
    learning_rate: float = 0.01,
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
    (lazy Adam, as ``torch.optim.SparseAdam``), ``adagrad`` or ``sgd``, each with step size
    ``learning_rate`` (the saved ``config`` records it as ``"lr"``; the keyword ``lr`` is a
    deprecated alias that warns). ``initialize_from`` starts from earlier embeddings (TransR from
    TransE, as Lin et al. do). Every stochastic step uses ``seed``. See the module docstrings of
    :mod:`kgplm.kg.embeddings.models` and :mod:`kgplm.kg.embeddings.training` for the equations and the
    choices made.

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
        "lr": learning_rate,  # the saved config keeps its key: files written before and after read alike
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
        bernoulli_head_probabilities(train, store.num_relations)
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
        identity_projections(store.num_relations, dim, relation_dim).flatten(1) if method == "transr" else None
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
    entity_constraint = kernels.CONSTRAINT_UNIT_SPHERE if method == "transe" else kernels.CONSTRAINT_UNIT_BALL
    relation_constraint = kernels.CONSTRAINT_NONE if method == "transe" else kernels.CONSTRAINT_UNIT_BALL
    use_kernels = backend == "numba"
    entities = RowTable(
        entity_weight.to(device),
        optimizer=optimizer,
        learning_rate=learning_rate,
        constraint=entity_constraint,
        use_kernels=use_kernels,
    )
    relations = RowTable(
        relation_weight.to(device),
        optimizer=optimizer,
        learning_rate=learning_rate,
        constraint=relation_constraint,
        use_kernels=use_kernels,
    )
    projections = (
        None
        if projection_weight is None
        else RowTable(
            projection_weight.to(device),
            optimizer=optimizer,
            learning_rate=learning_rate,
            constraint=kernels.CONSTRAINT_NONE,
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
