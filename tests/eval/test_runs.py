"""Arms and their runs: validation, agreement with Index.search, the stream cache, ties, TREC lines.

Everything runs on a small in-memory index built here. Scorers and fusers
written in this file (a counting wrapper, fixed-output scorers, scorers and
fusers that break the contract) are plain objects with ``name`` and
``score``/``fuse``: the harness must accept any such object and must never
ask what it is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

import numpy as np
import pytest

from weftsearch.documents import Document
from weftsearch.engine.index import Index
from weftsearch.engine.protocols import Fuser, Scorer
from weftsearch.engine.query import Query
from weftsearch.engine.search import canonical_stream
from weftsearch.engine.snapshot import Snapshot
from weftsearch.engine.stream import FusedStream, KeyOrder, Stream
from weftsearch.errors import InvalidParameterError, PairingError, ScorerOutputError
from weftsearch.eval.runs import ArmRun, StreamCache, run_arm, tied_slots
from weftsearch.fusion import RRF, ScoreFusion, WeightedRRF
from weftsearch.ranking.arm import Arm
from weftsearch.scorers import BM25Scorer, GraphScorer, RecencyScorer

# ---------------------------------------------------------------------------- fixtures

#: Twelve documents; keys deliberately out of numeric order so the key tie-break shows.
TEXTS: dict[str, str] = {
    "d1": "apple banana cherry",
    "d10": "apple apple banana",
    "d11": "cherry date elder",
    "d12": "fig grape apple",
    "d2": "banana date",
    "d3": "apple",
    "d4": "elder fig grape cherry",
    "d5": "grape banana banana",
    "d6": "date date fig",
    "d7": "apple cherry grape banana date",
    "d8": "elder",
    "d9": "cherry cherry apple fig",
}
LINKS: dict[str, tuple[str, ...]] = {
    "d1": ("d2", "d3"),
    "d2": ("d4",),
    "d3": ("d11",),
    "d5": ("d6", "d7"),
    "d8": ("d1",),
    "d9": ("d12", "d10"),
}

QUERIES: dict[str, Query] = {
    "q1": Query(text="apple"),
    "q2": Query(text="banana cherry"),
    "q3": Query(text="grape elder fig"),
    "q4": Query(text="date"),
    "none": Query(text="zebra quartz"),  # no term in the index: an empty ranking
}


def make_index(texts: Mapping[str, str] = TEXTS) -> Index:
    index = Index("english")
    index.add_many(
        Document(key=key, text=text, links=LINKS.get(key, ()), time=1_000.0 + 60.0 * n)
        for n, (key, text) in enumerate(texts.items())
    )
    return index


@pytest.fixture(scope="module")
def index() -> Index:
    return make_index()


@pytest.fixture(scope="module")
def snapshot(index: Index) -> Snapshot:
    return index.snapshot()


class CountingScorer:
    """Wraps a scorer and counts the calls (the query texts and depths it was asked)."""

    def __init__(self, inner: Scorer, name: str = "counted") -> None:
        self.inner = inner
        self._name = name
        self.calls: list[tuple[str, int]] = []

    @property
    def name(self) -> str:
        return self._name

    def score(self, snapshot: Snapshot, query: Query, k: int) -> Stream:
        self.calls.append((query.text, k))
        return self.inner.score(snapshot, query, k)


class FixedScorer:
    """Returns a fixed (key, score) list per query text, in the order given (the engine re-sorts)."""

    def __init__(self, name: str, table: Mapping[str, Sequence[tuple[str, float]]]) -> None:
        self._name = name
        self.table = table

    @property
    def name(self) -> str:
        return self._name

    def score(self, snapshot: Snapshot, query: Query, k: int) -> Stream:
        rows = list(self.table.get(query.text, ()))[:k]
        if not rows:
            return Stream.empty()
        ids = snapshot.ids_of([key for key, _ in rows])
        return Stream(ids, [score for _, score in rows])


class RawScorer:
    """Returns whatever it was built with, unchecked: for contract violations."""

    def __init__(self, name: str, output: object) -> None:
        self._name = name
        self.output = output

    @property
    def name(self) -> str:
        return self._name

    def score(self, snapshot: Snapshot, query: Query, k: int) -> Stream:
        return self.output  # type: ignore[return-value]


class GreedyFuser:
    """Fuses by RRF but returns ``extra`` more candidates than asked (or a bare Stream)."""

    def __init__(self, extra: int = 0, bare: bool = False) -> None:
        self.extra = extra
        self.bare = bare

    @property
    def name(self) -> str:
        return "greedy"

    def fuse(self, streams: Sequence[Stream], k: int, keys: KeyOrder) -> FusedStream:
        fused = RRF().fuse(streams, k + self.extra, keys)
        if self.bare:
            return Stream(fused.ids, fused.scores)  # type: ignore[return-value]
        return fused


def run(snapshot: Snapshot, arm: Arm, k: int, queries: Mapping[str, Query] = QUERIES) -> ArmRun:
    return run_arm(StreamCache(snapshot), arm, queries, k)


# ---------------------------------------------------------------------------- Arm


@pytest.mark.parametrize("name", ["has space", "a/b", "", "x" * 65, "-leading", ".hidden", "tab\tname", "é"])
def test_arm_refuses_a_name_that_cannot_be_a_file_name(name: str) -> None:
    with pytest.raises(InvalidParameterError, match="arm name"):
        Arm(name, (BM25Scorer(),), RRF())


@pytest.mark.parametrize("name", ["x", "x" * 64, "bm25+graph", "rrf-k60_w0.5", "A1"])
def test_arm_accepts_names_of_the_pattern(name: str) -> None:
    assert Arm(name, (BM25Scorer(),), RRF()).name == name


def test_arm_refuses_no_scorer_and_objects_that_are_not_scorers_or_fusers() -> None:
    with pytest.raises(InvalidParameterError, match="at least one scorer"):
        Arm("a", (), RRF())
    with pytest.raises(InvalidParameterError, match="is not a Scorer"):
        Arm("a", (BM25Scorer(), object()), RRF())  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="is not a Scorer"):
        Arm("a", (RRF(),), RRF())  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="is not a Fuser"):
        Arm("a", (BM25Scorer(),), BM25Scorer())  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="is not a Fuser"):
        Arm("a", (BM25Scorer(),), object())  # type: ignore[arg-type]


@pytest.mark.parametrize("depth", [0, -1, True, False, 2.0, "10"])
def test_arm_refuses_a_depth_that_is_not_a_positive_integer(depth: object) -> None:
    with pytest.raises(InvalidParameterError, match="depth"):
        Arm("a", (BM25Scorer(),), RRF(), depth=depth)  # type: ignore[arg-type]


def test_arm_keeps_scorers_as_a_tuple_and_numpy_depth_as_int() -> None:
    bm25 = BM25Scorer()
    arm = Arm("a", [bm25], RRF(), depth=np.int64(7))  # type: ignore[arg-type]
    assert arm.scorers == (bm25,)
    assert arm.depth == 7
    assert type(arm.depth) is int


def test_describe_records_reprs_depth_and_notes() -> None:
    graph = GraphScorer(seed_scorer=BM25Scorer(k1=0.9, b=0.4), max_depth=2)
    arm = Arm("text+graph", (BM25Scorer(k1=0.9, b=0.4), graph), RRF(k=20), depth=37, notes="why")
    assert arm.describe() == {
        "name": "text+graph",
        "scorers": [
            {"name": "bm25", "repr": "BM25Scorer(k1=0.9, b=0.4)"},
            {
                "name": "graph",
                "repr": "GraphScorer(seed_scorer=BM25Scorer(k1=0.9, b=0.4), max_depth=2, seed_n=5, "
                "keep_seeds=False, directed=False)",
            },
        ],
        "fuser": {"name": "rrf", "repr": "RRF(k=20)"},
        "depth": 37,
        "notes": "why",
    }


# ---------------------------------------------------------------------------- run_arm = Index.search


# Fuser contract tests search two streams: one stream passes through without calling the
# fuser (docs/ARCHITECTURE.md, ordering rule).
TWO_STREAMS = (BM25Scorer(), BM25Scorer(k1=0.9))

ARMS = {
    "text": lambda: Arm("text", (BM25Scorer(),), RRF(), depth=6),
    "text-score": lambda: Arm("text-score", (BM25Scorer(),), ScoreFusion(norm="zscore"), depth=8),
    "two-streams": lambda: Arm(
        "two", (BM25Scorer(), RecencyScorer(half_life=300.0)), ScoreFusion([1.0, 0.5]), depth=7
    ),
    "graph-rrf": lambda: Arm(
        "graph", (BM25Scorer(), GraphScorer(seed_scorer=BM25Scorer())), RRF(k=5), depth=9
    ),
    "weighted": lambda: Arm(
        "weighted", (BM25Scorer(), RecencyScorer(half_life=120.0)), WeightedRRF([2.0, 1.0], k=1), depth=12
    ),
}


@pytest.mark.parametrize("arm_name", sorted(ARMS))
@pytest.mark.parametrize("k", [1, 3, 6])
def test_run_arm_gives_the_keys_and_scores_of_index_search(index: Index, arm_name: str, k: int) -> None:
    arm = ARMS[arm_name]()
    got = run(index.snapshot(), arm, k)
    assert got.qids == tuple(QUERIES)
    assert got.k == k
    snapshot = index.snapshot()
    for qid, query in QUERIES.items():
        expected = index.search(query, k, arm.fuser, *arm.scorers, depth=arm.depth)
        assert got.keys[qid] == tuple(expected.keys), qid
        if len(arm.scorers) == 1:
            # One stream passes through with the scorer's own scores (as a one-signal search does).
            own = canonical_stream(arm.scorers[0].score(snapshot, query, arm.depth), snapshot, arm.depth, "s")
            assert got.scores[qid].tolist() == own.scores[:k].tolist(), qid
        else:
            assert got.scores[qid].tolist() == expected.scores.tolist(), qid  # exactly, not approximately


def test_run_arm_with_k_larger_than_the_corpus(index: Index) -> None:
    arm = Arm("all", (BM25Scorer(), RecencyScorer(half_life=60.0)), RRF(), depth=50)
    got = run(index.snapshot(), arm, 50)
    for qid, query in QUERIES.items():
        expected = index.search(query, 50, arm.fuser, *arm.scorers, depth=50)
        assert got.keys[qid] == tuple(expected.keys)
        assert got.scores[qid].tolist() == expected.scores.tolist()
    # Recency returns every document: each query's ranking holds all twelve.
    assert {len(keys) for keys in got.keys.values()} == {12}


def test_a_query_with_no_matching_term_gives_an_empty_ranking(snapshot: Snapshot) -> None:
    got = run(snapshot, Arm("text", (BM25Scorer(),), RRF(), depth=10), 10)
    assert got.keys["none"] == ()
    assert got.scores["none"].shape == (0,)
    assert got.tied["none"] == 0
    assert got.stream_tied["none"] == (0,)
    assert got.run["none"] == {}
    assert [line for line in got.trec_lines() if line.startswith("none ")] == []


def test_run_arm_scores_are_read_only_float64_and_run_maps_them(snapshot: Snapshot) -> None:
    got = run(snapshot, Arm("text", (BM25Scorer(),), ScoreFusion(), depth=10), 5)
    scores = got.scores["q1"]
    assert scores.dtype == np.float64
    assert not scores.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        scores[0] = 1.0
    assert got.run["q2"] == dict(zip(got.keys["q2"], got.scores["q2"].tolist(), strict=True))
    assert list(got.run) == list(QUERIES)


def test_signals_are_the_stream_labels_with_repeats_suffixed(snapshot: Snapshot) -> None:
    arm = Arm("a", (BM25Scorer(), BM25Scorer(k1=2.0), RecencyScorer(half_life=1.0)), RRF(), depth=5)
    assert run(snapshot, arm, 3).signals == ("bm25", "bm25#2", "recency")


# ---------------------------------------------------------------------------- the stream cache


def test_a_scorer_shared_by_two_arms_is_called_once_per_query_and_depth(snapshot: Snapshot) -> None:
    shared = CountingScorer(BM25Scorer())
    other = CountingScorer(RecencyScorer(half_life=100.0), name="other")
    cache = StreamCache(snapshot)
    first = run_arm(cache, Arm("a", (shared,), RRF(), depth=10), QUERIES, 5)
    second = run_arm(cache, Arm("b", (shared, other), ScoreFusion(), depth=10), QUERIES, 5)
    assert shared.calls == [(query.text, 10) for query in QUERIES.values()]
    assert other.calls == [(query.text, 10) for query in QUERIES.values()]
    assert len(cache) == 2 * len(QUERIES)
    # Running an arm again computes nothing.
    again = run_arm(cache, Arm("a", (shared,), RRF(), depth=10), QUERIES, 5)
    assert len(shared.calls) == len(QUERIES)
    assert again.keys == first.keys
    # The cached streams give what a fresh cache gives.
    fresh = run(
        snapshot, Arm("b", (BM25Scorer(), RecencyScorer(half_life=100.0)), ScoreFusion(), depth=10), 5
    )
    assert second.keys == fresh.keys
    assert {q: s.tolist() for q, s in second.scores.items()} == {
        q: s.tolist() for q, s in fresh.scores.items()
    }


class BatchCountingScorer(CountingScorer):
    """A counting scorer that also offers the optional ``score_many`` batch method."""

    def __init__(self, inner: Scorer, name: str = "batched") -> None:
        super().__init__(inner, name)
        self.batches: list[tuple[tuple[str, ...], int]] = []

    def score_many(self, snapshot: Snapshot, queries: Sequence[Query], k: int) -> list[Stream]:
        self.batches.append((tuple(query.text for query in queries), k))
        return [self.inner.score(snapshot, query, k) for query in queries]


def test_a_scorer_with_score_many_fills_the_cache_in_one_batch(snapshot: Snapshot) -> None:
    """Issue 14 item 4: run_arm asks a batch-capable scorer once for every uncached query;
    the run is the same as one call per query."""
    batched = BatchCountingScorer(BM25Scorer())
    cache = StreamCache(snapshot)
    arm = Arm("a", (batched, RecencyScorer(half_life=100.0)), RRF(), depth=10)
    first = dict(list(QUERIES.items())[:2])
    cache.stream(batched, "batched", "q1", QUERIES["q1"], 10)  # one already cached: not asked again
    assert batched.calls == [("apple", 10)]
    result = run_arm(cache, arm, QUERIES, 5)
    assert batched.batches == [(tuple(q.text for qid, q in QUERIES.items() if qid != "q1"), 10)]
    assert batched.calls == [("apple", 10)]  # score was never called per query in the run
    plain = run(snapshot, Arm("a", (BM25Scorer(), RecencyScorer(half_life=100.0)), RRF(), depth=10), 5)
    assert result.keys == plain.keys
    assert {q: s.tolist() for q, s in result.scores.items()} == {
        q: s.tolist() for q, s in plain.scores.items()
    }
    run_arm(cache, arm, first, 5)  # everything cached: no batch
    assert len(batched.batches) == 1
    with pytest.raises(InvalidParameterError, match="cached with another query"):
        cache.fill(batched, "batched", {"q1": Query(text="other")}, 10)


def test_two_equal_looking_scorer_objects_are_computed_separately(snapshot: Snapshot) -> None:
    inner = BM25Scorer()
    one, two = CountingScorer(inner), CountingScorer(inner)
    cache = StreamCache(snapshot)
    run_arm(cache, Arm("a", (one,), RRF(), depth=10), QUERIES, 5)
    run_arm(cache, Arm("b", (two,), RRF(), depth=10), QUERIES, 5)
    assert len(one.calls) == len(QUERIES)
    assert len(two.calls) == len(QUERIES)
    assert len(cache) == 2 * len(QUERIES)


def test_a_different_depth_recomputes(snapshot: Snapshot) -> None:
    scorer = CountingScorer(BM25Scorer())
    cache = StreamCache(snapshot)
    arm = Arm("a", (scorer,), RRF(), depth=10)
    run_arm(cache, arm, QUERIES, 5)
    deeper = run_arm(cache, arm, QUERIES, 5, depth=20)
    run_arm(cache, arm, QUERIES, 5, depth=20)
    n = len(QUERIES)
    assert [depth for _, depth in scorer.calls] == [10] * n + [20] * n
    assert len(cache) == 2 * n
    assert deeper.description["depth"] == 20
    assert arm.describe()["depth"] == 10


def test_the_same_scorer_twice_in_one_arm_is_computed_once(snapshot: Snapshot) -> None:
    scorer = CountingScorer(BM25Scorer())
    got = run_arm(StreamCache(snapshot), Arm("a", (scorer, scorer), RRF(), depth=10), QUERIES, 5)
    assert len(scorer.calls) == len(QUERIES)
    assert got.signals == ("counted", "counted#2")


# ---------------------------------------------------------------------------- ties


@pytest.mark.parametrize(
    ("scores", "k", "expected"),
    [
        ([3.0, 2.0, 2.0, 1.0], 4, 2),  # slots 2 and 3 tie
        ([3.0, 2.0, 2.0, 1.0], 2, 1),  # slot 2 ties slot 3, across the cut
        ([3.0, 2.0, 2.0, 1.0], 1, 0),
        ([1.0, 1.0, 1.0], 2, 2),
        ([1.0, 1.0, 1.0], 3, 3),
        ([5.0, 5.0], 1, 1),
        ([4.0, 3.0, 2.0, 1.0], 4, 0),
        ([2.0, 2.0, 1.0, 1.0], 4, 4),
        ([1.0, 1.0 + 1e-9], 2, 2),  # equal once rounded to float32
        ([1.0 + 2**-23, 1.0], 2, 0),  # one float32 ulp apart: distinct
        ([1e300, 1e39], 2, 2),  # both overflow float32 to inf
        ([0.0, -0.0], 2, 2),
        ([], 3, 0),
        ([7.0], 1, 0),
    ],
)
def test_tied_slots_literals(scores: list[float], k: int, expected: int) -> None:
    assert tied_slots(np.array(scores, dtype=np.float64), k) == expected


def two_disjoint_streams() -> tuple[FixedScorer, FixedScorer]:
    # Stream A: d3, d1; stream B: d2, d1. Under RRF(60): d1 gets 2/62, d3 and d2 get 1/61 each:
    # an exact tie, between a document at rank 1 of A only and one at rank 1 of B only.
    a = FixedScorer("a", {"t": [("d3", 9.0), ("d1", 8.0)]})
    b = FixedScorer("b", {"t": [("d2", 0.7), ("d1", 0.2)]})
    return a, b


@pytest.mark.parametrize(("k", "expected"), [(3, 2), (2, 1), (1, 0)])
def test_run_counts_an_exact_rrf_tie_between_two_single_stream_documents(
    snapshot: Snapshot, k: int, expected: int
) -> None:
    a, b = two_disjoint_streams()
    got = run_arm(StreamCache(snapshot), Arm("tie", (a, b), RRF(), depth=3), {"t": Query("t")}, k)
    assert got.keys["t"] == ("d1", "d2", "d3")[:k]  # the engine breaks the tie by key, ascending
    assert got.scores["t"].tolist() == [2 / 62, 1 / 61, 1 / 61][:k]
    assert got.tied == {"t": expected}
    assert got.tied_total() == expected
    assert got.stream_tied == {"t": (0, 0)}  # neither stream has a tie of its own


def test_stream_tied_counts_a_single_streams_own_ties(snapshot: Snapshot) -> None:
    flat = FixedScorer("flat", {"t": [("d5", 1.0), ("d4", 1.0), ("d6", 0.5), ("d7", 0.25)]})
    got = run_arm(StreamCache(snapshot), Arm("flat", (flat,), ScoreFusion(), depth=4), {"t": Query("t")}, 3)
    # min-max: d4, d5 -> 1, d6 -> 1/3, d7 -> 0; the stream's d4/d5 tie shows in both counts.
    assert got.keys["t"] == ("d4", "d5", "d6")
    assert got.stream_tied == {"t": (2,)}
    assert got.tied == {"t": 2}


# ---------------------------------------------------------------------------- TREC lines


def test_trec_lines_format_and_exact_scores(snapshot: Snapshot) -> None:
    arm = Arm("bm25.zscore", (BM25Scorer(),), ScoreFusion(norm="zscore"), depth=10)
    got = run(snapshot, arm, 7)
    lines = list(got.trec_lines())
    assert len(lines) == sum(len(keys) for keys in got.keys.values()) > 0
    seen: dict[str, list[tuple[int, str, float]]] = {}
    for line in lines:
        columns = line.split(" ")
        assert len(columns) == 6, line
        qid, q0, key, rank, score, tag = columns
        assert q0 == "Q0"
        assert tag == "bm25.zscore"
        seen.setdefault(qid, []).append((int(rank), key, float(score)))
    assert list(seen) == [qid for qid in QUERIES if got.keys[qid]]  # queries in run order
    for qid, rows in seen.items():
        assert [rank for rank, _, _ in rows] == list(range(1, len(rows) + 1))
        assert tuple(key for _, key, _ in rows) == got.keys[qid]
        assert [score for _, _, score in rows] == got.scores[qid].tolist()  # repr round-trips exactly


def test_trec_lines_print_shortest_round_trip_reprs(snapshot: Snapshot) -> None:
    scorer = FixedScorer("fixed", {"t": [("d1", 0.1), ("d2", 1 / 3), ("d3", 1e-300)]})
    got = run_arm(StreamCache(snapshot), Arm("fixed", (scorer,), RRF(k=0), depth=3), {"t": Query("t")}, 3)
    # One stream passes through with its raw scores (the fuser is not called).
    assert list(got.trec_lines()) == [
        "t Q0 d2 1 0.3333333333333333 fixed",
        "t Q0 d1 2 0.1 fixed",
        "t Q0 d3 3 1e-300 fixed",
    ]
    # Two streams are fused: RRF with constant 0 gives 2/1, 2/2, 2/3 for d2, d1, d3.
    two = Arm("fixed", (scorer, scorer), RRF(k=0), depth=3)
    assert list(run_arm(StreamCache(snapshot), two, {"t": Query("t")}, 3).trec_lines()) == [
        "t Q0 d2 1 2.0 fixed",
        "t Q0 d1 2 1.0 fixed",
        "t Q0 d3 3 0.6666666666666666 fixed",
    ]


# Inner whitespace a Document accepts (a tab, like every control character, it refuses itself).
@pytest.mark.parametrize("key", ["has space", "ideographic\u3000space", "nbsp\u00a0key"])
def test_a_document_key_holding_whitespace_is_refused(key: str) -> None:
    index = make_index({**TEXTS, key: "apple zebra"})
    with pytest.raises(PairingError, match="whitespace"):
        run(index.snapshot(), Arm("text", (BM25Scorer(),), RRF(), depth=20), 20, {"z": Query("zebra")})


def test_a_whitespace_key_outside_the_run_is_not_refused() -> None:
    index = make_index({**TEXTS, "has space": "zebra"})
    got = run(index.snapshot(), Arm("text", (BM25Scorer(),), RRF(), depth=20), 20, {"a": Query("apple")})
    assert "has space" not in got.keys["a"]


def test_a_query_id_holding_whitespace_is_refused(snapshot: Snapshot) -> None:
    with pytest.raises(PairingError):
        got = run(snapshot, Arm("text", (BM25Scorer(),), RRF(), depth=5), 5, {"q 1": Query("apple")})
        list(got.trec_lines())


# ---------------------------------------------------------------------------- contract violations


BAD_OUTPUTS: dict[str, object] = {
    "duplicate ids": Stream([0, 0], [2.0, 1.0]),
    "nan score": Stream([0, 1], [1.0, float("nan")]),
    "longer than depth": Stream(np.arange(6), np.arange(6, 0, -1, dtype=np.float64)),
    "id out of range": Stream([0, 99], [2.0, 1.0]),
    "not a stream": [(0, 1.0)],
    "none": None,
}


@pytest.mark.parametrize("case", sorted(BAD_OUTPUTS))
def test_a_scorer_breaking_its_contract_raises_naming_the_scorer(snapshot: Snapshot, case: str) -> None:
    liar = RawScorer("liar", BAD_OUTPUTS[case])
    with pytest.raises(ScorerOutputError, match="'liar'"):
        run(snapshot, Arm("a", (liar,), RRF(), depth=5), 3)


def test_the_error_names_the_stream_label_when_names_repeat(snapshot: Snapshot) -> None:
    good = FixedScorer("same", {})
    bad = RawScorer("same", Stream([1, 1], [1.0, 1.0]))
    with pytest.raises(ScorerOutputError, match="'same#2'"):
        run(snapshot, Arm("a", (good, bad), RRF(), depth=5), 3)


def test_a_fuser_returning_too_many_candidates_raises(snapshot: Snapshot) -> None:
    # The harness asks the fuser for k + 1 (to see a tie across the cut): k + 1 is fine, k + 2 is not.
    ok = run(snapshot, Arm("a", TWO_STREAMS, GreedyFuser(extra=0), depth=10), 3)
    assert max(len(keys) for keys in ok.keys.values()) == 3
    with pytest.raises(ScorerOutputError, match="'greedy'"):
        run(snapshot, Arm("a", TWO_STREAMS, GreedyFuser(extra=1), depth=10), 3)


def test_a_fuser_returning_a_plain_stream_raises(snapshot: Snapshot) -> None:
    with pytest.raises(ScorerOutputError, match="'greedy'"):
        run(snapshot, Arm("a", TWO_STREAMS, GreedyFuser(bare=True), depth=10), 3)


class MisshapenFuser:
    """Fuses by RRF, then damages the output: repeats the best id, or adds a contributions column."""

    def __init__(self, fault: str) -> None:
        self.fault = fault

    @property
    def name(self) -> str:
        return "misshapen"

    def fuse(self, streams: Sequence[Stream], k: int, keys: KeyOrder) -> FusedStream:
        fused = RRF().fuse(streams, k, keys)
        if self.fault == "repeat":
            if len(fused) == 0:
                return fused
            return FusedStream(np.full(len(fused), fused.ids[0]), fused.scores, fused.contributions)
        return FusedStream(fused.ids, fused.scores, np.zeros((len(fused), len(streams) + 1)))


def test_index_search_refuses_contributions_for_the_wrong_streams(index: Index) -> None:
    """The engine's own check, which the next test expects run_arm to share."""
    with pytest.raises(ScorerOutputError, match="'misshapen'"):
        index.search("apple", 3, MisshapenFuser("columns"), *TWO_STREAMS, depth=5)


