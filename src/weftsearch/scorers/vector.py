"""Cosine similarity between the query vector and the stored vectors, exact or through IVF lists."""

from __future__ import annotations

import collections
import threading
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from weftsearch.engine.query import Query
from weftsearch.engine.snapshot import Snapshot, VectorBlock
from weftsearch.engine.stream import PlanValue, Stream, at_least_kth, check_k
from weftsearch.errors import VectorDimensionError
from weftsearch.native.scan import RowKernel, ScanKernel, inner_products

__all__ = ["VectorScorer", "DEFAULT_NPROBE", "DEFAULT_PROBE_BUDGET"]

#: Lists probed per segment by default (segments below the IVF floor are scanned exactly).
DEFAULT_NPROBE = 20

#: The most vector rows a filtered probe of one segment scores, by default (see
#: :class:`VectorScorer`, ``probe_budget``). Why rows and not lists: the cost of a probe is
#: the rows whose vectors it reads (a dot product of ``dim`` each), and lists differ in size
#: (k-means lists are uneven) and, under a filter, in how many of their rows match (none to
#: all), so a number of lists bounds nothing. Why this number: 65,536 rows is about 1.6
#: times what an unfiltered ``nprobe=20`` probe reads in a 1,000,000-vector segment (20
#: lists of 2,000 rows), so a filtered probe never costs much more than the unfiltered
#: probe of the largest segments measured; a segment smaller than the budget is never cut.
DEFAULT_PROBE_BUDGET = 65_536

#: The planner's rule under a filter, per partitioned segment: scan the matching rows exactly
#: when they are at most ``EXACT_SCAN_FACTOR`` times the rows an unfiltered probe reads
#: (``nprobe`` lists of average size), else probe. A filtered probe reads lists until it has
#: as many matching rows as the unfiltered probe would score (so the filter never costs it
#: recall): below a ratio of 1 that is every matching row, which the exact scan reads for
#: less (no centroids to rank, no lists to gather) and with recall 1; above it, the probe
#: scores about what the unfiltered probe scores. ``bench/filters.py --crossover``
#: (docs/BENCHMARKS.md, "Filters") measures both sides of the line.
EXACT_SCAN_FACTOR = 1.0

#: Filters whose matching rows the scorer keeps per snapshot (least recently used dropped):
#: the rows are the same for every query with the same filter, and finding them reads the
#: whole segment's ids (about 3 ns a vector), more than scoring a selective filter's rows.
MATCHING_ROWS_CACHED = 4

#: The keys of :attr:`Stream.plan <weftsearch.engine.stream.Stream.plan>` this scorer fills, in order.
PLAN_KEYS = (
    "path",
    "segments",
    "exact_segments",
    "rows_scanned",
    "probed_segments",
    "nprobe",
    "lists_probed",
    "extra_lists",
    "rows_read",
    "budget",
    "budget_stops",
    "matching_rows",
)


@dataclass(frozen=True, slots=True)
class _Scannable:
    """One vector block as this scorer reads it in one snapshot (built once per snapshot).

    ``rows`` are the block's usable rows (live document, non-zero vector), and
    ``list_rows[l]`` the usable rows of IVF list ``l`` (empty tuple without
    lists), so a probe gathers its candidates with one concatenation;
    ``kernel`` is the block's matrix bound to the inner-product kernel, and
    ``scan`` the compiled probe-score-select call over the same arrays
    (``None`` where the numpy path serves: same results, more calls).
    """

    block: VectorBlock
    kernel: RowKernel
    scan: ScanKernel | None
    norms: NDArray[np.float32]
    rows: NDArray[np.int64]
    list_rows: tuple[NDArray[np.int64], ...]
    list_sizes: NDArray[np.int64]


