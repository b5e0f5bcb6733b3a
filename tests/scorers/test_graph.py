"""GraphScorer (hop distance) and PageRankScorer on hand-computed graphs."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from numpy.typing import NDArray

from weftsearch import (
    RRF,
    BM25Scorer,
    Document,
    GraphScorer,
    Index,
    PageRankScorer,
    Query,
    Snapshot,
    Stream,
)
from weftsearch.errors import InvalidParameterError


class FixedScorer:
    """A seed scorer that returns the given keys in order, whatever the query."""

    name = "fixed"

    def __init__(self, keys: Sequence[str]) -> None:
        self.keys = list(keys)
        self.calls: list[int] = []

    def score(self, snapshot: Snapshot, query: Query, k: int) -> Stream:
        self.calls.append(k)
        ids = snapshot.ids_of(self.keys)
        ids = ids[ids >= 0]
        return Stream(ids, np.arange(len(ids), 0, -1, dtype=np.float64))


def graph_index(edges: dict[str, tuple[str, ...]]) -> Index:
    index = Index(analyzer="simple")
    index.add_many(Document(key, f"text of {key}", links=links) for key, links in edges.items())
    return index


# a - b - c - d - e (links point rightwards), f isolated.
CHAIN = {"a": ("b",), "b": ("c",), "c": ("d",), "d": ("e",), "e": (), "f": ()}


def run(
    scorer: GraphScorer | PageRankScorer, snapshot: Snapshot, seeds: Sequence[str], k: int = 100
) -> dict[str, float]:
    stream = scorer.score(snapshot, Query(seeds=tuple(seeds)), k)
    keys = snapshot.keys_of(stream.ids)
    assert len(set(keys)) == len(keys)
    return dict(zip(keys, stream.scores.tolist(), strict=True))


def ordered(scorer: GraphScorer | PageRankScorer, snapshot: Snapshot, seeds: Sequence[str]) -> list[str]:
    return snapshot.keys_of(scorer.score(snapshot, Query(seeds=tuple(seeds)), 100).ids)


# ---------------------------------------------------------------- hop scores


def test_single_seed_hop_scores() -> None:
    snapshot = graph_index(CHAIN).snapshot()
    assert run(GraphScorer(), snapshot, ["a"]) == {"b": 1 / 2, "c": 1 / 3, "d": 1 / 4}


def test_middle_seed_reaches_both_ways_undirected() -> None:
    snapshot = graph_index(CHAIN).snapshot()
    assert run(GraphScorer(), snapshot, ["c"]) == {"b": 1 / 2, "d": 1 / 2, "a": 1 / 3, "e": 1 / 3}


def test_scores_sum_over_seeds() -> None:
    snapshot = graph_index(CHAIN).snapshot()
    got = run(GraphScorer(), snapshot, ["a", "e"])
    # b: 1 hop from a, 3 from e; c: 2 and 2; d: 3 and 1.
    assert got == pytest.approx({"b": 1 / 2 + 1 / 4, "c": 1 / 3 + 1 / 3, "d": 1 / 4 + 1 / 2}, abs=1e-15)
    # b and d tie; the key breaks the tie.
    assert ordered(GraphScorer(), snapshot, ["a", "e"]) == ["b", "d", "c"]


def test_max_depth_cut_off() -> None:
    snapshot = graph_index(CHAIN).snapshot()
    assert run(GraphScorer(max_depth=1), snapshot, ["a"]) == {"b": 1 / 2}
    assert run(GraphScorer(max_depth=2), snapshot, ["a"]) == {"b": 1 / 2, "c": 1 / 3}
    assert run(GraphScorer(max_depth=4), snapshot, ["a"]) == {"b": 1 / 2, "c": 1 / 3, "d": 1 / 4, "e": 1 / 5}
    assert run(GraphScorer(max_depth=50), snapshot, ["a"]) == {"b": 1 / 2, "c": 1 / 3, "d": 1 / 4, "e": 1 / 5}


def test_directed_follows_links_forward_only() -> None:
    snapshot = graph_index({"a": ("b",), "b": (), "c": ("a",)}).snapshot()
    assert run(GraphScorer(directed=True), snapshot, ["a"]) == {"b": 1 / 2}
    assert run(GraphScorer(directed=False), snapshot, ["a"]) == {"b": 1 / 2, "c": 1 / 2}
    chain = graph_index(CHAIN).snapshot()
    assert run(GraphScorer(directed=True), chain, ["c"]) == {"d": 1 / 2, "e": 1 / 3}


def test_seeds_excluded_by_default_and_kept_on_request() -> None:
    snapshot = graph_index(CHAIN).snapshot()
    assert "a" not in run(GraphScorer(), snapshot, ["a"])
    kept = run(GraphScorer(keep_seeds=True), snapshot, ["a"])
    assert kept == {"a": 1.0, "b": 1 / 2, "c": 1 / 3, "d": 1 / 4}
    assert ordered(GraphScorer(keep_seeds=True), snapshot, ["a"])[0] == "a"


def test_kept_seed_also_scores_from_other_seeds() -> None:
    snapshot = graph_index(CHAIN).snapshot()
    kept = run(GraphScorer(max_depth=4, keep_seeds=True), snapshot, ["a", "e"])
    assert kept["a"] == pytest.approx(1 + 1 / 5, abs=1e-15)
    assert kept["e"] == pytest.approx(1 + 1 / 5, abs=1e-15)
    assert set(run(GraphScorer(max_depth=4), snapshot, ["a", "e"])) == {"b", "c", "d"}


def test_cycles_do_not_loop_or_double_count() -> None:
    triangle = graph_index({"a": ("b",), "b": ("c",), "c": ("a",)}).snapshot()
    directed = run(GraphScorer(max_depth=10, keep_seeds=True, directed=True), triangle, ["a"])
    assert directed == {"a": 1.0, "b": 1 / 2, "c": 1 / 3}
    undirected = run(GraphScorer(max_depth=10, keep_seeds=True), triangle, ["a"])
    assert undirected == {"a": 1.0, "b": 1 / 2, "c": 1 / 2}
    # Two paths to c (direct, and through b): only the shortest counts.
    shortcut = graph_index({"a": ("b", "c"), "b": ("c",), "c": ()}).snapshot()
    assert run(GraphScorer(directed=True), shortcut, ["a"]) == {"b": 1 / 2, "c": 1 / 2}


def test_repeated_and_self_links_count_once() -> None:
    snapshot = graph_index({"a": ("b", "b", "a"), "b": ("a",)}).snapshot()
    assert snapshot.links().nnz == 2
    assert run(GraphScorer(keep_seeds=True), snapshot, ["a"]) == {"a": 1.0, "b": 1 / 2}


def test_duplicate_seeds_count_once() -> None:
    snapshot = graph_index(CHAIN).snapshot()
    assert run(GraphScorer(), snapshot, ["a", "a"]) == {"b": 1 / 2, "c": 1 / 3, "d": 1 / 4}


def test_dangling_links_are_ignored() -> None:
    index = graph_index({"a": ("ghost", "b", "phantom"), "b": (), "c": ("ghost",)})
    snapshot = index.snapshot()
    assert snapshot.links().nnz == 1
    assert run(GraphScorer(), snapshot, ["a"]) == {"b": 1 / 2}
    # c only links to a missing key: isolated, not connected to a through "ghost".
    assert run(GraphScorer(), snapshot, ["c"]) == {}


def test_forward_links_resolve_once_the_target_arrives() -> None:
    index = graph_index({"a": ("z",), "b": ("a",)})
    before = index.snapshot()
    assert run(GraphScorer(), before, ["a"]) == {"b": 1 / 2}
    index.add(Document("z", "late arrival", links=("y",)))
    after = index.snapshot()
    assert run(GraphScorer(), after, ["a"]) == {"b": 1 / 2, "z": 1 / 2}
    index.add(Document("y", "later still"))
    assert run(GraphScorer(), index.snapshot(), ["a"]) == {"b": 1 / 2, "z": 1 / 2, "y": 1 / 3}
    # The earlier snapshot is unchanged, and a delete unresolves the link again.
    assert run(GraphScorer(), before, ["a"]) == {"b": 1 / 2}
    index.delete("z")
    assert run(GraphScorer(), index.snapshot(), ["a"]) == {"b": 1 / 2}


def test_seed_scorer_supplies_seeds() -> None:
    snapshot = graph_index(CHAIN).snapshot()
    seeder = FixedScorer(["e"])
    stream = GraphScorer(seeder).score(snapshot, Query(), 100)
    got = dict(zip(snapshot.keys_of(stream.ids), stream.scores.tolist(), strict=True))
    assert got == {"d": 1 / 2, "c": 1 / 3, "b": 1 / 4}
    assert seeder.calls == [5]


def test_seed_n_limits_seeds() -> None:
    snapshot = graph_index(CHAIN).snapshot()
    seeder = FixedScorer(["a", "e"])
    stream = GraphScorer(seeder, seed_n=1).score(snapshot, Query(), 100)
    got = dict(zip(snapshot.keys_of(stream.ids), stream.scores.tolist(), strict=True))
    assert got == {"b": 1 / 2, "c": 1 / 3, "d": 1 / 4}


def test_explicit_seeds_override_seed_scorer() -> None:
    snapshot = graph_index(CHAIN).snapshot()
    seeder = FixedScorer(["e"])
    got = run(GraphScorer(seeder), snapshot, ["a"])
    assert got == {"b": 1 / 2, "c": 1 / 3, "d": 1 / 4}
    assert seeder.calls == []


def test_unknown_seed_keys_are_ignored() -> None:
    snapshot = graph_index(CHAIN).snapshot()
    assert run(GraphScorer(), snapshot, ["ghost", "a"]) == run(GraphScorer(), snapshot, ["a"])
    assert run(GraphScorer(), snapshot, ["ghost"]) == {}
    assert run(PageRankScorer(), snapshot, ["ghost"]) == {}


def test_no_seeds_and_no_seed_scorer_gives_empty_stream() -> None:
    snapshot = graph_index(CHAIN).snapshot()
    assert len(GraphScorer().score(snapshot, Query(text="a"), 10)) == 0
    assert len(PageRankScorer().score(snapshot, Query(text="a"), 10)) == 0


def test_bm25_seeds_through_search() -> None:
    index = Index(analyzer="simple")
    index.add_many(
        [
            Document("paper1", "graph retrieval", links=("paper2",)),
            Document("paper2", "unrelated words", links=("paper3",)),
            Document("paper3", "other words"),
            Document("paper4", "nothing here"),
        ]
    )
    results = index.search("graph", 10, RRF(), GraphScorer(BM25Scorer(), seed_n=1))
    assert results.keys == ["paper2", "paper3"]
    assert [hit.signals[0].score for hit in results] == [1 / 2, 1 / 3]


def test_k_truncates_graph_stream() -> None:
    snapshot = graph_index(CHAIN).snapshot()
    stream = GraphScorer().score(snapshot, Query(seeds=("a",)), 2)
    assert snapshot.keys_of(stream.ids) == ["b", "c"]


# ---------------------------------------------------------------- personalised PageRank


def reference_pagerank(
    keys: Sequence[str],
    edges: Sequence[tuple[str, str]],
    seeds: Sequence[str],
    damping: float,
    directed: bool,
    weights: Sequence[float] | None = None,
) -> dict[str, float]:
    """Dense linear solve of r = d * (P^T r + (dangling . r) v) + (1 - d) v (v: uniform or ``weights``)."""
    n = len(keys)
    position = {key: i for i, key in enumerate(keys)}
    adjacency = np.zeros((n, n))
    for source, target in edges:
        adjacency[position[source], position[target]] = 1.0
        if not directed:
            adjacency[position[target], position[source]] = 1.0
    restart = np.zeros(n)
    for i, seed in enumerate(seeds):
        restart[position[seed]] = 1.0 / len(seeds) if weights is None else weights[i]
    out = adjacency.sum(axis=1)
    walk = np.zeros((n, n))  # column-stochastic: walk[j, i] = P(i -> j)
    for i in range(n):
        walk[:, i] = adjacency[i] / out[i] if out[i] > 0 else restart
    rank = np.linalg.solve(np.eye(n) - damping * walk, (1 - damping) * restart)
    return {key: float(rank[i]) for i, key in enumerate(keys)}


PR_KEYS = ["a", "b", "c", "d", "e"]
# d has no outgoing link (dangling when directed); e links in but is never reached from a.
PR_EDGES = [("a", "b"), ("a", "c"), ("b", "c"), ("c", "d"), ("e", "a")]


def pr_index() -> Index:
    links: dict[str, list[str]] = {key: [] for key in PR_KEYS}
    for source, target in PR_EDGES:
        links[source].append(target)
    return graph_index({key: tuple(targets) for key, targets in links.items()})


def as_dict(snapshot: Snapshot, vector: NDArray[np.float64]) -> dict[str, float]:
    return {key: float(vector[snapshot.id_of(key)]) for key in snapshot.keys()}  # noqa: SIM118


# Power iteration contracts the L1 error by ``damping`` per step, so after the
# default cap of 100 steps the error is at most 2 * 0.85**100 ~ 1.7e-7 (reached
# on a periodic walk such as c -> d -> back to the seed c). With a higher cap
# the tolerance (1e-10 on the L1 change) decides, and the error is below
# 1e-10 * d / (1 - d).
DEFAULT_CAP_ERROR = 2 * 0.85**100


@pytest.mark.parametrize("directed", [True, False])
@pytest.mark.parametrize("seeds", [("a",), ("a", "d"), ("c",)])
@pytest.mark.parametrize("damping", [0.85, 0.5])
def test_pagerank_matches_dense_reference(directed: bool, seeds: tuple[str, ...], damping: float) -> None:
    snapshot = pr_index().snapshot()
    scorer = PageRankScorer(damping=damping, directed=directed, max_iterations=1000)
    seed_ids = snapshot.ids_of(seeds)
    distribution = scorer.distribution(snapshot, seed_ids)
    assert distribution.sum() == pytest.approx(1.0, abs=1e-9)
    assert bool(np.all(distribution >= 0))
    expected = reference_pagerank(PR_KEYS, PR_EDGES, seeds, damping, directed)
    assert sum(expected.values()) == pytest.approx(1.0, abs=1e-12)
    got = as_dict(snapshot, distribution)
    for key in PR_KEYS:
        assert got[key] == pytest.approx(expected[key], abs=1e-8), key

    kept = run(
        PageRankScorer(damping=damping, directed=directed, keep_seeds=True, max_iterations=1000),
        snapshot,
        seeds,
    )
    assert set(kept) == {key for key, value in expected.items() if value > 1e-12}
    for key, value in kept.items():
        assert value == pytest.approx(expected[key], abs=1e-8), key
    dropped = run(PageRankScorer(damping=damping, directed=directed, max_iterations=1000), snapshot, seeds)
    assert set(dropped) == set(kept) - set(seeds)
    for key, value in dropped.items():
        assert value == kept[key]


@pytest.mark.parametrize("seeds", [("a",), ("c",)])
def test_pagerank_default_cap_is_close_to_reference(seeds: tuple[str, ...]) -> None:
    snapshot = pr_index().snapshot()
    distribution = PageRankScorer(directed=True).distribution(snapshot, snapshot.ids_of(seeds))
    assert distribution.sum() == pytest.approx(1.0, abs=1e-12)
    expected = reference_pagerank(PR_KEYS, PR_EDGES, seeds, 0.85, True)
    got = as_dict(snapshot, distribution)
    assert sum(abs(got[key] - expected[key]) for key in PR_KEYS) <= DEFAULT_CAP_ERROR


def test_pagerank_unreached_documents_are_absent() -> None:
    snapshot = pr_index().snapshot()
    got = run(PageRankScorer(directed=True), snapshot, ["a"])
    assert "e" not in got  # e links to a, but a never reaches e walking forwards
    assert set(got) == {"b", "c", "d"}
    undirected = run(PageRankScorer(), snapshot, ["a"])
    assert set(undirected) == {"b", "c", "d", "e"}


def test_pagerank_hand_checked_two_node_graph() -> None:
    # a <-> b undirected, seed a, damping d: r_a = (1 - d) + d r_b, r_b = d r_a
    # => r_a = 1 / (1 + d), r_b = d / (1 + d).
    snapshot = graph_index({"a": ("b",), "b": ()}).snapshot()
    kept = run(PageRankScorer(keep_seeds=True, max_iterations=1000), snapshot, ["a"])
    assert kept["a"] == pytest.approx(1 / 1.85, abs=1e-9)
    assert kept["b"] == pytest.approx(0.85 / 1.85, abs=1e-9)
    capped = run(PageRankScorer(keep_seeds=True), snapshot, ["a"])
    assert capped["a"] == pytest.approx(1 / 1.85, abs=DEFAULT_CAP_ERROR)


def test_pagerank_dangling_seed_keeps_all_mass() -> None:
    snapshot = graph_index({"a": (), "b": ("c",), "c": ()}).snapshot()
    scorer = PageRankScorer(keep_seeds=True)
    distribution = scorer.distribution(snapshot, snapshot.ids_of(["a"]))
    assert as_dict(snapshot, distribution) == pytest.approx({"a": 1.0, "b": 0.0, "c": 0.0}, abs=1e-12)
    assert run(scorer, snapshot, ["a"]) == pytest.approx({"a": 1.0}, abs=1e-12)
    assert run(PageRankScorer(), snapshot, ["a"]) == {}


def test_pagerank_dangling_target_returns_mass_to_seeds() -> None:
    # a -> b directed, b dangling: r_b = d r_a, r_a = (1 - d) + d r_b  (b's mass goes back to a).
    snapshot = graph_index({"a": ("b",), "b": ()}).snapshot()
    kept = run(
        PageRankScorer(directed=True, keep_seeds=True, damping=0.6, max_iterations=1000), snapshot, ["a"]
    )
    assert kept["a"] == pytest.approx(1 / 1.6, abs=1e-9)
    assert kept["b"] == pytest.approx(0.6 / 1.6, abs=1e-9)
    assert sum(kept.values()) == pytest.approx(1.0, abs=1e-9)


def test_pagerank_with_seed_scorer() -> None:
    snapshot = pr_index().snapshot()
    seeder = FixedScorer(["c", "a"])
    stream = PageRankScorer(seeder, seed_n=1, directed=True, max_iterations=1000).score(
        snapshot, Query(), 100
    )
    got = dict(zip(snapshot.keys_of(stream.ids), stream.scores.tolist(), strict=True))
    expected = reference_pagerank(PR_KEYS, PR_EDGES, ["c"], 0.85, True)
    assert set(got) == {"d"}
    assert got["d"] == pytest.approx(expected["d"], abs=1e-8)


# ---------------------------------------------------------------- seed-weighted restart


class ScoredSeeds:
    """A seed scorer returning the given keys with the given scores, best first."""

    name = "scored"

    def __init__(self, scores: Sequence[tuple[str, float]]) -> None:
        self.scores = list(scores)

    def score(self, snapshot: Snapshot, query: Query, k: int) -> Stream:
        return Stream(snapshot.ids_of([key for key, _ in self.scores]), [score for _, score in self.scores])


def test_restart_weights_rule() -> None:
    weights = PageRankScorer.restart_weights
    # All positive: proportional to the scores (divided by the best, then to sum 1).
    assert weights(np.array([4.0, 2.0, 2.0]), 3).tolist() == [0.5, 0.25, 0.25]
    # Some score <= 0: min-max over the seeds; the worst gets nothing.
    assert weights(np.array([1.0, 0.0, -1.0]), 3) == pytest.approx([2 / 3, 1 / 3, 0.0], abs=1e-15)
    # Equal scores, no scores (explicit seeds): uniform.
    assert weights(np.array([3.0, 3.0]), 2).tolist() == [0.5, 0.5]
    assert weights(None, 4).tolist() == [0.25] * 4


def test_score_restart_hand_checked_two_node_graph() -> None:
    # a <-> b, seeds a (3) and b (1): restart v = (0.75, 0.25), no dangling document, so
    # r_a = d r_b + (1 - d) 0.75 and r_b = d r_a + (1 - d) 0.25 => r_a = (0.75 + 0.25 d) / (1 + d).
    snapshot = graph_index({"a": ("b",), "b": ()}).snapshot()
    seeder = ScoredSeeds([("a", 3.0), ("b", 1.0)])
    weighted = PageRankScorer(seeder, seed_n=2, keep_seeds=True, restart="score", max_iterations=1000)
    stream = weighted.score(snapshot, Query(), 10)
    got = dict(zip(snapshot.keys_of(stream.ids), stream.scores.tolist(), strict=True))
    assert got["a"] == pytest.approx((0.75 + 0.25 * 0.85) / 1.85, abs=1e-9)
    assert got["b"] == pytest.approx((0.25 + 0.75 * 0.85) / 1.85, abs=1e-9)
    # The default restarts uniformly: by symmetry both get 1/2, whatever the seed scores.
    uniform = PageRankScorer(seeder, seed_n=2, keep_seeds=True, max_iterations=1000)
    stream = uniform.score(snapshot, Query(), 10)
    assert stream.scores.tolist() == pytest.approx([0.5, 0.5], abs=1e-9)


@pytest.mark.parametrize("directed", [True, False])
def test_score_restart_matches_dense_reference(directed: bool) -> None:
    snapshot = pr_index().snapshot()
    seeder = ScoredSeeds([("a", 6.0), ("d", 3.0), ("c", 1.0)])
    scorer = PageRankScorer(
        seeder, seed_n=3, directed=directed, keep_seeds=True, restart="score", max_iterations=1000
    )
    stream = scorer.score(snapshot, Query(), 100)
    got = dict(zip(snapshot.keys_of(stream.ids), stream.scores.tolist(), strict=True))
    expected = reference_pagerank(PR_KEYS, PR_EDGES, ["a", "d", "c"], 0.85, directed, weights=[0.6, 0.3, 0.1])
    assert set(got) == {key for key, value in expected.items() if value > 1e-12}
    for key, value in got.items():
        assert value == pytest.approx(expected[key], abs=1e-8), key


def test_score_restart_with_explicit_seeds_is_uniform_and_default_is_unchanged() -> None:
    snapshot = pr_index().snapshot()
    weighted = run(PageRankScorer(restart="score", max_iterations=1000), snapshot, ["a", "d"])
    assert weighted == run(PageRankScorer(max_iterations=1000), snapshot, ["a", "d"])
    assert repr(PageRankScorer()) == (
        "PageRankScorer(seed_scorer=None, damping=0.85, seed_n=5, keep_seeds=False, directed=False)"
    )
    assert "restart='score'" in repr(PageRankScorer(restart="score"))
    with pytest.raises(InvalidParameterError, match="restart must be"):
        PageRankScorer(restart="seeds")


def test_pagerank_spec_restart() -> None:
    from weftsearch.ranking.specs import ArmBuilder

    builder = ArmBuilder()
    [scorer] = builder.arm("p=pagerank(seed=bm25, restart=score, seed_n=10)").scorers
    assert isinstance(scorer, PageRankScorer)
    assert (scorer.restart, scorer.seed_n) == ("score", 10)
    [default] = builder.arm("q=pagerank(seed=bm25)").scorers
    assert isinstance(default, PageRankScorer) and default.restart == "uniform"
    with pytest.raises(InvalidParameterError, match="restart must be uniform or score"):
        builder.arm("r=pagerank(seed=bm25, restart=seeds)")
