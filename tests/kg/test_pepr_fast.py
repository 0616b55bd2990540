"""PEPR fast mode's refinement of contested seeds: the deep push, the seeds it picks, the graph test
that turns it on, and its recall against exact PPR on a real CMeKG subgraph."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from kgplm import KGStore
from kgplm.exceptions import ConfigurationError
from kgplm.kg.pepr.fast import CLUSTERED_SHARE, PushContext, hub_tolerance, rows_to_refine, short_cycle_share
from kgplm.kg.pepr import TransitionMatrix, personalized_pagerank, top_k_neighbors
from kgplm.kg.pepr.pagerank import one_hop_candidates
from kgplm.kg.pepr.walk import choose_hubs
from tests.kg.helpers import bfs_subgraph, dense_walk, directed_walk_and_pagerank, store_from_edges


def store_from_networkx(graph: nx.Graph) -> KGStore:
    return store_from_edges([(u, 0, v) for u, v in graph.edges()], num_entities=graph.number_of_nodes())


def contested_recall(store: KGStore, table, k: int = 10) -> float:
    """Mean recall@k over seeds with more than k candidates, against exact PPR (ties count)."""
    exact = personalized_pagerank(store, table.seeds, tol=1e-13)
    values = []
    for row, seed in enumerate(table.seeds.tolist()):
        linked = np.array(sorted({n for n in store.one_hop(seed)[0].tolist() if n != seed}))
        if len(linked) <= k:
            continue
        kth = np.sort(exact[row, linked])[-k]
        values.append(np.mean(exact[row, table.neighbors[row]] >= kth * (1 - 1e-9)))
    assert values, "no contested seed"
    return float(np.mean(values))


@pytest.mark.parametrize(
    "graph, hubs",
    [
        (nx.powerlaw_cluster_graph(60, 4, 0.7, seed=1), 0),
        (nx.powerlaw_cluster_graph(60, 4, 0.7, seed=1), 3),
        (nx.complete_bipartite_graph(4, 5), 1),
    ],
)
def test_short_cycle_share_against_matrix_powers(graph, hubs: int) -> None:
    """The sparse computation equals the definition evaluated with dense matrix products."""
    store = store_from_networkx(graph)
    walk = TransitionMatrix.from_store(store)
    is_hub = np.zeros(store.num_entities, dtype=bool)
    is_hub[choose_hubs(walk, hubs)] = True
    seeds = np.flatnonzero(~is_hub)
    transition = dense_walk(store)
    inner = transition * ~is_hub[None, :]  # steps that land on a non-hub
    expected = []
    for s in seeds.tolist():
        neighbours = [v for v in np.flatnonzero(transition[s]).tolist() if not is_hub[v]]
        total = sum((inner[s] @ inner @ transition)[v] for v in neighbours)
        trivial = sum(
            transition[s, v] * ((inner @ inner)[s, s] + (inner @ inner)[v, v] - transition[v, s] * transition[s, v])
            for v in neighbours
        )
        expected.append((total - trivial) / total if total > 0 else 0.0)
    np.testing.assert_allclose(short_cycle_share(walk, seeds, is_hub), expected, atol=1e-12)


def test_short_cycle_share_is_zero_on_a_tree_and_high_on_cliques() -> None:
    tree = store_from_networkx(nx.balanced_tree(3, 4))
    walk = TransitionMatrix.from_store(tree)
    no_hubs = np.zeros(tree.num_entities, dtype=bool)
    np.testing.assert_allclose(short_cycle_share(walk, np.arange(tree.num_entities), no_hubs), 0.0, atol=1e-12)
    cliques = store_from_networkx(nx.connected_caveman_graph(5, 14))
    walk = TransitionMatrix.from_store(cliques)
    share = short_cycle_share(walk, np.arange(cliques.num_entities), np.zeros(cliques.num_entities, dtype=bool))
    assert share.min() > 0.5


def test_rows_to_refine_by_hand() -> None:
    k = 2
    # row 0: 3 candidates, 2nd and 3rd within 1 % → refine; row 1: 2 candidates (not contested);
    # row 2: 3 candidates, 2nd and 3rd 50 % apart → keep; row 3: tie at the boundary → refine
    indptr = np.array([0, 3, 5, 8, 11])
    neighbors = np.arange(11)
    scores = np.array([0.5, 0.3, 0.298, 0.9, 0.9, 0.1, 0.4, 0.2, 0.2, 0.7, 0.2])
    np.testing.assert_array_equal(rows_to_refine(indptr, neighbors, scores, k, gap=0.03), [0, 3])
    np.testing.assert_array_equal(rows_to_refine(indptr, neighbors, scores, k, gap=0.6), [0, 2, 3])
    assert len(rows_to_refine(indptr, neighbors, scores, k, gap=0.0)) == 0


def test_directed_one_step_correction_by_hand() -> None:
    """A directed walk's deep push keeps the one-step correction (the tree closure needs a reversible walk).
    At an ε so coarse that only the seed is pushed, p = α at the seed and r = (1 − α) P(s, ·), and
    C(v) = α r(v) + α(1 − α)(r P)(v) + (1 − α)² R g(v), g the directed global PageRank, computed here."""
    from pathlib import Path

    store = KGStore.from_rdf(Path(__file__).resolve().parents[2] / "graphs" / "toy_medical.ttl", show_progress=False)
    alpha, n = 0.15, store.num_entities
    transition, out_degree, pagerank = directed_walk_and_pagerank(store, alpha)
    seeds = np.array([s for s in range(n) if out_degree[s] >= 3][:5])
    walk = TransitionMatrix.from_store(store, directed=True)
    context = PushContext.build(walk, hubs=choose_hubs(walk, 0), alpha=alpha, jump="seed", max_iter=100, batch_size=8)
    indptr, neighbors, _, _ = one_hop_candidates(store, seeds)
    scores = context.push_scores(
        seeds, indptr, neighbors, epsilon=100.0, exact_steps=1, num_threads=1, show_progress=False, description="test"
    )
    for row, seed in enumerate(seeds.tolist()):
        residual = (1 - alpha) * transition[seed]
        expected = (
            alpha * residual
            + alpha * (1 - alpha) * residual @ transition
            + (1 - alpha) ** 2 * residual.sum() * pagerank
        )
        lo, hi = indptr[row], indptr[row + 1]
        np.testing.assert_allclose(scores[lo:hi], expected[neighbors[lo:hi]], rtol=1e-6)


def test_refinement_reaches_exact_as_its_push_deepens(cmekg_store: KGStore) -> None:
    """Refining every contested seed with a vanishing push threshold gives exact mode's table."""
    store = bfs_subgraph(cmekg_store, "糖尿病", 400)
    exact = top_k_neighbors(store, k=10, mode="exact", tol=1e-12, show_progress=False)
    refined = top_k_neighbors(
        store, k=10, mode="fast", num_hubs=8, refine=True, refine_rounds=[(1e-11, 1.0)], show_progress=False
    )
    contested = np.diff(one_hop_candidates(store, refined.seeds)[0]) > 10
    hub_seeds = np.isin(refined.seeds, choose_hubs(TransitionMatrix.from_store(store), 8))
    assert refined.config["refined"] and refined.config["num_refined"] == [np.count_nonzero(contested & ~hub_seeds)]
    np.testing.assert_array_equal(refined.neighbors[contested], exact.neighbors[contested])


