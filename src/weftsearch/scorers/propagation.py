"""Score propagation: a seed scorer's candidates re-scored by their linked neighbours' scores.

Cluster-hypothesis score regularisation, after Diaz (2005), "Regularizing ad
hoc retrieval scores", CIKM: documents that are linked should have similar
scores, so each candidate's score is pulled towards the mean score of the
candidates it is linked to, while staying anchored to its own retrieval
score. Unlike :class:`~weftsearch.scorers.graph.GraphScorer`, which ranks
neighbours of a few seeds by hop count, this keeps the seed scorer's evidence
and returns a continuous ordering of the documents the seed scorer found, so
it cannot flood the top with arbitrary neighbours.

The rule, for one query:

1. Candidates: the seed scorer's top ``depth`` documents and their scores
   ``x``. With ``expand=True``, also every document linked to a candidate
   that the seed scorer did not return, with score 0 (off by default).
2. Normalise by min-max over the seed's candidates: ``s0 = (x - min x) /
   (max x - min x)``, so the best is 1 and the last 0; when every score is
   equal, every candidate gets 1. (Min-max, not z-score: the anchor and the
   neighbours' mean must live on one bounded scale whatever the seed scorer's
   scale is, and a z-score's unbounded negative tail would let a low-scored
   neighbour push a document below ones with no neighbours at all.)
3. Iterate ``iterations`` times, from ``s = s0``::

       s(d) <- (1 - a) * s0(d) + a * mean over linked candidates n of s(n)

   A document with no linked candidate keeps ``s0(d)`` (its mean is taken
   as its own score), so isolated documents keep their normalised score and
   the ranking among them is the seed's. One iteration is exactly
   ``(1 - a) s0(d) + a mean s0(n)``; more iterations let scores flow two,
   three... links along, converging (for ``a < 1``) to Diaz's regularised
   solution ``(1 - a) (I - a P)^-1 s0`` with ``P`` the row-normalised
   adjacency of the candidates.

Links count in either direction by default (a citation relates both papers,
and CACM lists each citation from both ends anyway); ``directed=True`` takes
a document's neighbours to be the documents it links to. Links to keys not
in the snapshot are dropped by the snapshot; links to documents outside the
candidate set are ignored unless ``expand``.

The mean is one sparse matrix-vector product per iteration over the
candidates' subgraph (scipy), taken in key order, so the sums (and the last
bit of every score) do not depend on internal ids or merges. Complexity per
query: the seed scorer's cost plus O(depth log depth + iterations * E_c) for
E_c links among the candidates.

This module imports no other scorer: the seed scorer is any object that
implements the Scorer protocol.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from weftsearch.engine.protocols import Scorer
from weftsearch.engine.query import Query
from weftsearch.engine.search import canonical_stream
from weftsearch.engine.snapshot import Snapshot
from weftsearch.engine.stream import Stream, check_k, top_k
from weftsearch.errors import InvalidParameterError, ScorerOutputError

__all__ = ["PropagationScorer"]


def _neighbours(snapshot: Snapshot, directed: bool) -> sp.csr_array:
    """0/1 adjacency, row = from, column = to; both directions (symmetric) unless ``directed``."""
    return snapshot.links() if directed else snapshot.linked()


class PropagationScorer:
    """Re-scores the seed scorer's top ``depth`` by mixing in their linked neighbours' scores.

    Args:
        seed_scorer: the scorer whose stream is re-scored (any Scorer).
        a: weight of the neighbours' mean, in [0, 1] (0.3); 0 returns the
            seed's normalised scores unchanged.
        iterations: rounds of propagation (>= 1; 2).
        depth: how many of the seed scorer's results are candidates (100).
        expand: also score documents linked to a candidate that the seed
            scorer did not return (default off).
        directed: a document's neighbours are the documents it links to only.
        name: label in explanations.

    Raises:
        InvalidParameterError: a seed scorer that is not a Scorer, or a bad parameter.

    """

    def __init__(
        self,
        seed_scorer: Scorer,
        a: float = 0.3,
        iterations: int = 2,
        depth: int = 100,
        *,
        expand: bool = False,
        directed: bool = False,
        name: str = "propagate",
    ) -> None:
        if not isinstance(seed_scorer, Scorer):
            raise InvalidParameterError(f"seed_scorer {seed_scorer!r} is not a Scorer")
        if isinstance(a, bool) or not isinstance(a, (int, float)) or not 0.0 <= a <= 1.0:
            raise InvalidParameterError(f"a must be a number in [0, 1], got {a!r}")
        self.seed_scorer = seed_scorer
        self.a = float(a)
        self.iterations = check_k(iterations, "iterations")
        self.depth = check_k(depth, "depth")
        self.expand = bool(expand)
        self.directed = bool(directed)
        self._name = name

    @property
    def name(self) -> str:
        """Label in explanations."""
        return self._name

    def __repr__(self) -> str:
        return (
            f"PropagationScorer(seed_scorer={self.seed_scorer!r}, a={self.a}, iterations={self.iterations}, "
            f"depth={self.depth}, expand={self.expand}, directed={self.directed})"
        )

    def collection_inputs(self, query: Query) -> list[tuple[Scorer, Query, int]]:
        """The stream over the whole collection this scorer reads: the seed scorer's top ``depth``.

        The optional whole-collection protocol with :meth:`score_inputs`
        (docs/ARCHITECTURE.md, "Adding a scorer"): a sharded index computes
        the seed stream over every shard and runs :meth:`score_inputs` once,
        on the collection's link graph. The query keeps its filter (the
        candidates are the seed scorer's filtered ones).
        """
        return [(self.seed_scorer, query, self.depth)]

    def _seed(self, stream: Stream, snapshot: Snapshot) -> Stream:
        label = str(getattr(self.seed_scorer, "name", "seed"))
        stream = canonical_stream(stream, snapshot, self.depth, label)
        if not bool(np.isfinite(stream.scores).all()):
            raise ScorerOutputError(
                f"seed scorer {label!r} returned an infinite score; propagation needs finite ones"
            )
        return stream

    def propagate(
        self, snapshot: Snapshot, ids: NDArray[np.int64], scores: NDArray[np.float64]
    ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """The propagated scores of candidates ``ids`` with seed scores ``scores`` (any order).

        Returns the candidates (with ``expand``, also the added neighbours) in
        key order, and their propagated scores.
        """
        adjacency = snapshot.memo(
            ("propagate.neighbours", self.directed), lambda: _neighbours(snapshot, self.directed)
        )
        low, high = float(scores.min()), float(scores.max())
        span = high - low
        normalised = (
            np.ones(scores.shape[0]) if span == 0 or not math.isfinite(span) else (scores - low) / span
        )
        if self.expand:
            reached = np.unique(adjacency[ids].indices).astype(np.int64)
            extra = np.setdiff1d(reached, ids, assume_unique=True)
            ids = np.concatenate([ids, extra])
            normalised = np.concatenate([normalised, np.zeros(extra.shape[0])])
        # Key order, so every sum below adds its terms in an order no merge can change.
        order = np.argsort(snapshot.key_rank(ids), kind="stable")
        ids, anchor = ids[order], normalised[order]
        sub = sp.csr_array(adjacency[ids][:, ids])
        sub.sort_indices()
        degree = np.asarray(sub.sum(axis=1)).ravel()
        linked = degree > 0
        inverse = np.where(linked, 1.0 / np.where(linked, degree, 1.0), 0.0)
        current = anchor.copy()
        for _ in range(self.iterations):
            mean = np.where(linked, (sub @ current) * inverse, current)
            current = (1.0 - self.a) * anchor + self.a * mean
        return ids, current

    def score(self, snapshot: Snapshot, query: Query, k: int) -> Stream:
        """The ``k`` best candidates by propagated score (ties by key)."""
        k = check_k(k)
        return self.score_inputs(snapshot, query, k, [self.seed_scorer.score(snapshot, query, self.depth)])

    def score_inputs(self, snapshot: Snapshot, query: Query, k: int, inputs: Sequence[Stream]) -> Stream:
        """The ``k`` best candidates given the seed scorer's stream (``inputs[0]``, over ``snapshot``'s ids).

        Reads only ``snapshot``'s keys, links and :meth:`Snapshot.allowed`, so
        it runs on a :class:`~weftsearch.engine.snapshot.LinkView`.
        """
        k = check_k(k)
        if len(inputs) != 1:
            raise InvalidParameterError(f"propagation reads one seed stream, got {len(inputs)}")
        seed = self._seed(inputs[0], snapshot)
        if len(seed) == 0:
            return Stream.empty()
        ids, scores = self.propagate(snapshot, seed.ids.astype(np.int64), seed.scores.astype(np.float64))
        if self.expand:
            # An added neighbour with nothing propagated to it has no evidence: left out.
            is_seed = np.isin(ids, seed.ids, assume_unique=True)
            keep = is_seed | (scores > 0.0)
            ids, scores = ids[keep], scores[keep]
        allowed = snapshot.allowed(query)
        if allowed is not None:  # the seed scorer filtered its candidates; expansion may add others
            keep = allowed[ids]
            ids, scores = ids[keep], scores[keep]
        return Stream(*top_k(ids, scores, k, snapshot))