def _scannable(blocks: list[VectorBlock]) -> list[_Scannable]:
    views = []
    for block in blocks:
        if block.norms is not None:
            norms = block.norms
        else:  # a block built by hand: the same row-wise rule as a segment's own norms
            norms = np.sqrt(np.einsum("ij,ij->i", block.matrix, block.matrix, dtype=np.float32))
        rows = np.flatnonzero((block.ids >= 0) & (norms > 0)).astype(np.int64)
        list_rows: tuple[NDArray[np.int64], ...] = ()
        if block.list_offsets is not None:
            cuts = np.searchsorted(rows, block.list_offsets[1:-1].astype(np.int64))
            list_rows = tuple(np.split(rows, cuts))
        scan = ScanKernel.for_block(block.matrix, norms, block.ids, block.centroids, block.list_offsets)
        sizes = np.fromiter((run.shape[0] for run in list_rows), dtype=np.int64, count=len(list_rows))
        views.append(_Scannable(block, RowKernel(block.matrix), scan, norms, rows, list_rows, sizes))
    return views


@dataclass(frozen=True, slots=True)
class _Matching:
    """A filter's usable matching rows in one block: ascending, with where each list's run starts.

    ``rows`` are the block's usable rows the mask allows, ascending (so, by
    construction of :class:`_Scannable`, grouped by list in list order); the
    rows of list ``l`` are ``rows[starts[l] : starts[l + 1]]`` (``starts`` is
    ``[0, len(rows)]`` without lists).
    """

    rows: NDArray[np.int64]
    starts: NDArray[np.int64]


def _matching(view: _Scannable, allowed: NDArray[np.bool_]) -> _Matching:
    """The usable rows of ``view`` that ``allowed`` keeps. O(rows in the block)."""
    keep = allowed[view.block.ids[view.rows]]  # view.rows are live rows: ids >= 0
    rows = view.rows[keep]
    if view.list_rows:
        sizes = np.array([part.shape[0] for part in view.list_rows], dtype=np.int64)
        running = np.concatenate(([0], np.cumsum(keep, dtype=np.int64)))
        starts = running[np.concatenate(([0], np.cumsum(sizes)))]
    else:
        starts = np.array([0, rows.shape[0]], dtype=np.int64)
    return _Matching(rows, starts)


class _MatchingCache:
    """Each recent filter mask's :class:`_Matching` per block (an LRU of :data:`MATCHING_ROWS_CACHED`).

    Keyed by the mask's identity, which is sound: the snapshot hands out one
    read-only mask object per filter (``Snapshot.filter_mask`` caches it), and
    each entry holds its mask, so the identity is never reused while the entry lives.
    """

    def __init__(self) -> None:
        self._entries: collections.OrderedDict[int, tuple[NDArray[np.bool_], list[_Matching]]]
        self._entries = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, views: list[_Scannable], allowed: NDArray[np.bool_]) -> list[_Matching]:
        key = id(allowed)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0] is allowed:
                self._entries.move_to_end(key)
                return entry[1]
        found = [_matching(view, allowed) for view in views]
        if not allowed.flags.writeable:  # a mask that can change is never cached
            with self._lock:
                self._entries[key] = (allowed, found)
                self._entries.move_to_end(key)
                while len(self._entries) > MATCHING_ROWS_CACHED:
                    self._entries.popitem(last=False)
        return found


