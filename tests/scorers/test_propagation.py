"""PropagationScorer (score regularisation over links) on hand-computed graphs."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest

from weftsearch import RRF, BM25Scorer, Document, Index, PropagationScorer, Query, Snapshot, Stream
from weftsearch.errors import InvalidParameterError, ScorerOutputError
from weftsearch.ranking.specs import ArmBuilder, Expr


class ScoredSeed:
    """A seed scorer of any kind: fixed scores per key, returned worst first (the scorer re-orders)."""

    name = "seeded"

    def __init__(self, scores: Mapping[str, float]) -> None:
        self.scores = dict(scores)
        self.calls: list[int] = []

    def score(self, snapshot: Snapshot, query: Query, k: int) -> Stream:
        self.calls.append(k)
        best = sorted(self.scores.items(), key=lambda item: (-item[1], item[0]))[:k]
        best.reverse()
        ids = snapshot.ids_of([key for key, _ in best])
        return Stream(ids, [score for _, score in best])


def snapshot_of(edges: Mapping[str, tuple[str, ...]]) -> Snapshot:
    index = Index(analyzer="simple")
    index.add_many(Document(key, f"text of {key}", links=links) for key, links in edges.items())
    return index.snapshot()


def scored(scorer: PropagationScorer, snapshot: Snapshot, k: int = 100) -> dict[str, float]:
    stream = scorer.score(snapshot, Query(text="anything"), k)
    assert np.all(np.diff(stream.scores) <= 0)
    return dict(zip(snapshot.keys_of(stream.ids), stream.scores.tolist(), strict=True))


def ordered(scorer: PropagationScorer, snapshot: Snapshot) -> list[str]:
    return snapshot.keys_of(scorer.score(snapshot, Query(text="anything"), 100).ids)


def test_isolated_documents_keep_their_min_max_score() -> None:
    snapshot = snapshot_of({"a": (), "b": (), "c": ()})
    scorer = PropagationScorer(ScoredSeed({"a": 10.0, "b": 6.0, "c": 2.0}), a=0.5, iterations=3)
    assert scored(scorer, snapshot) == {"a": 1.0, "b": 0.5, "c": 0.0}


def test_a_document_linked_to_a_high_scorer_rises() -> None:
    # Seeds a 10, b 6, c 4, d 2 -> min-max 1, 0.5, 0.25, 0; d links to a.
    snapshot = snapshot_of({"a": (), "b": (), "c": (), "d": ("a",)})
    seed = ScoredSeed({"a": 10.0, "b": 6.0, "c": 4.0, "d": 2.0})
    one = PropagationScorer(seed, a=0.3, iterations=1)
    # a: 0.7 * 1 + 0.3 * 0 = 0.7; d: 0.7 * 0 + 0.3 * 1 = 0.3 (above c's 0.25).
    assert scored(one, snapshot) == pytest.approx({"a": 0.7, "b": 0.5, "d": 0.3, "c": 0.25}, abs=1e-15)
    assert ordered(one, snapshot) == ["a", "b", "d", "c"]
    # Second round, anchored to the normalised seed: a = 0.7 + 0.3 * 0.3 = 0.79, d = 0.3 * 0.7 = 0.21.
    two = PropagationScorer(seed, a=0.3, iterations=2)
    assert scored(two, snapshot) == pytest.approx({"a": 0.79, "b": 0.5, "c": 0.25, "d": 0.21}, abs=1e-15)


def test_cycle_hand_computed_and_converges_to_the_regularised_solution() -> None:
    # Triangle a -> b -> c -> a, seeds 3, 2, 1 -> 1, 0.5, 0; every document has two neighbours.
    snapshot = snapshot_of({"a": ("b",), "b": ("c",), "c": ("a",)})
    seed = ScoredSeed({"a": 3.0, "b": 2.0, "c": 1.0})
    assert scored(PropagationScorer(seed, a=0.5, iterations=1), snapshot) == pytest.approx(
        {"a": 0.625, "b": 0.5, "c": 0.375}, abs=1e-15
    )
    assert scored(PropagationScorer(seed, a=0.5, iterations=2), snapshot) == pytest.approx(
        {"a": 0.71875, "b": 0.5, "c": 0.28125}, abs=1e-15
    )
    # Many rounds reach Diaz's closed form (1 - a) (I - a P)^-1 s0.
    transition = np.array([[0, 0.5, 0.5], [0.5, 0, 0.5], [0.5, 0.5, 0]])
    closed = 0.5 * np.linalg.solve(np.eye(3) - 0.5 * transition, [1.0, 0.5, 0.0])
    got = scored(PropagationScorer(seed, a=0.5, iterations=200), snapshot)
    assert [got[key] for key in "abc"] == pytest.approx(closed.tolist(), abs=1e-12)


def test_directed_takes_only_the_documents_a_document_links_to() -> None:
    snapshot = snapshot_of({"a": ("b",), "b": ()})
    seed = ScoredSeed({"a": 1.0, "b": 0.0})
    # Undirected: each is the other's neighbour.
    assert scored(PropagationScorer(seed, a=0.5, iterations=1), snapshot) == {"a": 0.5, "b": 0.5}
    # Directed: a takes b's score, b has no outgoing link and keeps its own.
    assert scored(PropagationScorer(seed, a=0.5, iterations=1, directed=True), snapshot) == {
        "a": 0.5,
        "b": 0.0,
    }


def test_dangling_links_are_ignored() -> None:
    snapshot = snapshot_of({"a": ("ghost",), "b": ("phantom", "a"), "c": ("ghost",)})
    assert snapshot.links().nnz == 1
    seed = ScoredSeed({"a": 2.0, "b": 1.0, "c": 0.0})
    # a and b are linked; c's only link names a missing key: isolated, keeps 0.
    got = scored(PropagationScorer(seed, a=0.5, iterations=1), snapshot)
    assert got == {"a": 0.75, "b": 0.75, "c": 0.0}
    assert ordered(PropagationScorer(seed, a=0.5, iterations=1), snapshot) == ["a", "b", "c"]  # tie: key


def test_neighbours_the_seed_did_not_retrieve_are_left_out_unless_expanded() -> None:
    snapshot = snapshot_of({"a": ("z",), "b": (), "z": ()})
    seed = ScoredSeed({"a": 4.0, "b": 2.0})
    # z is not a candidate: a has no linked candidate and keeps 1.
    assert scored(PropagationScorer(seed, a=0.3, iterations=1), snapshot) == {"a": 1.0, "b": 0.0}
    # Expanded: z joins with anchor 0; a = 0.7 * 1 + 0.3 * 0, z = 0.3 * 1.
    got = scored(PropagationScorer(seed, a=0.3, iterations=1, expand=True), snapshot)
    assert got == pytest.approx({"a": 0.7, "z": 0.3, "b": 0.0}, abs=1e-15)


def test_an_expanded_neighbour_with_nothing_propagated_is_left_out() -> None:
    snapshot = snapshot_of({"a": (), "b": ("z",), "z": ()})
    seed = ScoredSeed({"a": 4.0, "b": 2.0})  # b normalises to 0, so z receives 0
    assert scored(PropagationScorer(seed, a=0.3, iterations=1, expand=True), snapshot) == {"a": 1.0, "b": 0.0}


def test_equal_seed_scores_all_normalise_to_one_and_tie_by_key() -> None:
    snapshot = snapshot_of({"c": (), "a": (), "b": ()})
    scorer = PropagationScorer(ScoredSeed({"c": 5.0, "a": 5.0, "b": 5.0}))
    assert scored(scorer, snapshot) == {"a": 1.0, "b": 1.0, "c": 1.0}
    assert ordered(scorer, snapshot) == ["a", "b", "c"]


def test_a_is_zero_gives_the_seed_order() -> None:
    snapshot = snapshot_of({"a": ("b", "c"), "b": ("c",), "c": ()})
    seed = ScoredSeed({"a": 3.0, "b": 1.0, "c": 2.0})
    assert ordered(PropagationScorer(seed, a=0.0), snapshot) == ["a", "c", "b"]


def test_empty_seed_stream_gives_an_empty_stream() -> None:
    snapshot = snapshot_of({"a": ("b",), "b": ()})
    assert len(PropagationScorer(ScoredSeed({})).score(snapshot, Query(text="x"), 10)) == 0


def test_depth_is_asked_of_the_seed_and_k_truncates() -> None:
    snapshot = snapshot_of({key: () for key in "abcde"})
    seed = ScoredSeed({"a": 5.0, "b": 4.0, "c": 3.0, "d": 2.0, "e": 1.0})
    scorer = PropagationScorer(seed, depth=3)
    assert scored(scorer, snapshot, k=2) == {"a": 1.0, "b": 0.5}
    assert seed.calls == [3]
    assert scored(scorer, snapshot) == {"a": 1.0, "b": 0.5, "c": 0.0}


def test_scores_do_not_depend_on_insertion_order() -> None:
    rng = np.random.default_rng(3)
    keys = [f"k{i}" for i in range(40)]
    edges = {
        key: tuple(keys[j] for j in rng.choice(40, size=3, replace=False) if keys[j] != key) for key in keys
    }
    seed = ScoredSeed({key: float(rng.integers(0, 1000)) / 7.0 for key in keys})
    forward = snapshot_of(edges)
    backward = snapshot_of(dict(reversed(list(edges.items()))))
    scorer = PropagationScorer(seed, a=0.4, iterations=3, depth=30)
    one, two = scored(scorer, forward), scored(scorer, backward)
    assert list(one) == list(two)
    assert list(one.values()) == list(two.values())  # bit for bit


def test_bm25_seed_through_search() -> None:
    index = Index(analyzer="simple")
    index.add_many(
        [
            Document("p1", "graph ranking of papers", links=("p3",)),
            Document("p2", "graph algorithms"),
            Document("p3", "citation analysis of graph papers"),
            Document("p4", "cooking recipes"),
        ]
    )
    bm25 = BM25Scorer()
    results = index.search("graph", 10, RRF(), PropagationScorer(bm25))
    found = {hit.key for hit in results}
    assert found == {"p1", "p2", "p3"}  # nothing BM25 did not find


def test_bad_parameters_are_refused() -> None:
    seed = ScoredSeed({})
    for a in (-0.1, 1.5, True, "0.3"):
        with pytest.raises(InvalidParameterError, match="a must be"):
            PropagationScorer(seed, a=a)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="iterations"):
        PropagationScorer(seed, iterations=0)
    with pytest.raises(InvalidParameterError, match="depth"):
        PropagationScorer(seed, depth=0)
    with pytest.raises(InvalidParameterError, match="not a Scorer"):
        PropagationScorer(object())  # type: ignore[arg-type]


def test_an_infinite_seed_score_is_refused() -> None:
    snapshot = snapshot_of({"a": (), "b": ()})
    with pytest.raises(ScorerOutputError, match="infinite"):
        PropagationScorer(ScoredSeed({"a": float("inf"), "b": 1.0})).score(snapshot, Query(text="x"), 10)


def test_spec_builds_the_scorer_around_its_seed() -> None:
    builder = ArmBuilder()
    arm = builder.arm("p=propagate(seed=bm25, a=0.5, iterations=3, depth=50, expand=true)")
    [scorer] = arm.scorers
    assert isinstance(scorer, PropagationScorer)
    assert (scorer.a, scorer.iterations, scorer.depth, scorer.expand, scorer.directed) == (
        0.5,
        3,
        50,
        True,
        False,
    )
    assert scorer.seed_scorer is builder.scorer(Expr("bm25"))
    default = builder.arm("q=propagate(seed=bm25)").scorers[0]
    assert isinstance(default, PropagationScorer)
    assert (default.a, default.iterations, default.depth) == (0.3, 2, 100)
    with pytest.raises(InvalidParameterError, match="seed is required"):
        builder.arm("r=propagate(a=0.3)")
