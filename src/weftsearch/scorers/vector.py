"""Cosine similarity between the query vector and the stored vectors, exact or through IVF lists."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from weftsearch.engine.kernels import RowKernel, ScanKernel, inner_products
from weftsearch.engine.query import Query
from weftsearch.engine.snapshot import Snapshot, VectorBlock
from weftsearch.engine.stream import Stream, at_least_kth, check_k
from weftsearch.errors import VectorDimensionError

__all__ = ["VectorScorer", "DEFAULT_NPROBE"]

#: Lists probed per segment by default (segments below the IVF floor are scanned exactly).
DEFAULT_NPROBE = 20


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
        views.append(_Scannable(block, RowKernel(block.matrix), scan, norms, rows, list_rows))
    return views


class VectorScorer:
    """Cosine similarity between the query vector and the stored vectors, exact or through IVF lists.

    ``nprobe`` (default :data:`DEFAULT_NPROBE`) is how many IVF lists of each
    partitioned segment are read; ``nprobe=None`` scans every vector (exact).
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

    The dot products go through :func:`~weftsearch.engine.kernels.inner_products`
    (faiss's row-wise SIMD kernel), not a BLAS matrix-vector product: BLAS
    picks kernels by block shape, so the same row can come out a bit different
    depending on which rows share its block, and a merge or reopen would then
    change scores in the last bit. The kernel computes each row on its own, so
    a document's score never depends on the segment it sits in or on which
    lists were probed with it. Norms are computed once per segment.

    Raises:
        InvalidParameterError: ``nprobe`` is not a positive integer or ``None``.

    """

    def __init__(self, *, nprobe: int | None = DEFAULT_NPROBE, name: str = "vector") -> None:
        if nprobe is not None:
            nprobe = check_k(nprobe, "nprobe")
        self.nprobe = nprobe
        self._name = name

    @property
    def name(self) -> str:
        """Label in explanations (``"vector"`` by default)."""
        return self._name

    def __repr__(self) -> str:
        return f"VectorScorer(nprobe={self.nprobe})"

    def missing_input(self, snapshot: Snapshot, query: Query) -> str | None:
        """What this scorer lacks for ``query``: ``"a query vector"``, ``"vectors in the index"`` or ``None``.

        The optional input protocol (docs/ARCHITECTURE.md, "Adding a
        scorer"); the evaluation harness reads it, the engine never does.
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
            return self._score_filtered(snapshot, views, query.vector / norm, allowed, k)
        only = views[0].scan if len(views) == 1 else None
        if only is not None and snapshot.ids_follow_keys:
            # One compiled call: probe, score, keep the k best and their ties,
            # sorted by score then id, which is key order in one segment.
            lists = views[0].block.lists_to_probe(self.nprobe)
            return Stream.adopt(*only(query.vector, norm, lists, k, first=k))
        unit_query = query.vector / norm  # Query keeps float32 vectors: float32, contiguous
        id_parts: list[NDArray[np.int64]] = []
        score_parts: list[NDArray[np.float64]] = []
        for view in views:
            if view.scan is not None:
                ids, scores = view.scan(query.vector, norm, view.block.lists_to_probe(self.nprobe), k)
                id_parts.append(ids)
                score_parts.append(scores)
                continue
            # The numpy path: the same rules, step by step (no compiled scan, or a layout it does not read).
            chosen = None if self.nprobe is None else view.block.nearest_lists(unit_query, self.nprobe)
            if chosen is None:
                rows = view.rows
            else:
                rows = np.concatenate([view.list_rows[position] for position in chosen.tolist()])
            # One kernel for every path and every row (see weftsearch.engine.kernels),
            # so a document's score does not depend on which rows were read with it.
            similarity = view.kernel(unit_query, rows)
            np.divide(similarity, view.norms[rows], out=similarity)
            if rows.shape[0] > k:  # only the k best and their ties leave the block
                keep = at_least_kth(similarity, k)
                rows, similarity = rows[keep], similarity[keep]
            id_parts.append(view.block.ids[rows])
            score_parts.append(similarity.astype(np.float64))
        if not id_parts:
            return Stream.empty()
        ids = id_parts[0] if len(id_parts) == 1 else np.concatenate(id_parts)
        if ids.size == 0:
            return Stream.empty()
        scores = score_parts[0] if len(score_parts) == 1 else np.concatenate(score_parts)
        return Stream.ranked(ids, scores, k, snapshot)  # canonical by construction: not re-checked

    def _score_filtered(
        self,
        snapshot: Snapshot,
        views: list[_Scannable],
        unit_query: NDArray[np.float32],
        allowed: NDArray[np.bool_],
        k: int,
    ) -> Stream:
        """:meth:`score` under a filter: only matching rows are candidates, before the top k.

        The plan, per segment (the filter decides it, not a guess):

        * **exact** when the scorer is exact (``nprobe=None``), the segment has
          no lists, or the matching rows are no more than the rows the probe
          would read (``nprobe`` lists of average size): every matching row is
          scored, so recall is 1 and the cost is O(matching rows * dim);
        * **probed** otherwise: lists in order of closeness to the query, the
          ``nprobe`` nearest first, then on past ``nprobe`` until the lists read
          hold at least ``k`` matching rows (or every list was read: a segment
          with ``k`` matching rows always yields ``k``). Only matching rows of
          the probed lists are scored.

        Scores are the same kernel's as the unfiltered path's, to the bit.
        """
        id_parts: list[NDArray[np.int64]] = []
        score_parts: list[NDArray[np.float64]] = []
        for view in views:
            block = view.block
            matching = allowed[block.ids[view.rows]]  # view.rows are live rows: ids >= 0
            if not bool(matching.any()):
                continue
            probe = block.lists_to_probe(self.nprobe)
            nlist = len(view.list_rows)
            if not probe or not nlist or int(matching.sum()) * nlist <= probe * view.rows.shape[0]:
                rows = view.rows[matching]
            else:
                rows = _probe_until(view, unit_query, matching, probe, k)
            similarity = view.kernel(unit_query, rows)
            np.divide(similarity, view.norms[rows], out=similarity)
            if rows.shape[0] > k:
                keep = at_least_kth(similarity, k)
                rows, similarity = rows[keep], similarity[keep]
            id_parts.append(block.ids[rows])
            score_parts.append(similarity.astype(np.float64))
        if not id_parts:
            return Stream.empty()
        ids = np.concatenate(id_parts)
        scores = np.concatenate(score_parts)
        return Stream.ranked(ids, scores, k, snapshot)


def _probe_until(
    view: _Scannable, unit_query: NDArray[np.float32], matching: NDArray[np.bool_], nprobe: int, k: int
) -> NDArray[np.int64]:
    """The matching rows of the lists nearest ``unit_query``: ``nprobe`` lists, then more until ``k`` rows.

    Lists rank as :meth:`VectorBlock.nearest_lists` ranks them (closeness
    descending, the lower list first on ties), with lists whose closeness is
    NaN last. O(nlist * dim + nlist log nlist) plus the rows gathered.
    """
    block = view.block
    assert block.centroids is not None
    nlist = len(view.list_rows)
    closeness = inner_products(block.centroids, unit_query, np.arange(nlist, dtype=np.int64))
    ranked_key = np.where(np.isnan(closeness), np.inf, -closeness.astype(np.float64))
    order = np.lexsort((np.arange(nlist), ranked_key))
    # Matching rows per list: view.list_rows split view.rows into consecutive runs.
    sizes = np.array([rows.shape[0] for rows in view.list_rows], dtype=np.int64)
    bounds = np.concatenate(([0], np.cumsum(sizes)))
    running = np.concatenate(([0], np.cumsum(matching)))
    per_list = running[bounds[1:]] - running[bounds[:-1]]
    gathered = np.cumsum(per_list[order])
    enough = int(np.searchsorted(gathered, k, side="left")) + 1  # lists needed for k matching rows
    take = order[: min(nlist, max(nprobe, enough))]
    runs = [
        view.list_rows[position][matching[bounds[position] : bounds[position + 1]]]
        for position in np.sort(take).tolist()
    ]
    return np.concatenate(runs) if runs else np.empty(0, dtype=np.int64)
