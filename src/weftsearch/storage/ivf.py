"""Inverted-file (IVF) partitions of a segment's vectors: deterministic spherical k-means.

A segment with at least :data:`IVF_MIN_VECTORS` vectors stores them grouped by
partition (list), so that reading one probed list is reading one contiguous
block of the vector matrix, and records each list's unit-length centroid and
row range. What a list *is* belongs to the layout (like a posting list); how
candidates are finally scored is the vector scorer's business.

Training (:func:`train_partitions`) is spherical k-means (centroids are unit
vectors, assignment by largest inner product, which for unit rows is the
nearest centroid by cosine) on a sample of the rows:

* ``nlist = round(sqrt(m) / 2)`` lists for ``m`` vectors (:func:`nlist_for`):
  lists of about ``2 sqrt(m)`` rows, so probing ``nprobe`` lists reads ``nlist``
  centroids plus about ``2 nprobe sqrt(m)`` rows. (Measured on SciFact's MiniLM
  vectors: with ``sqrt(m)`` lists, recall@10 0.99 needed 36 of 72 lists probed;
  with ``sqrt(m) / 2``, 20 of 36. Larger lists keep the default ``nprobe``
  useful on small segments, and 1M vectors still get 500 lists.)
* the sample is ``min(m, TRAIN_PER_LIST * nlist)`` rows drawn without
  replacement by ``numpy.random.PCG64(TRAIN_SEED)``, sorted; the initial
  centroids are ``nlist`` sample rows drawn by the same generator;
* :data:`TRAIN_ITERATIONS` Lloyd iterations; a list left empty takes the sample
  row worst served by its centroid (the lowest index on a tie);
* every row is then assigned to its best centroid (the lowest list index on a
  tie), in chunks of :data:`_ASSIGN_CHUNK` rows.

Nothing is random beyond the seeded generator and every tie has a rule, so the
same vectors give the same partitions, and the same bytes, every time on the
same machine. (The products go through BLAS; a CPU with another SIMD width can
round a near-tie the other way, which moves one row to a neighbouring list.
Recall is unaffected; byte identity across CPU kinds is not promised.)

Why numpy and not faiss's k-means (faiss does compute the scorer's inner
products, :mod:`weftsearch.native.scan`): the partition must be a pure
function of the rows (faiss's clustering is seeded but its multi-threaded
reductions and sampling are its own). The price is measured in
docs/BENCHMARKS.md: training plus assignment take about 1.5-1.8x faiss's time on
1M x 384, once per segment written, outside any lock searches need.

**The floor.** Below :data:`IVF_MIN_VECTORS` a segment is scanned exactly. A
probe of ``nprobe`` of ``sqrt(m) / 2`` lists reads about ``2 nprobe / sqrt(m)`` of
the rows (plus the centroids); asking that this be at most two thirds at the
scorer's default ``nprobe`` gives ``m >= (3 * nprobe)**2``: 3,600 vectors for
the default ``nprobe = 20``. Below that, k-means costs more than it saves
(in-memory segments are partitioned each time the buffer is sealed), and at
search time a segment is scanned exactly whenever the probed lists would hold
more rows than an exact scan reads (:func:`worth_probing`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "IVF_MIN_VECTORS",
    "TRAIN_PER_LIST",
    "TRAIN_ITERATIONS",
    "TRAIN_SEED",
    "Partitions",
    "nlist_for",
    "train_partitions",
    "worth_probing",
]

#: The default ``nprobe`` the floor is derived for (equal to the vector scorer's
#: ``DEFAULT_NPROBE``; a test keeps them equal).
FLOOR_NPROBE = 20

#: Segments with fewer vectors are not partitioned: ``(3 * FLOOR_NPROBE) ** 2``.
IVF_MIN_VECTORS = (3 * FLOOR_NPROBE) ** 2

#: Training rows per list (faiss warns below 39; 64 keeps 1M x 384 training to seconds).
TRAIN_PER_LIST = 64

#: Lloyd iterations.
TRAIN_ITERATIONS = 16

#: Seed of the training sample and of the initial centroids.
TRAIN_SEED = 0

_ASSIGN_CHUNK = 65_536


@dataclass(frozen=True, slots=True)
class Partitions:
    """The result of training: centroids and each row's list.

    Attributes:
        centroids: float32 ``(nlist, dim)``, unit rows.
        assignment: int64 ``(m,)``: the list of each input row.
        sample: how many rows the k-means was trained on.

    """

    centroids: NDArray[np.float32]
    assignment: NDArray[np.int64]
    sample: int

    @property
    def nlist(self) -> int:
        """Number of lists."""
        return int(self.centroids.shape[0])


def nlist_for(vectors: int) -> int:
    """Lists for a segment of ``vectors`` vectors: ``round(sqrt(vectors) / 2)``, at least 1."""
    return max(1, round(math.sqrt(vectors) / 2))


def worth_probing(vectors: int, nlist: int, nprobe: int) -> bool:
    """Whether probing ``nprobe`` of ``nlist`` lists reads fewer rows than scanning all ``vectors``.

    The expected rows read are ``nlist`` centroids plus ``nprobe`` average
    lists; when that is not below ``vectors`` the exact scan is both cheaper
    and exact.
    """
    return nprobe < nlist and nlist + nprobe * vectors / nlist < vectors


def _unit(matrix: NDArray[np.float32]) -> NDArray[np.float32]:
    norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix))
    # float32 / float32 is already float32: no second copy of the matrix.
    scaled = matrix / np.where(norms > 0, norms, 1)[:, None]
    out: NDArray[np.float32] = scaled.astype(np.float32, copy=False)
    return out


def _assign(
    rows: NDArray[np.float32], centroids: NDArray[np.float32]
) -> tuple[NDArray[np.int64], NDArray[np.float32]]:
    """Best list of each row (lowest index on a tie) and the similarity to it."""
    best = np.empty(rows.shape[0], dtype=np.int64)
    similarity = np.empty(rows.shape[0], dtype=np.float32)
    for start in range(0, rows.shape[0], _ASSIGN_CHUNK):
        block = rows[start : start + _ASSIGN_CHUNK] @ centroids.T
        best[start : start + block.shape[0]] = np.argmax(block, axis=1)
        similarity[start : start + block.shape[0]] = block[
            np.arange(block.shape[0]), best[start : start + block.shape[0]]
        ]
    return best, similarity


def train_partitions(matrix: NDArray[np.float32], nlist: int | None = None) -> Partitions:
    """Partition the rows of ``matrix`` into ``nlist`` lists by spherical k-means.

    Args:
        matrix: float32 ``(m, dim)``, ``m >= 1``; rows of zero norm go to list 0's
            side of the argmax like any other (they match every centroid at 0).
        nlist: number of lists; ``None`` means :func:`nlist_for(m) <nlist_for>`.

    Complexity: ``TRAIN_ITERATIONS`` products of ``(sample, dim) x (dim, nlist)``
    plus one ``(m, dim) x (dim, nlist)`` assignment.

    """
    rows = _unit(np.ascontiguousarray(matrix, dtype=np.float32))
    m = rows.shape[0]
    lists = nlist_for(m) if nlist is None else max(1, min(int(nlist), m))
    rng = np.random.Generator(np.random.PCG64(TRAIN_SEED))
    size = min(m, TRAIN_PER_LIST * lists)
    sample_rows = np.sort(rng.choice(m, size=size, replace=False)) if size < m else np.arange(m)
    sample = rows[sample_rows]
    centroids = sample[np.sort(rng.choice(size, size=lists, replace=False))].copy()
    for _ in range(TRAIN_ITERATIONS):
        best, similarity = _assign(sample, centroids)
        counts = np.bincount(best, minlength=lists)
        sums = np.zeros((lists, rows.shape[1]), dtype=np.float64)
        order = np.argsort(best, kind="stable")  # each list sums its rows in row order
        filled = np.flatnonzero(counts)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])[filled]
        sums[filled] = np.add.reduceat(sample[order].astype(np.float64), starts, axis=0)
        for empty in np.flatnonzero(counts == 0).tolist():
            worst = int(np.argmin(similarity))
            sums[empty] = sample[worst]
            similarity[worst] = np.float32(np.inf)  # one row re-seeds one list
        norms = np.sqrt((sums * sums).sum(axis=1))
        centroids = (sums / np.where(norms > 0, norms, 1)[:, None]).astype(np.float32)
    assignment, _ = _assign(rows, centroids)
    centroids.setflags(write=False)
    return Partitions(centroids, assignment, size)