def test_run_arm_refuses_contributions_for_the_wrong_streams(snapshot: Snapshot) -> None:
    with pytest.raises(ScorerOutputError, match="'misshapen'"):
        run(snapshot, Arm("a", TWO_STREAMS, MisshapenFuser("columns"), depth=5), 3)


def test_a_fuser_returning_the_same_document_twice_raises(snapshot: Snapshot) -> None:
    with pytest.raises(ScorerOutputError, match="'misshapen'"):
        run(snapshot, Arm("a", TWO_STREAMS, MisshapenFuser("repeat"), depth=5), 3)


def test_one_stream_passes_through_without_the_fuser(index: Index, snapshot: Snapshot) -> None:
    """A broken fuser is never called for one scorer; run_arm and Index.search agree on raw scores."""
    arm = Arm("a", (BM25Scorer(),), MisshapenFuser("columns"), depth=5)
    got = run(snapshot, arm, 3)
    for qid, query in QUERIES.items():
        raw = BM25Scorer().score(snapshot, query, 5)
        expected = index.search(query, 3, arm.fuser, *arm.scorers, depth=5)
        assert expected.fuser == "passthrough"
        assert got.keys[qid] == tuple(expected.keys)
        assert got.scores[qid].tolist() == expected.scores.tolist() == sorted(raw.scores.tolist())[::-1][:3]


