"""PEPR fast mode's tree closure (issue 30.3, 30.8): the cavity recursion and the residual's visits along
tree paths, against dense linear algebra written here (independent of the kernels)."""

from __future__ import annotations

import networkx as nx
import numba
import numpy as np
import pytest

from kgplm.kg.pepr.fast import tree_closure
from kgplm.kg.pepr.tree_kernels import reverse_edges, tree_cavities
from kgplm.kg.pepr import TransitionMatrix, personalized_pagerank, top_k_neighbors
from tests.kg.helpers import dense_walk, store_from_edges

ALPHA = 0.15


def weighted_tree(size: int, seed: int, doubled: float = 0.3):
    """A random tree whose edges carry one or (with probability ``doubled``) two triples, so the walk has
    weights 1 and 2; returns the store and the edge list."""
    rng = np.random.default_rng(seed)
    edges = []
    for child in range(1, size):
        parent = int(rng.integers(0, child))
        edges.append((parent, 0, child))
        if rng.random() < doubled:
            edges.append((child, 1, parent))  # a second relation between the same pair: weight 2
    return store_from_edges(edges, num_entities=size), edges


def green(transition: np.ndarray, removed: int | None = None) -> np.ndarray:
    """G = Σ_t ((1 − α) P)^t, optionally with one node removed (its row and column deleted)."""
    keep = np.arange(len(transition)) if removed is None else np.delete(np.arange(len(transition)), removed)
    block = transition[np.ix_(keep, keep)]
    return np.linalg.inv(np.eye(len(keep)) - (1 - ALPHA) * block), keep


def cavities(store):
    walk = TransitionMatrix.from_store(store)
    reverse = reverse_edges(walk.push_indptr, walk.push_indices)
    cavity, diagonal, sweeps = tree_cavities(
        walk.push_indptr, walk.push_indices, walk.push_values, reverse, ALPHA, 1e-14, 500
    )
    return walk, reverse, cavity, diagonal, sweeps


def test_reverse_edges_point_at_the_reverse_entry() -> None:
    store, _ = weighted_tree(40, seed=3)
    walk = TransitionMatrix.from_store(store)
    reverse = reverse_edges(walk.push_indptr, walk.push_indices)
    rows = np.repeat(np.arange(walk.num_nodes), np.diff(walk.push_indptr))
    np.testing.assert_array_equal(rows[reverse], walk.push_indices)
    np.testing.assert_array_equal(walk.push_indices[reverse], rows)


@pytest.mark.parametrize("seed", [0, 1])
def test_cavities_are_the_exact_green_function_on_a_tree(seed: int) -> None:
    """On a tree the recursion's fixed point is exact: G_uu from the dense inverse, and the cavity
    g_{b∖a} = G^{(−a)}_bb, b's discounted returns with a removed (an inverse of the matrix without a)."""
    store, _ = weighted_tree(60, seed)
    transition = dense_walk(store)
    walk, _, cavity, diagonal, _ = cavities(store)
    full, _ = green(transition)
    np.testing.assert_allclose(diagonal, np.diag(full), rtol=1e-10)
    rows = np.repeat(np.arange(walk.num_nodes), np.diff(walk.push_indptr))
    for a in range(walk.num_nodes):
        without, keep = green(transition, removed=a)
        position = {int(node): i for i, node in enumerate(keep)}
        for e in np.flatnonzero(rows == a):
            b = int(walk.push_indices[e])
            assert cavity[e] == pytest.approx(without[position[b], position[b]], rel=1e-10)


def test_cavities_on_a_loopy_graph_are_a_fixed_point_and_do_not_depend_on_threads() -> None:
    """On a graph with cycles the recursion is Gaussian belief propagation (convergent: the system is
    diagonally dominant); its result is the recursion's fixed point, identical with 1 and 2 threads."""
    graph = nx.powerlaw_cluster_graph(300, 3, 0.4, seed=2)
    store = store_from_edges([(u, 0, v) for u, v in graph.edges()], num_entities=graph.number_of_nodes())
    previous = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        walk, reverse, one_thread, diagonal, sweeps = cavities(store)
        numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
        _, _, two_threads, _, _ = cavities(store)
    finally:
        numba.set_num_threads(previous)
    np.testing.assert_array_equal(one_thread, two_threads)
    assert 1 < sweeps < 500
    values = walk.push_values
    rows = np.repeat(np.arange(walk.num_nodes), np.diff(walk.push_indptr))
    returns = np.bincount(rows, weights=values * values[reverse] * one_thread, minlength=walk.num_nodes)
    beta = (1 - ALPHA) ** 2
    expected = 1 / (1 - beta * (returns[walk.push_indices] - values[reverse] * values * one_thread[reverse]))
    np.testing.assert_allclose(one_thread, expected, rtol=1e-12)
    np.testing.assert_allclose(diagonal, 1 / (1 - beta * returns), rtol=1e-12)
    assert one_thread.min() >= 1 and one_thread.max() < 1 / ALPHA