class VectorScorer:
    """Cosine similarity between the query vector and the stored vectors, exact or through IVF lists.

    ``nprobe`` (default :data:`DEFAULT_NPROBE`) is how many IVF lists of each
    partitioned segment are read; ``nprobe=None`` scans every vector (exact).
    Under a filter (``Query.filter``), a probe goes on past ``nprobe`` lists
    until the lists read hold ``k`` matching rows; ``probe_budget`` (default
    :data:`DEFAULT_PROBE_BUDGET`, in vector rows scored per segment; ``None``:
    no budget) bounds that: past the ``nprobe`` nearest lists, matching rows
    are scored only while the segment's count stays within it (the list
    that crosses it is read in part, so ``k`` up to the budget always comes
    back from the lists the probe reaches). When the
    budget stops a search with fewer than ``min(k, matching documents with a
    vector)`` results, the stream says so (``complete=False``, reported as
    :attr:`SearchResults.cut_short <weftsearch.engine.search.SearchResults.cut_short>`).
    Every stream carries its plan (:data:`PLAN_KEYS`: exact or probed
    segments, rows scanned, lists probed past ``nprobe``, rows read, budget
    stops), which explain shows.
    Segments below the partition floor, or where probing would read no fewer
    rows than a scan, are always scanned exactly
    (:mod:`weftsearch.storage.ivf`). The engine only chooses which rows are
    candidates; the cosine of every candidate is computed here, exactly, so a
    document found by both paths has the same score to the bit. An
    approximate search can miss documents; a merge retrains the partitions
    of the merged segment, so approximate results may change across a merge
    (exact results never do).

    Behaviour at the edges (all documented contract):

    * a query without a vector, or with a vector of zero norm, gives an empty
      stream: the scorer has no opinion, and other streams decide;
    * a query vector whose width differs from the index's raises
      :class:`~weftsearch.errors.VectorDimensionError`;
    * documents without a vector, or with a zero vector, are absent.

    Complexity per query: exact, O(N * dim) multiply-adds in float32 plus O(N)
    selection, one segment's block at a time, straight from the memory map;
    with lists, O(nlist * dim) for the centroids plus the probed rows.

    The dot products go through :func:`~weftsearch.native.scan.inner_products`
    (faiss's row-wise SIMD kernel), not a BLAS matrix-vector product: BLAS
    picks kernels by block shape, so the same row can come out a bit different
    depending on which rows share its block, and a merge or reopen would then
    change scores in the last bit. The kernel computes each row on its own, so
    a document's score never depends on the segment it sits in or on which
    lists were probed with it. Norms are computed once per segment.

    Raises:
        InvalidParameterError: ``nprobe`` or ``probe_budget`` is not a positive
            integer (at most ``MAX_K``) or ``None``.

    """

    def __init__(
        self,
        *,
        nprobe: int | None = DEFAULT_NPROBE,
        probe_budget: int | None = DEFAULT_PROBE_BUDGET,
        name: str = "vector",
    ) -> None:
        if nprobe is not None:
            nprobe = check_k(nprobe, "nprobe")
        if probe_budget is not None:
            probe_budget = check_k(probe_budget, "probe_budget")
        self.nprobe = nprobe
        self.probe_budget = probe_budget
        self._name = name

    @property
    def name(self) -> str:
        """Label in explanations (``"vector"`` by default)."""
        return self._name

    def __repr__(self) -> str:
        return f"VectorScorer(nprobe={self.nprobe}, probe_budget={self.probe_budget})"

    def missing_input(self, snapshot: Snapshot, query: Query) -> str | None:
        """What this scorer lacks for ``query``: ``"a query vector"``, ``"vectors in the index"`` or ``None``.

        The optional input protocol (docs/ARCHITECTURE.md, "Adding a
        scorer"); the evaluation harness and the server read it, and an index with
        an embedder asks it whether to embed the query text.
        O(segments), memoised per snapshot.
        """
        rows = snapshot.memo(
            ("vector.rows",), lambda: sum(int(block.ids.shape[0]) for block in snapshot.vector_blocks())
        )
        if not rows:  # checked first: without them no query vector would help
            return "vectors in the index"
        return "a query vector" if query.vector is None else None

    def score(self, snapshot: Snapshot, query: Query, k: int) -> Stream:
        """The ``k`` documents whose vectors are most similar to ``query.vector``."""
        k = check_k(k)
        if query.vector is None:
            return Stream.empty()
        dim = snapshot.vector_dim
        if dim is not None and query.vector.shape[0] != dim:
            raise VectorDimensionError(
                f"query vector has width {query.vector.shape[0]}; the index holds {dim}"
            )
        # The bits of np.linalg.norm (a float32 dot, then a float32 sqrt), without its dispatch.
        norm = np.sqrt(query.vector.dot(query.vector))
        if norm == 0.0 or dim is None:
            return Stream.empty()
        views = snapshot.memo(("vector.scannable",), lambda: _scannable(snapshot.vector_blocks()))
        allowed = snapshot.allowed(query)
        if allowed is not None:
            return self._score_filtered(snapshot, views, query.vector, norm, allowed, k)
        only = views[0].scan if len(views) == 1 else None
        if only is not None and snapshot.ids_follow_keys:
            # One compiled call: probe, score, keep the k best and their ties,
            # sorted by score then id, which is key order in one segment.
            lists = views[0].block.lists_to_probe(self.nprobe)
            plan = _Plan(self.nprobe, self.probe_budget)
            plan.unfiltered(views[0], lists, None)
            return Stream.adopt(*only(query.vector, norm, lists, k, first=k), plan=plan.done())
        unit_query = query.vector / norm  # Query keeps float32 vectors: float32, contiguous
        id_parts: list[NDArray[np.int64]] = []
        score_parts: list[NDArray[np.float64]] = []
        plan = _Plan(self.nprobe, self.probe_budget)
        for view in views:
            if view.scan is not None:
                lists = view.block.lists_to_probe(self.nprobe)
                plan.unfiltered(view, lists, None)
                ids, scores = view.scan(query.vector, norm, lists, k)
                id_parts.append(ids)
                score_parts.append(scores)
                continue
            # The numpy path: the same rules, step by step (no compiled scan, or a layout it does not read).
            chosen = None if self.nprobe is None else view.block.nearest_lists(unit_query, self.nprobe)
            if chosen is None:
                rows = view.rows
            else:
                rows = np.concatenate([view.list_rows[position] for position in chosen.tolist()])
            plan.unfiltered(view, 0 if chosen is None else int(chosen.shape[0]), int(rows.shape[0]))
            # One kernel for every path and every row (see weftsearch.native.scan),
            # so a document's score does not depend on which rows were read with it.
            similarity = view.kernel(unit_query, rows)
            np.divide(similarity, view.norms[rows], out=similarity)
            if rows.shape[0] > k:  # only the k best and their ties leave the block
                keep = at_least_kth(similarity, k)
                rows, similarity = rows[keep], similarity[keep]
            id_parts.append(view.block.ids[rows])
            score_parts.append(similarity.astype(np.float64))
        if not id_parts:
            return Stream.empty(plan=plan.done())
        ids = id_parts[0] if len(id_parts) == 1 else np.concatenate(id_parts)
        if ids.size == 0:
            return Stream.empty(plan=plan.done())
        scores = score_parts[0] if len(score_parts) == 1 else np.concatenate(score_parts)
        # canonical by construction: not re-checked
        return Stream.ranked(ids, scores, k, snapshot, plan=plan.done())

    def _score_filtered(
        self,
        snapshot: Snapshot,
        views: list[_Scannable],
        vector: NDArray[np.float32],
        norm: np.float32,
        allowed: NDArray[np.bool_],
        k: int,
    ) -> Stream:
        """:meth:`score` under a filter: only matching rows are candidates, before the top k.

        The plan, per segment (the filter decides it, not a guess):

        * **exact** when the scorer is exact (``nprobe=None``), the segment has
          no lists, or the matching rows are no more than
          :data:`EXACT_SCAN_FACTOR` times the rows an unfiltered probe reads
          (``nprobe`` lists of average size): every matching row is scored, so
          recall is 1 and the cost is O(matching rows * dim);
        * **probed** otherwise: lists in order of closeness to the query, the
          ``nprobe`` nearest always, then on past ``nprobe`` until the lists
          read hold as many matching rows as the unfiltered probe would score
          (the rows of its ``nprobe`` nearest lists; at least ``min(k,
          matching rows)``), so a filter never costs recall, as long as the
          matching rows scored stay within ``probe_budget`` (the list that
          would cross it is read in part, its first matching rows in storage
          order up to the budget; none after it). Only matching rows of the
          probed lists are scored; a list without any costs nothing.

        Scores are the same kernel's as the unfiltered path's, to the bit: the
        compiled scan over the chosen rows (``ScanKernel.rows``) where it is
        built, else the numpy path with the same rules. The stream is
        ``complete=False`` exactly when a budget stop left it shorter than
        ``min(k, matching rows)``.
        """
        unit_query = vector / norm
        cache = snapshot.memo(("vector.matching",), _MatchingCache)
        matchings = cache.get(views, allowed)
        plan = _Plan(self.nprobe, self.probe_budget)
        plan.matching_rows = sum(int(m.rows.shape[0]) for m in matchings)
        id_parts: list[NDArray[np.int64]] = []
        score_parts: list[NDArray[np.float64]] = []
        stopped = False
        for view, matching in zip(views, matchings, strict=True):
            count = int(matching.rows.shape[0])
            if not count:
                continue
            block = view.block
            probe = block.lists_to_probe(self.nprobe)
            nlist = len(view.list_rows)
            if not probe or not nlist or count * nlist <= EXACT_SCAN_FACTOR * probe * view.rows.shape[0]:
                rows = matching.rows
                plan.exact(count)
            else:
                rows, lists, cut = _probe_until(view, matching, unit_query, probe, k, self.probe_budget)
                plan.probed(probe, lists, int(rows.shape[0]), cut)
                stopped = stopped or cut
            if view.scan is not None and view.scan.scans_rows:
                ids, scores = view.scan.rows(vector, norm, rows, k)
                id_parts.append(ids)
                score_parts.append(scores)
                continue
            similarity = view.kernel(unit_query, rows)
            np.divide(similarity, view.norms[rows], out=similarity)
            if rows.shape[0] > k:
                keep = at_least_kth(similarity, k)
                rows, similarity = rows[keep], similarity[keep]
            id_parts.append(block.ids[rows])
            score_parts.append(similarity.astype(np.float64))
        found = sum(int(part.shape[0]) for part in id_parts)
        # Short only through a budget stop: every other segment yields min(k, its matching rows).
        complete = not stopped or min(found, k) >= min(k, plan.matching_rows)
        if not id_parts:
            return Stream.empty(plan=plan.done(), complete=complete)
        ids = np.concatenate(id_parts)
        scores = np.concatenate(score_parts)
        return Stream.ranked(ids, scores, k, snapshot, plan=plan.done(), complete=complete)