# ---------------------------------------------------------------------------- parameters


def test_depth_below_k_is_refused(snapshot: Snapshot) -> None:
    arm = Arm("a", (BM25Scorer(),), RRF(), depth=5)
    with pytest.raises(InvalidParameterError, match=r"depth \(5\) must be at least k \(6\)"):
        run_arm(StreamCache(snapshot), arm, QUERIES, 6)
    with pytest.raises(InvalidParameterError, match=r"depth \(3\) must be at least k \(4\)"):
        run_arm(StreamCache(snapshot), arm, QUERIES, 4, depth=3)
    # depth == k is allowed, and an override may raise the arm's depth above k.
    assert run_arm(StreamCache(snapshot), arm, QUERIES, 5).k == 5
    assert run_arm(StreamCache(snapshot), arm, QUERIES, 8, depth=8).description["depth"] == 8


@pytest.mark.parametrize("k", [0, -2, True, 1.5])
def test_a_bad_k_is_refused(snapshot: Snapshot, k: object) -> None:
    with pytest.raises(InvalidParameterError, match="k must be a positive integer"):
        run_arm(StreamCache(snapshot), Arm("a", (BM25Scorer(),), RRF()), QUERIES, k)  # type: ignore[arg-type]


@pytest.mark.parametrize("depth", [0, -1, True])
def test_a_bad_depth_override_is_refused(snapshot: Snapshot, depth: object) -> None:
    with pytest.raises(InvalidParameterError, match="depth must be a positive integer"):
        run_arm(StreamCache(snapshot), Arm("a", (BM25Scorer(),), RRF()), QUERIES, 1, depth=depth)  # type: ignore[arg-type]


