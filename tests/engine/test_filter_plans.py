"""The filtered vector probe's budget, the streams it cuts short, and the plan explain shows.

One partitioned segment (IVF lists) whose documents carry a field tied to their
cluster (so a filter can put every matching row in lists far from the query,
which a probe must go past ``nprobe`` to reach) and a uniform one (any
selectivity). The oracle is the exact filtered ranking: ``VectorScorer(nprobe=None)``
over the matching rows, whose correctness tests/engine/test_filtered_search.py
checks against brute force.
"""

from __future__ import annotations

import itertools
import pickle
from typing import Any, cast

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import weftsearch.scorers.vector as vector_module
from weftsearch import RRF, BM25Scorer, Document, Index, Query, Stream, VectorScorer
from weftsearch.cli import format_results
from weftsearch.engine.filters import F, Filter
from weftsearch.engine.search import SearchResults, search_snapshot
from weftsearch.engine.snapshot import Snapshot
from weftsearch.errors import FilterTypeError, InvalidParameterError
from weftsearch.native import scan as kernels
from weftsearch.scorers.vector import PLAN_KEYS
from weftsearch.storage.ivf import IVF_MIN_VECTORS

CLUSTERS = 40
DIM = 8


def _documents(seed: int) -> list[Document]:
    rng = np.random.default_rng(seed)
    n = IVF_MIN_VECTORS + 400
    centres = rng.normal(size=(CLUSTERS, DIM)).astype(np.float32)
    cluster = rng.integers(0, CLUSTERS, n)
    vectors = centres[cluster] + 0.1 * rng.normal(size=(n, DIM)).astype(np.float32)
    uniform = rng.integers(0, 1000, n)
    return [
        Document(
            f"d{i:05d}",
            "alpha beta" if i % 3 else "gamma",
            vector=vectors[i],
            fields={"cluster": int(cluster[i]), "u": int(uniform[i])},
        )
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def snapshot() -> Snapshot:
    index = Index("english", vector_dim=DIM)
    index.add_many(_documents(5), progress=False)
    snap = index.snapshot()
    assert snap.vector_blocks()[0].centroids is not None, "the tests need a partitioned segment"
    return snap


FILTERS = st.one_of(
    st.integers(1, 999).map(lambda t: F("u") < t),
    st.lists(st.integers(0, CLUSTERS - 1), min_size=1, max_size=3, unique=True).map(
        lambda cs: F("cluster").isin(cs)
    ),
    st.tuples(st.integers(0, CLUSTERS - 1), st.integers(1, 999)).map(
        lambda p: (F("cluster") == p[0]) & (F("u") < p[1])
    ),
)


def _exact(snapshot: Snapshot, query: Query, k: int) -> Stream:
    return VectorScorer(nprobe=None).score(snapshot, query, k)


def _matching(snapshot: Snapshot, query: Query) -> int:
    mask = snapshot.allowed(query)
    assert mask is not None
    return int(mask.sum())  # every document has a non-zero vector here


SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@SETTINGS
@given(
    flt=FILTERS,
    seed=st.integers(0, 2**32 - 1),
    k=st.integers(1, 60),
    nprobe=st.sampled_from([1, 2, 5]),
)
def test_without_a_budget_hit_a_filtered_probe_returns_min_k_matching_with_exact_scores(
    snapshot: Snapshot, flt: Filter, seed: int, k: int, nprobe: int
) -> None:
    rng = np.random.default_rng(seed)
    query = Query(vector=rng.normal(size=DIM).astype(np.float32), filter=flt)
    matching = _matching(snapshot, query)
    exact = _exact(snapshot, query, k)
    got = VectorScorer(nprobe=nprobe, probe_budget=None).score(snapshot, query, k)
    assert got.complete
    assert len(got) == min(k, matching)  # issue 15: never fewer than k where k match
    _, in_got, in_exact = np.intersect1d(got.ids, exact.ids, return_indices=True)
    assert got.scores[in_got].tobytes() == exact.scores[in_exact].tobytes()
    # A budget that covers every matching row is no budget at all.
    roomy = VectorScorer(nprobe=nprobe, probe_budget=max(matching, 1)).score(snapshot, query, k)
    assert roomy.complete and roomy.ids.tolist() == got.ids.tolist()
    # Asked for every matching document, the probe must read every list holding one: exact.
    everything = VectorScorer(nprobe=nprobe, probe_budget=None).score(snapshot, query, max(matching, 1))
    full = _exact(snapshot, query, max(matching, 1))
    assert everything.ids.tolist() == full.ids.tolist()
    assert everything.scores.tobytes() == full.scores.tobytes()


def _expected_plan(
    snapshot: Snapshot, query: Query, nprobe: int, budget: int | None, k: int
) -> tuple[str, int, int, bool]:
    """What the probe must do, worked out here from the block's own arrays: (path, lists, rows, cut)."""
    block = snapshot.vector_blocks()[0]
    assert block.centroids is not None and block.list_offsets is not None and query.vector is not None
    mask = snapshot.allowed(query)
    assert mask is not None
    nlist = block.centroids.shape[0]
    offsets = block.list_offsets.astype(np.int64)
    live = block.ids >= 0
    matching_per_list = np.array(
        [int(mask[block.ids[a:b][live[a:b]]].sum()) for a, b in itertools.pairwise(offsets)]
    )
    total = int(matching_per_list.sum())
    rows = int(live.sum())
    if not total:
        return "none", 0, 0, False
    if total * nlist <= vector_module.EXACT_SCAN_FACTOR * nprobe * rows:
        return "exact", 0, total, False
    unit = query.vector / np.sqrt(query.vector.dot(query.vector))
    every = np.arange(nlist, dtype=np.int64)
    closeness = kernels.inner_products(block.centroids, unit, every).astype(np.float64)
    order = np.lexsort((np.arange(nlist), -closeness))
    read, lists, wanted = 0, 0, min(k, total)
    usable_per_list = np.array([int(live[a:b].sum()) for a, b in itertools.pairwise(offsets)])
    # As many matching rows as the unfiltered probe would score (its nprobe nearest lists' rows).
    target = max(wanted, min(total, int(usable_per_list[order[:nprobe]].sum())))
    for position in order:
        if lists >= nprobe and read >= target:
            break
        size = int(matching_per_list[position])
        if lists >= nprobe and budget is not None and read + size > budget:
            if budget > read:  # the crossing list is read in part, up to the budget
                lists, read = lists + 1, budget
            return "probed", lists, read, read < wanted
        read += size
        lists += 1
    return "probed", lists, read, False


@SETTINGS
@given(
    flt=FILTERS,
    seed=st.integers(0, 2**32 - 1),
    k=st.integers(1, 60),
    nprobe=st.sampled_from([1, 3]),
    budget=st.integers(1, 80),
)
def test_a_tiny_budget_is_reported_exactly_when_it_leaves_fewer_than_min_k_matching(
    snapshot: Snapshot, flt: Filter, seed: int, k: int, nprobe: int, budget: int
) -> None:
    rng = np.random.default_rng(seed)
    query = Query(vector=rng.normal(size=DIM).astype(np.float32), filter=flt)
    matching = _matching(snapshot, query)
    scorer = VectorScorer(nprobe=nprobe, probe_budget=budget)
    results = search_snapshot(snapshot, query, k, RRF(), [scorer])
    short = len(results) < min(k, matching)
    assert results.cut_short == (("vector",) if short else ())
    # The plan is what ran: the path, the lists, the rows and the stop, worked out independently.
    plan = results.plans["vector"]
    assert plan is not None and tuple(plan) == PLAN_KEYS
    path, lists, rows, cut = _expected_plan(snapshot, query, nprobe, budget, k)
    assert plan["path"] == path and plan["matching_rows"] == matching and plan["budget"] == budget
    if path == "none":
        assert plan["segments"] == 0 and len(results) == 0
    elif path == "exact":
        assert plan["rows_scanned"] == rows and plan["exact_segments"] == 1 and plan["probed_segments"] == 0
    else:
        assert plan["probed_segments"] == 1 and plan["lists_probed"] == lists and plan["rows_read"] == rows
        assert plan["extra_lists"] == max(0, lists - nprobe) and plan["nprobe"] == nprobe
        assert plan["budget_stops"] == int(cut)
        if lists > nprobe:
            assert rows <= budget  # past the nprobe nearest, never over the budget
    assert short == cut  # cut short exactly when the budget stopped the probe before min(k, matching)
    assert len(results) == min(k, rows)
    # Whatever the budget, every score is the exact cosine (a cut changes who, never how much).
    stream = scorer.score(snapshot, query, k)
    exact = _exact(snapshot, query, max(matching, 1))
    _, in_got, in_exact = np.intersect1d(stream.ids, exact.ids, return_indices=True)
    assert in_got.shape[0] == len(stream)
    assert stream.scores[in_got].tobytes() == exact.scores[in_exact].tobytes()


def test_a_far_cluster_filter_with_a_small_budget_is_cut_short_and_explained(snapshot: Snapshot) -> None:
    block = snapshot.vector_blocks()[0]
    assert block.centroids is not None
    query_vector = np.asarray(block.centroids[0], dtype=np.float32)
    # The cluster whose documents are least like the query: a probe reaches them last.
    docs = _documents(5)
    by_cluster: dict[int, list[np.ndarray]] = {}
    for document in docs:
        assert document.vector is not None
        by_cluster.setdefault(cast(int, document.fields["cluster"]), []).append(document.vector)
    far = sorted(by_cluster, key=lambda c: float(np.mean(by_cluster[c], axis=0) @ query_vector))[:3]
    query = Query(vector=query_vector, filter=F("cluster").isin(far))
    matching = _matching(snapshot, query)
    block_rows = snapshot.vector_blocks()[0].ids.shape[0]
    assert matching * block.centroids.shape[0] > block_rows, "too few matching rows to be probed"
    roomy = search_snapshot(snapshot, query, 50, RRF(), [VectorScorer(nprobe=1)])
    assert isinstance(roomy, SearchResults)
    assert len(roomy) == 50 and roomy.cut_short == ()
    plan = roomy.plans["vector"]
    assert plan is not None and plan["path"] == "probed" and int(plan["extra_lists"] or 0) >= 1
    tight = search_snapshot(snapshot, query, 50, RRF(), [VectorScorer(nprobe=1, probe_budget=10)])
    assert len(tight) < 50 and tight.cut_short == ("vector",)
    assert tight.plans["vector"]["budget_stops"] == 1  # type: ignore[index]
    # Fused with BM25, the cut-short signal is still named, and the plans go through to_dict.
    hybrid = search_snapshot(
        snapshot, query, 10, RRF(), [BM25Scorer(), VectorScorer(nprobe=1, probe_budget=10)], depth=50
    )
    assert hybrid.cut_short == ("vector",)
    as_dict = hybrid.to_dict()
    assert as_dict["cut_short"] == ["vector"] and as_dict["plans"]["vector"]["budget"] == 10
    text = format_results(hybrid, explain=True)
    assert "plan vector: probed" in text and "CUT SHORT by its budget" in text


def test_plans_describe_unfiltered_searches_too(snapshot: Snapshot) -> None:
    vector = np.ones(DIM, dtype=np.float32)
    probed = search_snapshot(snapshot, Query(vector=vector), 5, RRF(), [VectorScorer(nprobe=3)])
    plan = probed.plans["vector"]
    assert plan is not None and plan["path"] == "probed" and plan["lists_probed"] == 3
    assert plan["matching_rows"] is None and plan["extra_lists"] == 0 and probed.cut_short == ()
    exact = search_snapshot(snapshot, Query(vector=vector), 5, RRF(), [VectorScorer(nprobe=None)])
    plan = exact.plans["vector"]
    assert plan is not None and plan["path"] == "exact" and plan["rows_scanned"] == snapshot.n_docs


def test_probe_budget_is_checked() -> None:
    for bad in (0, -1, 1.5, True, 10**7):
        with pytest.raises(InvalidParameterError, match="probe_budget"):
            VectorScorer(probe_budget=bad)  # type: ignore[arg-type]
    assert VectorScorer(probe_budget=None).probe_budget is None


def test_the_filtered_scan_is_the_compiled_kernel_and_the_numpy_path_agrees_to_the_bit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    documents = _documents(9)
    queries = [
        Query(vector=np.random.default_rng(i).normal(size=DIM).astype(np.float32), filter=flt)
        for i, flt in enumerate([F("u") < 5, F("u") < 300, F("cluster").isin([1, 2]), F("u") >= 10])
    ]

    def run() -> list[tuple[list[int], bytes, Any]]:
        index = Index("english", vector_dim=DIM)
        index.add_many(documents[:2000], progress=False)
        index.snapshot()
        index.add_many(documents[2000:], progress=False)  # two segments, one partitioned
        snap = index.snapshot()
        out = []
        for query in queries:
            scorers = (
                VectorScorer(nprobe=2),
                VectorScorer(nprobe=None),
                VectorScorer(nprobe=2, probe_budget=5),
            )
            for scorer in scorers:
                stream = scorer.score(snap, query, 17)
                out.append((stream.ids.tolist(), stream.scores.tobytes(), (stream.plan, stream.complete)))
        return out

    assert kernels._compiled_rows_scan() is not None, "the compiled row scan should be built here"
    compiled = run()
    monkeypatch.setenv(kernels.DISABLE_VARIABLE, "1")
    kernels._compiled_scan.cache_clear()
    kernels._compiled_rows_scan.cache_clear()
    try:
        assert kernels._compiled_rows_scan() is None
        assert run() == compiled
    finally:
        monkeypatch.delenv(kernels.DISABLE_VARIABLE)
        kernels._compiled_scan.cache_clear()
        kernels._compiled_rows_scan.cache_clear()


def test_the_row_scan_refuses_rows_out_of_order_or_range() -> None:
    matrix = np.random.default_rng(0).normal(size=(10, 4)).astype(np.float32)
    norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix, dtype=np.float32))
    kernel = kernels.ScanKernel.for_block(matrix, norms, np.arange(10, dtype=np.int64), None, None)
    assert kernel is not None and kernel.scans_rows
    query = np.ones(4, dtype=np.float32)
    norm = np.sqrt(query.dot(query))
    for bad in ([3, 2], [1, 1], [-1], [10], list(range(11))):
        with pytest.raises(InvalidParameterError, match="strictly ascending"):
            kernel.rows(query, norm, np.array(bad, dtype=np.int64), 3)
    ids, scores = kernel.rows(query, norm, np.array([], dtype=np.int64), 3)
    assert ids.size == 0 and scores.size == 0