class _Plan:
    """What one :meth:`VectorScorer.score` call did, gathered segment by segment (see :data:`PLAN_KEYS`)."""

    __slots__ = (
        "budget",
        "budget_stops",
        "exact_segments",
        "extra_lists",
        "lists_probed",
        "matching_rows",
        "nprobe",
        "probed_segments",
        "rows_read",
        "rows_scanned",
    )

    def __init__(self, nprobe: int | None, budget: int | None) -> None:
        self.nprobe = nprobe
        self.budget = budget
        self.exact_segments = 0
        self.rows_scanned = 0
        self.probed_segments = 0
        self.lists_probed = 0
        self.extra_lists = 0
        self.rows_read: int | None = 0
        self.budget_stops = 0
        self.matching_rows: int | None = None

    def exact(self, rows: int) -> None:
        """One segment scanned exactly: ``rows`` rows scored."""
        self.exact_segments += 1
        self.rows_scanned += rows

    def probed(self, nprobe: int, lists: int, rows: int | None, cut: bool) -> None:
        """One segment probed: ``lists`` lists read (``nprobe`` planned), ``rows`` scored, ``cut`` short."""
        self.probed_segments += 1
        self.lists_probed += lists
        self.extra_lists += max(0, lists - nprobe)
        self.rows_read = None if rows is None or self.rows_read is None else self.rows_read + rows
        self.budget_stops += int(cut)

    def unfiltered(self, view: _Scannable, lists: int, rows: int | None) -> None:
        """One segment without a filter: probed with ``lists`` lists, or scanned whole (``lists`` 0).

        ``rows``: the rows scored, when counted (the compiled probe does not
        count them: ``None``; an exact scan reads every usable row).
        """
        if lists:
            self.probed(lists, min(lists, len(view.list_rows)), rows, False)
        else:
            self.exact(int(view.rows.shape[0]))

    def done(self) -> dict[str, PlanValue]:
        """The plan as the flat mapping a stream carries."""
        if self.probed_segments and self.exact_segments:
            path = "exact+probed"
        elif self.probed_segments:
            path = "probed"
        elif self.exact_segments:
            path = "exact"
        else:
            path = "none"
        return {
            "path": path,
            "segments": self.exact_segments + self.probed_segments,
            "exact_segments": self.exact_segments,
            "rows_scanned": self.rows_scanned,
            "probed_segments": self.probed_segments,
            "nprobe": self.nprobe,
            "lists_probed": self.lists_probed,
            "extra_lists": self.extra_lists,
            "rows_read": self.rows_read,
            "budget": self.budget,
            "budget_stops": self.budget_stops,
            "matching_rows": self.matching_rows,
        }