def test_a_fuser_override_is_used_and_recorded(index: Index) -> None:
    bm25 = BM25Scorer()
    arm = Arm("a", (bm25, RecencyScorer(half_life=200.0)), RRF(), depth=10, notes="n")
    override: Fuser = ScoreFusion([1.0, 3.0], norm="zscore")
    got = run_arm(StreamCache(index.snapshot()), arm, QUERIES, 5, fuser=override)
    assert got.description["fuser"] == {
        "name": "score-zscore",
        "repr": "ScoreFusion(weights=[1.0, 3.0], norm='zscore')",
    }
    assert got.description["scorers"] == arm.describe()["scorers"]
    assert got.description["notes"] == "n"
    assert arm.describe()["fuser"] == {"name": "rrf", "repr": "RRF(k=60)"}  # the arm is unchanged
    for qid, query in QUERIES.items():
        expected = index.search(query, 5, override, *arm.scorers, depth=10)
        assert got.keys[qid] == tuple(expected.keys)
        assert got.scores[qid].tolist() == expected.scores.tolist()
    # Without an override, the description is the arm's own.
    assert run_arm(StreamCache(index.snapshot()), arm, QUERIES, 5).description == arm.describe()


# ---------------------------------------------------------------------------- inputs (missing_input)


def vector_index(with_vectors: bool) -> Index:
    index = Index("english", vector_dim=2)
    for n, (key, text) in enumerate(TEXTS.items()):
        vector = np.array([1.0, float(n)], dtype=np.float32) if with_vectors else None
        index.add(Document(key=key, text=text, vector=vector))
    return index