def test_stream_plans_are_checked_copied_and_survive_a_copy() -> None:
    plan: dict[str, Any] = {"path": "mine", "rows": 3}
    stream = Stream([1, 2], [2.0, 1.0], plan=plan, complete=False)
    plan["rows"] = 99
    assert stream.plan == {"path": "mine", "rows": 3} and not stream.complete
    assert stream.head(1).plan == stream.plan and not stream.head(1).complete
    copy = pickle.loads(pickle.dumps(stream))
    assert copy.plan == stream.plan and copy.complete is False
    for bad in ({"x": [1]}, {1: "x"}, ["x"]):
        with pytest.raises(InvalidParameterError, match="plan"):
            Stream([1], [1.0], plan=bad)  # type: ignore[arg-type]


class _Budgeted:
    """A user's scorer with a budget of its own: the engine reports it without knowing its type."""

    name = "mine"

    def score(self, snapshot: Snapshot, query: Query, k: int) -> Stream:
        return Stream([0], [1.0], plan={"path": "mine", "visited": 1}, complete=False)


def test_any_scorer_can_report_its_plan_and_a_cut_short(snapshot: Snapshot) -> None:
    results = search_snapshot(snapshot, Query(text="alpha"), 5, RRF(), [BM25Scorer(), _Budgeted()])
    assert results.cut_short == ("mine",)
    assert results.plans["mine"] == {"path": "mine", "visited": 1}