@pytest.mark.slow
def test_refinement_lifts_contested_recall_on_a_cmekg_subgraph(cmekg_store: KGStore) -> None:
    """3,000 CMeKG entities around 糖尿病, every seed with more than 10 candidates, against exact PPR.
    Measured: the coarse push alone 0.9967, with the default refinement rounds 1.0000."""
    store = bfs_subgraph(cmekg_store, "糖尿病", 3000)
    contested = np.flatnonzero(np.diff(one_hop_candidates(store, np.arange(store.num_entities))[0]) > 10)
    coarse = top_k_neighbors(store, contested, k=10, mode="fast", refine=False, show_progress=False)
    refined = top_k_neighbors(store, contested, k=10, mode="fast", refine=True, show_progress=False)
    assert refined.config["num_refined"][0] > 0
    coarse_recall, refined_recall = contested_recall(store, coarse), contested_recall(store, refined)
    assert refined_recall >= 0.999 and refined_recall > coarse_recall, (coarse_recall, refined_recall)


def test_auto_refinement_follows_the_graph() -> None:
    """A locally tree-like graph (random 11-regular, 20,000 nodes) is not refined; cliques joined in a ring are."""
    tree_like = store_from_networkx(nx.random_regular_graph(11, 20_000, seed=0))
    table = top_k_neighbors(tree_like, k=10, mode="fast", num_hubs=4, refine="auto", show_progress=False)
    assert table.config["short_cycle_share"] < CLUSTERED_SHARE and not table.config["refined"]
    assert table.config["hub_tol"] == 1e-5  # "auto" decided not to push deeper: the coarse push's tolerance
    cliques = store_from_networkx(nx.connected_caveman_graph(12, 14))
    table = top_k_neighbors(cliques, k=10, mode="fast", num_hubs=4, refine="auto", show_progress=False)
    assert table.config["short_cycle_share"] >= CLUSTERED_SHARE and table.config["refined"]
    forced = top_k_neighbors(tree_like, np.arange(40), k=10, mode="fast", num_hubs=4, refine=True, show_progress=False)
    assert forced.config["refined"] and forced.config["short_cycle_share"] is None