def _tree_seeds(store, walk, spread_keys: int):
    """Seeds with at least three neighbours, and per seed whether the closure pulls A at its candidates'
    neighbours, by the kernel's rule written out here: with only the seed pushed (no hubs) the residual is
    on its neighbours N(s), a spread keeps |N(s)| + Σ_{u ∈ N(s)} deg(u) keys and a pull reads
    Σ_{v ∈ N(s)} Σ_{x ∈ N(v)} deg(x) walk entries; it spreads when the keys are no more than those entries
    and no more than max(``spread_keys``, Σ_{v ∈ N(s)} deg(v))."""
    degree = np.diff(walk.push_indptr)

    def neighbours(node):
        return walk.push_indices[walk.push_indptr[node] : walk.push_indptr[node + 1]]

    chosen, pulled = [], []
    for s in range(walk.num_nodes):
        if len(neighbours(s)) < 3:
            continue
        keys = len(neighbours(s)) + degree[neighbours(s)].sum()
        pull_entries = sum(degree[neighbours(v)].sum() for v in neighbours(s))
        chosen.append(s)
        pulled.append(not (keys <= pull_entries and keys <= max(spread_keys, degree[neighbours(s)].sum())))
    return np.array(chosen), np.array(pulled)


def star_with_a_tail():
    """Seed 0 with ten leaves, one of which has a leaf of its own."""
    edges = [(0, 0, leaf) for leaf in range(1, 11)] + [(1, 0, 11), (11, 1, 1)]
    return store_from_edges(edges, num_entities=12), edges


TREES = {"random": lambda: weighted_tree(80, 4), "star": star_with_a_tail}


@pytest.mark.parametrize("spread_keys", [None, 0], ids=["spread", "pull"])
@pytest.mark.parametrize("shape", sorted(TREES))
def test_coarse_closure_is_the_exact_residual_visits_on_a_tree(monkeypatch, shape: str, spread_keys) -> None:
    """At an ε so coarse that only the seed is pushed, p = α at the seed and r = (1 − α) P(s, ·), all within
    distance 2 of every candidate; on a tree the closure's visits are then exactly Σ_u r_u G(u, v), so

        score(v) = α Σ_u r_u G(u, v) + (1 − α)³ R deg(v) / Σ deg          (no hubs, the seed's jump)

    with G the dense inverse. Both ways of gathering A are checked: spread from the residual (the default
    on these seeds) and pulled at the candidates' neighbours (forced by a spread limit of 0 keys)."""
    import kgplm.kg.pepr.fast as fast

    if spread_keys is not None:
        monkeypatch.setattr(fast, "SPREAD_KEYS", spread_keys)
    store, _ = TREES[shape]()
    walk = TransitionMatrix.from_store(store)
    transition = dense_walk(store)
    full, _ = green(transition)
    degree = walk.degree
    seeds, pulled = _tree_seeds(store, walk, fast.SPREAD_KEYS)
    assert pulled.all() if spread_keys == 0 else not pulled.any()
    table = top_k_neighbors(
        store,
        seeds,
        k=store.num_entities,
        mode="fast",
        jump="seed",
        num_hubs=0,
        epsilon=100.0,
        refine=False,
        show_progress=False,
    )
    for row, s in enumerate(seeds.tolist()):
        residual = (1 - ALPHA) * transition[s]
        expected = ALPHA * residual @ full + (1 - ALPHA) ** 3 * residual.sum() * degree / degree.sum()
        chosen = table.neighbors[row] >= 0
        neighbours = table.neighbors[row][chosen]
        np.testing.assert_allclose(table.scores[row][chosen], expected[neighbours], rtol=1e-6)