def test_filter_masks_are_type_strict_and_found_by_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    index = Index("english")
    index.add(Document("a", "x", fields={"n": 1, "flag": True}))
    index.add(Document("b", "x", fields={"n": 2, "flag": False}))
    snap = index.snapshot()
    assert snap.filter_mask(F("flag") == True).tolist() == [True, False]  # type: ignore[union-attr]  # noqa: E712
    # 1 == True in Python, so the two filters are equal objects; the cache must not make them one.
    with pytest.raises(FilterTypeError, match="'flag'"):
        snap.filter_mask(F("flag") == 1)
    assert snap.filter_mask(F("n") == 1).tolist() == [True, False]  # type: ignore[union-attr]
    with pytest.raises(FilterTypeError, match="'n'"):
        snap.filter_mask(F("n") == True)  # noqa: E712
    # The same object again is found without printing the tree (what a query's scorers ask).
    node = (F("n") >= 1) & (F("flag") == True)  # noqa: E712
    first = snap.filter_mask(node)
    printed: list[Filter] = []
    original = type(node).to_string

    def counting(self: Filter) -> str:
        printed.append(self)
        return original(self)

    monkeypatch.setattr(type(node), "to_string", counting)
    assert snap.filter_mask(node) is first and printed == []
    assert snap.filter_mask((F("n") >= 1) & (F("flag") == True)) is first and len(printed) == 1  # noqa: E712