def test_later_rounds_refine_only_what_earlier_rounds_left_close(cmekg_store: KGStore) -> None:
    store = bfs_subgraph(cmekg_store, "糖尿病", 400)
    table = top_k_neighbors(
        store,
        k=10,
        mode="fast",
        num_hubs=8,
        refine=True,
        refine_rounds=[(1e-4, 0.5), (1e-5, 0.01), (1e-2, 1.0)],
        show_progress=False,
    )
    first, second = table.config["num_refined"]  # the third round is not deeper than the coarse push: skipped
    assert first > second > 0
    assert table.config["refine_rounds"] == [[1e-4, 0.5], [1e-5, 0.01], [1e-2, 1.0]]
    with pytest.raises(ConfigurationError, match="refine_rounds"):
        top_k_neighbors(store, mode="fast", refine_rounds=[(0.0, 0.1)], show_progress=False)


def test_default_fast_mode_ranks_a_umls_shaped_graph_without_deep_pushes(tmp_path) -> None:
    """Issue 30.3: the UMLS-shaped graph (benchmarks/synthetic_umls.py) is locally tree-like (short-cycle
    share ≈ 0.004), so the default ``refine="auto"`` skips the deep pushes, and the coarse push with the
    tree closure ranks its contested seeds at recall ≥ 0.99 against exact PEPR (power iteration to 1e-10,
    tested against networkx in test_pepr.py). The stepwise closure it replaced ranked them at 0.985 here
    (0.977 at 115k concepts), which is why the default had been to refine."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import synthetic_umls

    synthetic_umls.write_synthetic_umls(tmp_path / "rrf", 3000, seed=0, chunk_size=2000)
    store = KGStore.from_umls_rrf(tmp_path / "rrf", show_progress=False)
    indptr, neighbors, _, _ = one_hop_candidates(store, np.arange(store.num_entities))
    sample = np.flatnonzero(np.diff(indptr) > 10)[:300]
    exact = personalized_pagerank(store, sample, tol=1e-10)
    table = top_k_neighbors(store, sample, k=10, mode="fast", show_progress=False)
    recalls = []
    for row, seed in enumerate(sample.tolist()):
        kth = np.sort(exact[row, neighbors[indptr[seed] : indptr[seed + 1]]])[-10]
        chosen = table.neighbors[row][table.neighbors[row] >= 0]
        recalls.append(np.mean(exact[row, chosen] >= kth * (1 - 1e-6)))
    assert len(sample) == 300
    assert table.config["short_cycle_share"] < CLUSTERED_SHARE and not table.config["refined"]
    assert table.config["hub_tol"] == 1e-5  # "auto" decided not to push deeper: the coarse push's tolerance
    assert np.mean(recalls) >= 0.99, np.mean(recalls)


def test_hub_iteration_stops_at_a_thousandth_of_the_finest_push(monkeypatch) -> None:
    """The hubs' vectors are iterated to an L1 change of ε / 1000, within [1e-6, 1e-5]: 1e-5 for the coarse
    push alone, 5e-6 when contested seeds are pushed to 5e-3, 1e-6 when they are pushed to 2e-6 (the
    default rounds); the tolerance is recorded in the config."""
    import kgplm.kg.pepr.fast as fast

    assert hub_tolerance(1e-2) == 1e-5 and hub_tolerance(100.0) == 1e-5
    assert hub_tolerance(5e-3) == pytest.approx(5e-6, rel=1e-12)
    assert hub_tolerance(1e-3) == 1e-6 and hub_tolerance(5e-6) == 1e-6 and hub_tolerance(1e-9) == 1e-6
    tolerances = []
    vectors = fast.exact_vectors

    def recording_vectors(*args, tol, **kwargs):
        tolerances.append(tol)
        return vectors(*args, tol=tol, **kwargs)

    monkeypatch.setattr(fast, "exact_vectors", recording_vectors)
    store = store_from_networkx(nx.powerlaw_cluster_graph(200, 6, 0.5, seed=4))
    coarse = top_k_neighbors(store, k=10, mode="fast", num_hubs=4, refine=False, show_progress=False)
    deep = top_k_neighbors(
        store, k=10, mode="fast", num_hubs=4, refine=True, refine_rounds=[(5e-3, 1.0)], show_progress=False
    )
    deeper = top_k_neighbors(store, k=10, mode="fast", num_hubs=4, refine=True, show_progress=False)
    assert tolerances == [1e-5, pytest.approx(5e-6, rel=1e-12), 1e-6]
    assert [table.config["hub_tol"] for table in (coarse, deep, deeper)] == tolerances
    assert deep.config["num_refined"][0] > 0 and deeper.config["num_refined"][0] > 0


@pytest.mark.parametrize(
    ("budget", "num_hubs", "widths"), [(None, 4, [8]), (1, 4, [1, 1, 1, 1, 1]), (2 * 4 * 81 * 9, 12, [8, 8])]
)
def test_hub_vectors_and_global_pagerank_are_exact_whatever_the_block_width(
    monkeypatch, budget, num_hubs, widths
) -> None:
    """The hubs' seed-jump PPR vectors and the global PageRank (one more column of the same iteration)
    against networkx: in one block (default budget; 5 columns padded to 8), one column per block (a budget
    of 1 byte), and two blocks of 7 and 6 columns each padded to 8 (a budget of 9 columns, 8 once aligned:
    how a 4M-entity graph is split, issue 30.3)."""
    import kgplm.kg.pepr.fast as fast
    import kgplm.kg.pepr.kernels as kernels

    if budget is not None:
        monkeypatch.setattr(fast, "HUB_BLOCK_BYTES", budget)
    blocks = []  # (columns, the block's two arrays), once per block
    step = kernels.pagerank_step_float32

    def recording_step(indptr, indices, values, x, damping, base, jump_rows, jump_mass, out, change_parts):
        if not any(x is a or x is b for _, a, b in blocks):  # a block's first step
            blocks.append((x.shape[1], x, out))
        return step(indptr, indices, values, x, damping, base, jump_rows, jump_mass, out, change_parts)

    monkeypatch.setattr(kernels, "pagerank_step_float32", recording_step)
    graph = nx.powerlaw_cluster_graph(80, 3, 0.5, seed=2)
    graph.add_node(80)  # an isolated entity: dangling, its walk restarts at the jump vector
    store = store_from_networkx(graph)
    walk = TransitionMatrix.from_store(store)
    context = PushContext.build(
        walk, hubs=choose_hubs(walk, num_hubs), alpha=0.15, jump="paper", max_iter=1000, batch_size=256
    )
    assert [width for width, _, _ in blocks] == widths
    assert context.hub_vectors.shape == (81, num_hubs)
    assert context.hub_vectors.dtype == np.float32
    for hub, slot in zip(np.flatnonzero(context.is_hub).tolist(), context.hub_slot[context.is_hub].tolist()):
        expected = nx.pagerank(
            graph, alpha=0.85, personalization={hub: 1.0}, dangling={hub: 1.0}, tol=1e-13, max_iter=1000
        )
        np.testing.assert_allclose(context.hub_vectors[:, slot], [expected[v] for v in range(81)], atol=1e-6)
    expected = nx.pagerank(graph, alpha=0.85, tol=1e-13, max_iter=1000)
    np.testing.assert_allclose(context.global_scores, [expected[v] for v in range(81)], atol=1e-6)
