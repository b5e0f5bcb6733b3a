"""Exact cosine similarity between the query vector and every stored vector."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from weftsearch.engine.query import Query
from weftsearch.engine.snapshot import Snapshot
from weftsearch.engine.stream import Stream, check_k, top_k
from weftsearch.errors import VectorDimensionError

__all__ = ["VectorScorer"]


def _unit_rows(snapshot: Snapshot) -> tuple[NDArray[np.int64], NDArray[np.float32]]:
    """Ids and L2-normalised rows of the snapshot's vectors; zero rows dropped."""
    block = snapshot.vectors()
    norms = np.linalg.norm(block.matrix, axis=1)
    keep = norms > 0
    unit = np.ascontiguousarray(block.matrix[keep] / norms[keep, None], dtype=np.float32)
    unit.setflags(write=False)
    return block.ids[keep], unit


class VectorScorer:
    """Cosine similarity, computed exactly as one matrix-vector product.

    Behaviour at the edges (all documented contract):

    * a query without a vector, or with a vector of zero norm, gives an empty
      stream: the scorer has no opinion, and other streams decide;
    * a query vector whose width differs from the index's raises
      :class:`~weftsearch.errors.VectorDimensionError`;
    * documents without a vector, or with a zero vector, are absent.

    Complexity per query: O(N * dim) multiply-adds in float32 BLAS, plus O(N)
    selection. The normalised matrix is built once per snapshot.
    """

    def __init__(self, *, name: str = "vector") -> None:
        self._name = name

    @property
    def name(self) -> str:
        """Label in explanations (``"vector"`` by default)."""
        return self._name

    def __repr__(self) -> str:
        return "VectorScorer()"

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
        norm = float(np.linalg.norm(query.vector))
        if norm == 0.0 or dim is None:
            return Stream.empty()
        ids, unit = snapshot.memo(("vector.unit_rows",), lambda: _unit_rows(snapshot))
        if ids.size == 0:
            return Stream.empty()
        similarity = (unit @ (query.vector / np.float32(norm))).astype(np.float64)
        return Stream(*top_k(ids, similarity, k, snapshot))