def test_the_coarse_push_ranks_a_tree_of_depth_three_as_exact_ppr_does() -> None:
    """Seed 0 with 12 candidates; candidate i has 2 + i // 4 children, each with i % 4 grandchildren. The
    candidates' PPR order follows their returns, which the grandchildren change at equal degree (so the
    degree order, all the mixing term knows, is not the answer); the coarse push with the closure gives
    exact PPR's order. A separate chain of 20,000 entities makes the mixing term (∝ deg(v) / Σ deg) as
    small as on a real graph; on a tree of 60 entities it would outweigh the returns."""
    edges, node = [], 13
    for candidate in range(1, 13):
        edges.append((0, 0, candidate))
        for _ in range(2 + (candidate - 1) // 4):
            child, node = node, node + 1
            edges.append((candidate, 0, child))
            for _ in range((candidate - 1) % 4):
                edges.append((child, 0, node))
                node += 1
    edges += [(chain, 0, chain + 1) for chain in range(node, node + 20_000)]
    store = store_from_edges(edges, num_entities=node + 20_001)
    exact = personalized_pagerank(store, [0], jump="seed", tol=1e-14)[0]
    exact_order = (np.argsort(-exact[1:13], kind="stable") + 1).tolist()
    degree_order = sorted(range(1, 13), key=lambda c: (-(2 + (c - 1) // 4), c))
    assert exact_order != degree_order
    table = top_k_neighbors(
        store, [0], k=12, mode="fast", jump="seed", num_hubs=0, epsilon=100.0, refine=False, show_progress=False
    )
    assert table.neighbors[0].tolist() == exact_order


def test_tree_closure_factors_are_zero_through_hubs() -> None:
    store, _ = weighted_tree(50, seed=6)
    walk = TransitionMatrix.from_store(store)
    is_hub = np.zeros(walk.num_nodes, dtype=bool)
    is_hub[np.argsort(-walk.degree)[:3]] = True
    outgoing, incoming, diagonal = tree_closure(walk, ALPHA, is_hub)
    _, reverse, cavity, _, _ = cavities(store)
    into_hub = is_hub[walk.push_indices]
    assert np.all(outgoing[into_hub] == 0) and np.all(incoming[into_hub] == 0)
    np.testing.assert_allclose(outgoing[~into_hub], ((1 - ALPHA) * walk.push_values * cavity)[~into_hub])
    np.testing.assert_allclose(
        incoming[~into_hub], ((1 - ALPHA) * walk.push_values[reverse] * cavity[reverse])[~into_hub]
    )


def _closure_context(graph, num_entities: int):
    """The store of ``graph``, its walk, a push context without hubs (the seed's jump) and the closure's
    step factors f(a→b) as a dense matrix."""
    from kgplm.kg.pepr.fast import PushContext
    from kgplm.kg.pepr.walk import choose_hubs

    store = store_from_edges([(u, 0, v) for u, v in graph.edges()], num_entities=num_entities)
    walk = TransitionMatrix.from_store(store)
    context = PushContext.build(walk, hubs=choose_hubs(walk, 0), alpha=ALPHA, jump="seed", max_iter=1000, batch_size=8)
    step = np.zeros((num_entities, num_entities))  # f(a→b)
    for a in range(num_entities):
        for e in range(walk.push_indptr[a], walk.push_indptr[a + 1]):
            step[a, walk.push_indices[e]] = context.outgoing[e]
    return store, walk, context, step


def _formula_through(v: int, visits: np.ndarray, step: np.ndarray) -> tuple[float, np.ndarray]:
    """Σ_{x ∈ N(v)} f(x→v) (A(x) − r_v G_vv f(v→x)), A = visits + visits @ f, and v's linked entities."""
    arriving = visits + visits @ step
    linked = np.flatnonzero(step[v])
    return sum(step[x, v] * (arriving[x] - visits[v] * step[v, x]) for x in linked), linked


@pytest.mark.parametrize("spread_keys", [None, 0], ids=["spread", "pull"])
def test_closure_gathers_the_visits_of_the_formula_on_a_graph_with_triangles(monkeypatch, spread_keys) -> None:
    """On a graph with short cycles the closure is not exact PPR, but each branch must still compute its
    formula: with only the seed pushed (r = (1 − α) P(s, ·)), no hubs and the seed's jump,

        score(v) = α T(v) + (1 − α)³ R deg(v) / Σ deg
        T(v) = r_v G_vv + Σ_{x ∈ N(v)} f(x→v) (A(x) − r_v G_vv f(v→x)),  A(x) = r_x G_xx + Σ_u r_u G_uu f(u→x)

    written here with dense arrays from the walk's step factors and diagonal. Triangles put residual on
    the middle entity x itself (r_x ≠ 0), which a tree never does."""
    import kgplm.kg.pepr.fast as fast
    from kgplm.kg.pepr.pagerank import one_hop_candidates

    if spread_keys is not None:
        monkeypatch.setattr(fast, "SPREAD_KEYS", spread_keys)
    store, walk, context, step = _closure_context(nx.powerlaw_cluster_graph(40, 3, 0.8, seed=5), 40)
    transition = dense_walk(store)
    seeds = np.arange(40)
    indptr, neighbors, _, _ = one_hop_candidates(store, seeds)
    scores = context.push_scores(
        seeds, indptr, neighbors, epsilon=100.0, exact_steps=1, num_threads=1, show_progress=False, description="test"
    )
    degree = walk.degree
    triangles = 0
    for s in range(40):
        residual = (1 - ALPHA) * transition[s]
        visits = residual * context.diagonal
        lo, hi = indptr[s], indptr[s + 1]
        for k in range(lo, hi):
            v = neighbors[k]
            through, linked = _formula_through(v, visits, step)
            triangles += int(np.count_nonzero(visits[linked]))
            expected = ALPHA * (visits[v] + through) + (1 - ALPHA) ** 3 * residual.sum() * degree[v] / degree.sum()
            np.testing.assert_allclose(scores[k], expected, rtol=1e-6)
    assert triangles > 0  # some middle entity carries residual of its own


@pytest.mark.parametrize("spread_keys", [None, 0], ids=["spread", "pull"])
def test_closure_after_a_deeper_push_gathers_the_visits_of_the_formula(monkeypatch, spread_keys) -> None:
    """With ε small enough that the push empties some candidates (r_v = 0 after pushing v), the closure
    must still add what the residual around them sends: for the push's own estimate p and residual r (no
    hubs, the seed's jump)

        score(v) = p(v) + α T(v) + (1 − α)³ R deg(v) / Σ deg

    with T and A as in the test above, written densely. An emptied candidate reads A only at the middle
    entities its row shares with the residual's support (its own visits are 0)."""
    import kgplm.kg.pepr.fast as fast
    from kgplm.kg.pepr.kernels import push_buffers, push_one
    from kgplm.kg.pepr.pagerank import one_hop_candidates

    if spread_keys is not None:
        monkeypatch.setattr(fast, "SPREAD_KEYS", spread_keys)
    store, walk, context, step = _closure_context(nx.powerlaw_cluster_graph(60, 2, 0.5, seed=3), 60)
    seeds = np.arange(60)
    indptr, neighbors, _, _ = one_hop_candidates(store, seeds)
    epsilon = 0.02
    scores = context.push_scores(
        seeds, indptr, neighbors, epsilon=epsilon, exact_steps=1, num_threads=1, show_progress=False, description="test"
    )
    estimate, residual, queued, touched, queue, _ = push_buffers(60, 0)
    degree = walk.degree
    emptied_with_visits = 0
    for s in range(60):
        estimate[:] = 0.0
        residual[:] = 0.0
        queued[:] = False
        push_one(
            s,
            ALPHA,
            epsilon,
            walk.push_indptr,
            walk.push_indices,
            walk.push_values,
            degree,
            np.zeros(60, dtype=np.bool_),
            estimate,
            residual,
            queued,
            touched,
            queue,
        )
        visits = residual * context.diagonal
        for k in range(indptr[s], indptr[s + 1]):
            v = neighbors[k]
            through, _ = _formula_through(v, visits, step)
            if residual[v] == 0.0 and through > 0.0:
                emptied_with_visits += 1
            expected = (
                estimate[v]
                + ALPHA * (visits[v] + through)
                + (1 - ALPHA) ** 3 * residual.sum() * degree[v] / degree.sum()
            )
            np.testing.assert_allclose(scores[k], expected, rtol=1e-6)
    assert emptied_with_visits > 0  # the push emptied candidates whose neighbours hold residual