def test_filter_strings_are_parsed_once_and_errors_every_time() -> None:
    from weftsearch.engine.filters import PARSE_CACHE_CHARS, parse_filter
    from weftsearch.errors import FilterSyntaxError

    text = "u < 10 and cluster in (1, 2)"
    assert parse_filter(text) is parse_filter(text)
    assert Query(vector=np.ones(DIM, np.float32), filter=text).filter is parse_filter(text)
    for _ in range(2):  # a refused string is refused again, never served from the cache
        with pytest.raises(FilterSyntaxError, match="character 4"):
            parse_filter("u < and")
    long = " or ".join(f"u == {i}" for i in range(PARSE_CACHE_CHARS // 8))
    assert len(long) > PARSE_CACHE_CHARS
    assert parse_filter(long) == parse_filter(long) and parse_filter(long) is not parse_filter(long)


def test_over_several_segments_cut_short_means_fewer_than_min_k_matching() -> None:
    index = Index("english", vector_dim=DIM)
    index.add_many(_documents(21), progress=False)
    index.snapshot()
    index.add_many(
        [Document("z" + d.key, d.text, vector=d.vector, fields=d.fields) for d in _documents(22)],
        progress=False,
    )
    index.add_many(_documents(23)[:500], progress=False)  # replaces some of the first: tombstones
    snap = index.snapshot()
    assert sum(block.centroids is not None for block in snap.vector_blocks()) >= 2
    rng = np.random.default_rng(3)
    seen = set()
    for _ in range(60):
        cs = [int(c) for c in rng.choice(CLUSTERS, int(rng.integers(1, 4)), replace=False)]
        query = Query(vector=rng.normal(size=DIM).astype(np.float32), filter=F("cluster").isin(cs))
        k = int(rng.integers(1, 80))
        results = search_snapshot(
            snap, query, k, RRF(), [VectorScorer(nprobe=1, probe_budget=int(rng.integers(1, 60)))]
        )
        short = len(results) < min(k, _matching(snap, query))
        assert results.cut_short == (("vector",) if short else ())
        plan = results.plans["vector"]
        assert plan is not None and int(plan["budget_stops"] or 0) >= int(short)
        seen.add(short)
    assert seen == {True, False}