def test_an_arm_whose_scorer_has_no_input_for_any_query_is_refused_naming_it() -> None:
    from weftsearch.errors import MissingInputError
    from weftsearch.scorers import VectorScorer

    vectorless = vector_index(with_vectors=False).snapshot()
    queries = {
        "a": Query(text="apple", vector=np.ones(2, dtype=np.float32)),
        "b": Query(text="fig", vector=np.ones(2, dtype=np.float32)),
    }
    for arm in (
        Arm("vec", (VectorScorer(),), RRF(), depth=5),
        Arm("hybrid", (BM25Scorer(), VectorScorer()), RRF(), depth=5),
    ):
        with pytest.raises(
            MissingInputError, match=rf"arm '{arm.name}': scorer 'vector' .*vectors in the index"
        ):
            run(vectorless, arm, 3, queries)
    # Query vectors missing for every query: refused, naming them.
    with_vectors = vector_index(with_vectors=True).snapshot()
    textual = {"a": Query(text="apple"), "b": Query(text="fig")}
    with pytest.raises(MissingInputError, match=r"arm 'vec': scorer 'vector' .* a query vector"):
        run(with_vectors, Arm("vec", (VectorScorer(),), RRF(), depth=5), 3, textual)
    # No links, no times: the graph and recency arms are refused too.
    plain = Index("english")
    plain.add_many(Document(key=key, text=text) for key, text in TEXTS.items())
    with pytest.raises(MissingInputError, match="links in the index"):
        run(plain.snapshot(), Arm("g", (GraphScorer(seed_scorer=BM25Scorer()),), RRF(), depth=5), 3, textual)
    with pytest.raises(MissingInputError, match="document times in the index"):
        run(plain.snapshot(), Arm("r", (RecencyScorer(half_life=60.0),), RRF(), depth=5), 3, textual)
    # A scorer without missing_input is judged by its streams: empty for every query is no input.
    silent = FixedScorer("silent", {})
    with pytest.raises(MissingInputError, match=r"scorer 'silent' .*candidates"):
        run(plain.snapshot(), Arm("s", (BM25Scorer(), silent), RRF(), depth=5), 3, textual)