def _probe_until(
    view: _Scannable,
    matching: _Matching,
    unit_query: NDArray[np.float32],
    nprobe: int,
    k: int,
    budget: int | None,
) -> tuple[NDArray[np.int64], int, bool]:
    """The matching rows of the lists nearest ``unit_query``: ``nprobe`` lists, then more as needed.

    Lists rank as :meth:`VectorBlock.nearest_lists` ranks them (closeness
    descending, the lower list first on ties), with lists whose closeness is
    NaN last. Past the ``nprobe`` nearest, lists are read in that order until
    they hold as many matching rows as the ``nprobe`` nearest lists hold rows
    (what the unfiltered probe scores), and at least ``min(k, matching
    rows)``, while the matching rows
    read stay within ``budget`` (``None``: no bound); the list that would
    cross the budget is read in part (its first matching rows in storage
    order, up to the budget), so a probe is cut short only when ``k`` is
    more than the budget (or the ``nprobe`` nearest lists already spent it).

    Returns:
        ``(rows, lists, cut)``: the matching rows to score, ascending; how many
        lists were read; whether the budget stopped the probe short of
        ``min(k, matching rows)`` rows.

    O(nlist * dim + nlist log nlist) plus the rows gathered.

    """
    block = view.block
    assert block.centroids is not None
    nlist = len(view.list_rows)
    closeness = inner_products(block.centroids, unit_query, np.arange(nlist, dtype=np.int64))
    ranked_key = np.where(np.isnan(closeness), np.inf, -closeness.astype(np.float64))
    order = np.lexsort((np.arange(nlist), ranked_key))
    starts = matching.starts
    per_list = starts[1:] - starts[:-1]
    gathered = np.cumsum(per_list[order])
    total = int(matching.rows.shape[0])
    wanted = min(k, total)
    # As many candidates as the unfiltered probe would score (its nprobe nearest lists' rows),
    # so a filter never leaves the probe with fewer candidates than no filter would: recall
    # stays that of the unfiltered probe for about its cost in dot products.
    unfiltered = int(view.list_sizes[order[:nprobe]].sum())
    target = max(wanted, min(total, unfiltered))
    enough = int(np.searchsorted(gathered, target, side="left")) + 1  # lists needed for the target
    take = min(nlist, max(nprobe, enough))
    partial: tuple[int, int] | None = None  # (list, matching rows read of it) when read in part
    if budget is not None and take > nprobe:
        # The whole lists whose matching rows fit the budget (the nprobe nearest are always read),
        # then the list that would cross it, in part: its first matching rows in storage order,
        # up to the budget. So the budget is spent exactly, and k <= budget rows always come back.
        fits = int(np.searchsorted(gathered, budget, side="right"))
        if fits < take:
            take = max(nprobe, fits)
            left = budget - (int(gathered[take - 1]) if take else 0)
            if left > 0 and take < nlist:
                partial = (int(order[take]), left)
    chosen = order[:take].tolist()
    if partial is not None:
        chosen.append(partial[0])
    runs = []
    for position in sorted(chosen):
        run = matching.rows[starts[position] : starts[position + 1]]
        if partial is not None and position == partial[0]:
            run = run[: partial[1]]
        runs.append(run)
    rows = np.concatenate(runs) if runs else np.empty(0, dtype=np.int64)
    return rows, len(chosen), int(rows.shape[0]) < wanted