def test_partial_inputs_are_counted_per_stream() -> None:
    from weftsearch.scorers import VectorScorer

    snapshot = vector_index(with_vectors=True).snapshot()
    queries = {
        "a": Query(text="apple", vector=np.ones(2, dtype=np.float32)),
        "b": Query(text="fig"),
        "c": Query(text="grape", vector=np.array([0.0, 1.0], dtype=np.float32)),
    }
    got = run(snapshot, Arm("hybrid", (BM25Scorer(), VectorScorer()), RRF(), depth=5), 3, queries)
    assert [c.describe() for c in got.coverage] == [
        "bm25: 3/3 queries have an input",
        "vector: 2/3 queries have a query vector",
    ]
    assert [c.signal for c in got.partial_coverage()] == ["vector"]
    assert got.keys["b"]  # the query without a vector still ranks by BM25


def test_a_filtered_arm_runs_its_own_streams_beside_the_unfiltered_one() -> None:
    index = Index()
    index.add_many(
        [
            Document(f"d{i:02d}", "alpha beta" if i % 2 else "alpha", fields={"year": 1990 + i % 5})
            for i in range(30)
        ],
        progress=False,
    )
    snapshot = index.snapshot()
    cache = StreamCache(snapshot)
    queries = {"q1": Query("alpha"), "q2": Query("alpha beta")}
    bm25 = BM25Scorer()
    plain = run_arm(cache, Arm("plain", (bm25,), RRF()), queries, 10)
    recent = run_arm(cache, Arm("recent", (bm25,), RRF(), filter="year >= 1993"), queries, 10)
    again = run_arm(cache, Arm("plain2", (bm25,), RRF()), queries, 10)
    assert again.keys == plain.keys  # the filtered arm did not overwrite the cached unfiltered streams
    allowed = {
        d.key
        for d in (snapshot.document(i) for i in range(snapshot.n_docs))
        if cast(int, d.fields["year"]) >= 1993
    }
    for qid in queries:
        assert recent.keys[qid] and set(recent.keys[qid]) <= allowed
        assert len(recent.keys[qid]) == 10
        # What Index.search returns for the filtered query, exactly.
        direct = index.search(Query(queries[qid].text, filter="year >= 1993"), 10, RRF(), bm25)
        assert recent.keys[qid] == tuple(direct.keys)
