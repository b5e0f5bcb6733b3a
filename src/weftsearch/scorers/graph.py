"""Graph proximity: documents near the seeds in the link graph.

Seeds are the query's explicit ``Query.seeds`` when it has any, otherwise the
top ``seed_n`` results of a seed scorer. The seed scorer is any object that
implements the Scorer protocol; this module imports no other scorer.

Two scorers share the seeding rules:

* :class:`GraphScorer` (hop distance): ``score(d) = sum over seeds s of
  1 / (1 + hops(s, d))`` for every document within ``max_depth`` hops of a
  seed, by breadth-first search. Discrete: many documents tie, and the key
  breaks the tie.
* :class:`PageRankScorer` (personalised PageRank): the stationary
  distribution of a random walk that follows links with probability
  ``damping`` and jumps back to a seed otherwise: a uniformly chosen seed
  (``restart="uniform"``, the default), or one chosen in proportion to its
  seed score (``restart="score"``, seed-weighted PageRank). Continuous: few
  ties.

Links are undirected by default (a citation relates both papers; CACM lists
every citation from both ends anyway); ``directed=True`` follows links from
the citing document to the cited one only. Seeds are left out of the stream
by default, since they are already the seed scorer's own results; keep them
(``keep_seeds=True``) for the control arm that shows whether a gain is just
the seed signal counted twice. Traversal is sparse matrix products (scipy),
one per hop or iteration, never a Python loop per edge.
"""

from __future__ import annotations

import dataclasses
import math
from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp
from numpy.typing import NDArray

from weftsearch.engine.protocols import Scorer
from weftsearch.engine.query import Query
from weftsearch.engine.snapshot import Snapshot
from weftsearch.engine.stream import Stream, check_k, top_k
from weftsearch.errors import InvalidParameterError

__all__ = ["GraphScorer", "PageRankScorer", "RESTARTS"]

#: PageRank's restart rules: each seed alike, or in proportion to its seed score.
RESTARTS = ("uniform", "score")


def _adjacency(snapshot: Snapshot, directed: bool) -> sp.csr_array:
    """0/1 adjacency, row = from, column = to; both directions (symmetric) unless ``directed``."""
    return snapshot.links() if directed else snapshot.linked()


class _SeededGraphScorer(ABC):
    """Seed selection and option checks shared by the two graph scorers."""

    def __init__(
        self, seed_scorer: Scorer | None, seed_n: int, keep_seeds: bool, directed: bool, name: str
    ) -> None:
        if seed_scorer is not None and not isinstance(seed_scorer, Scorer):
            raise InvalidParameterError(f"seed_scorer {seed_scorer!r} is not a Scorer")
        self.seed_scorer = seed_scorer
        self.seed_n = check_k(seed_n, "seed_n")
        self.keep_seeds = bool(keep_seeds)
        self.directed = bool(directed)
        self._name = name

    @property
    def name(self) -> str:
        """Label in explanations."""
        return self._name

    def missing_input(self, snapshot: Snapshot, query: Query) -> str | None:
        """What this scorer lacks for ``query``: ``"links in the index"``, ``"seed documents"``, or ``None``.

        Seeds are missing when the query names none and there is no seed
        scorer (a seed scorer's own inputs are its business). The optional
        input protocol (docs/ARCHITECTURE.md, "Adding a scorer"); the
        evaluation harness and the server read it, and an index with an
        embedder asks it whether to embed the query text.
        """
        if snapshot.memo(("graph.links",), lambda: int(snapshot.links().nnz)) == 0:
            return "links in the index"
        if not query.seeds and self.seed_scorer is None:
            return "seed documents"
        return None

    def seeds(self, snapshot: Snapshot, query: Query) -> NDArray[np.int64]:
        """Internal ids of the seeds for ``query`` (explicit seeds win), unique, in order."""
        return self.scored_seeds(snapshot, query)[0]

    def collection_inputs(self, query: Query) -> list[tuple[Scorer, Query, int]]:
        """The streams over the whole collection this scorer reads for ``query``.

        The seed scorer's top ``seed_n`` for the query *without its filter*
        (seeds are evidence, not results: a filter limits what this scorer
        returns, not where the walk starts; docs/ARCHITECTURE.md, "Filters"),
        or nothing when the query names its seeds or there is no seed scorer.
        Part of the optional whole-collection protocol with
        :meth:`score_inputs` (docs/ARCHITECTURE.md, "Adding a scorer"): a
        sharded index computes these streams over every shard and runs
        :meth:`score_inputs` once, on the collection's link graph.
        """
        if query.seeds or self.seed_scorer is None:
            return []
        unfiltered = query if query.filter is None else dataclasses.replace(query, filter=None)
        return [(self.seed_scorer, unfiltered, self.seed_n)]

    def _inputs(self, snapshot: Snapshot, query: Query) -> list[Stream]:
        return [scorer.score(snapshot, asked, n) for scorer, asked, n in self.collection_inputs(query)]

    def scored_seeds(
        self, snapshot: Snapshot, query: Query
    ) -> tuple[NDArray[np.int64], NDArray[np.float64] | None]:
        """The seeds (as :meth:`seeds`) and their seed scores; ``None`` for explicit seeds (no scores)."""
        return self._seeds_from(snapshot, query, self._inputs(snapshot, query))

    def _seeds_from(
        self, snapshot: Snapshot, query: Query, inputs: Sequence[Stream]
    ) -> tuple[NDArray[np.int64], NDArray[np.float64] | None]:
        """The seeds of ``query`` given :meth:`collection_inputs`' streams (``inputs``)."""
        scores: NDArray[np.float64] | None = None
        if query.seeds:
            ids = snapshot.ids_of(query.seeds)
            ids = ids[ids >= 0]
        elif inputs:
            stream = inputs[0]
            ids, scores = stream.ids[: self.seed_n], stream.scores[: self.seed_n]
        else:
            return np.empty(0, np.int64), None
        _, first = np.unique(ids, return_index=True)
        keep = np.sort(first)
        return ids[keep].astype(np.int64), None if scores is None else scores[keep].astype(np.float64)

    def score(self, snapshot: Snapshot, query: Query, k: int) -> Stream:
        """The ``k`` best documents for ``query``: :meth:`score_inputs` of the seed scorer's stream here."""
        k = check_k(k)
        return self.score_inputs(snapshot, query, k, self._inputs(snapshot, query))

    def score_inputs(self, snapshot: Snapshot, query: Query, k: int, inputs: Sequence[Stream]) -> Stream:
        """The ``k`` best documents given :meth:`collection_inputs`' streams, best first.

        ``inputs``: one stream per :meth:`collection_inputs` entry, in order,
        over ``snapshot``'s ids. Reads only ``snapshot``'s keys, links and
        :meth:`Snapshot.allowed`, so it runs on a
        :class:`~weftsearch.engine.snapshot.LinkView` of a sharded collection.
        """
        k = check_k(k)
        seeds, seed_scores = self._seeds_from(snapshot, query, inputs)
        if seeds.size == 0:
            return Stream.empty()
        return self._walk(snapshot, query, k, seeds, seed_scores)

    @abstractmethod
    def _walk(
        self,
        snapshot: Snapshot,
        query: Query,
        k: int,
        seeds: NDArray[np.int64],
        seed_scores: NDArray[np.float64] | None,
    ) -> Stream:
        """The scorer's own walk from ``seeds`` (with their seed scores, ``None`` for explicit seeds)."""

    def _finish(
        self, snapshot: Snapshot, query: Query, scores: NDArray[np.float64], seeds: NDArray[np.int64], k: int
    ) -> Stream:
        if not self.keep_seeds:
            scores[seeds] = 0.0
        allowed = snapshot.allowed(query)
        reached = scores > 0.0
        if allowed is not None:
            reached &= allowed  # the filter applies before the top k
        ids = np.flatnonzero(reached).astype(np.int64)
        if ids.size == 0:
            return Stream.empty()
        return Stream(*top_k(ids, scores[ids], k, snapshot))


class GraphScorer(_SeededGraphScorer):
    """Hop-distance proximity to the seeds: ``sum over seeds of 1 / (1 + hops)``.

    Args:
        seed_scorer: the scorer whose top ``seed_n`` results seed the search
            when the query names no seeds (``None``: explicit seeds only).
        max_depth: hops explored from each seed (>= 1; 3 by default).
        seed_n: how many of the seed scorer's results become seeds (5).
        keep_seeds: keep the seeds in the stream (control arm); default drops them.
        directed: follow links only from source to target.
        name: label in explanations.

    Complexity per query: O(max_depth * (E + N) * S) for E links and S seeds,
    as sparse-dense products.

    """

    def __init__(
        self,
        seed_scorer: Scorer | None = None,
        max_depth: int = 3,
        seed_n: int = 5,
        *,
        keep_seeds: bool = False,
        directed: bool = False,
        name: str = "graph",
    ) -> None:
        super().__init__(seed_scorer, seed_n, keep_seeds, directed, name)
        self.max_depth = check_k(max_depth, "max_depth")

    def __repr__(self) -> str:
        return (
            f"GraphScorer(seed_scorer={self.seed_scorer!r}, max_depth={self.max_depth}, "
            f"seed_n={self.seed_n}, keep_seeds={self.keep_seeds}, directed={self.directed})"
        )

    def hops(self, snapshot: Snapshot, seeds: NDArray[np.int64]) -> NDArray[np.float64]:
        """Hop distance from each seed (columns) to each document (rows); inf if beyond max_depth."""
        n, s = snapshot.n_docs, seeds.shape[0]
        # Rows = from, so moving one hop forward is a product with the transpose.
        step = snapshot.memo(
            ("graph.step", self.directed), lambda: _adjacency(snapshot, self.directed).T.tocsr()
        )
        distance = np.full((n, s), np.inf)
        columns = np.arange(s)
        distance[seeds, columns] = 0.0
        frontier = np.zeros((n, s), dtype=np.float64)
        frontier[seeds, columns] = 1.0
        visited = frontier > 0
        for depth in range(1, self.max_depth + 1):
            reached = (step @ frontier) > 0
            newly = reached & ~visited
            if not newly.any():
                break
            distance[newly] = depth
            visited |= newly
            frontier = newly.astype(np.float64)
        return distance

    def _walk(
        self,
        snapshot: Snapshot,
        query: Query,
        k: int,
        seeds: NDArray[np.int64],
        seed_scores: NDArray[np.float64] | None,
    ) -> Stream:
        """The ``k`` documents closest to ``seeds`` in hops."""
        scores = (1.0 / (1.0 + self.hops(snapshot, seeds))).sum(axis=1)
        return self._finish(snapshot, query, scores, seeds, k)


class PageRankScorer(_SeededGraphScorer):
    """Personalised PageRank with restart to the seeds.

    Args:
        seed_scorer, seed_n, keep_seeds, directed, name: as for :class:`GraphScorer`.
        damping: probability of following a link rather than restarting (0.85).
        tolerance: stop when the L1 change of the distribution falls below this.
        max_iterations: hard cap on power iterations. ``None`` (default) derives
            it from the convergence rate: the error shrinks by at least
            ``damping`` per step, so ``ceil(log(tolerance) / log(damping)) + 1``
            steps reach ``tolerance`` on any graph (143 at the defaults).
        restart: how the walk picks the seed it jumps back to. ``"uniform"``
            (default): each seed alike. ``"score"`` (seed-weighted PageRank):
            in proportion to the seed scorer's scores of the seeds divided by
            the best one, i.e. to the scores themselves, when all are
            positive (BM25's are); when some seed's score is <= 0 they are
            min-max normalised over the seeds instead (the worst seed then
            gets no restart mass); equal scores, and explicit
            ``Query.seeds`` (which carry no scores), restart uniformly.

    A document with no outgoing links hands its mass back to the seeds, so
    the scores always sum to 1. Complexity per query: O(iterations * (E + N)).

    """

    def __init__(
        self,
        seed_scorer: Scorer | None = None,
        damping: float = 0.85,
        seed_n: int = 5,
        *,
        keep_seeds: bool = False,
        directed: bool = False,
        tolerance: float = 1e-10,
        max_iterations: int | None = None,
        restart: str = "uniform",
        name: str = "pagerank",
    ) -> None:
        super().__init__(seed_scorer, seed_n, keep_seeds, directed, name)
        if restart not in RESTARTS:
            raise InvalidParameterError(f"restart must be one of {', '.join(RESTARTS)}, got {restart!r}")
        self.restart = restart
        if not isinstance(damping, (int, float)) or not 0.0 <= damping < 1.0:
            raise InvalidParameterError(f"damping must be in [0, 1), got {damping!r}")
        if not isinstance(tolerance, (int, float)) or not math.isfinite(tolerance) or tolerance <= 0:
            raise InvalidParameterError(f"tolerance must be a positive number, got {tolerance!r}")
        self.damping = float(damping)
        self.tolerance = float(tolerance)
        if max_iterations is None:
            steps = math.log(self.tolerance) / math.log(self.damping) if self.damping > 0 else 1.0
            max_iterations = max(1, math.ceil(steps) + 1)
        self.max_iterations = check_k(max_iterations, "max_iterations")

    def __repr__(self) -> str:
        return (
            f"PageRankScorer(seed_scorer={self.seed_scorer!r}, damping={self.damping}, "
            f"seed_n={self.seed_n}, keep_seeds={self.keep_seeds}, directed={self.directed}"
            + ("" if self.restart == "uniform" else f", restart={self.restart!r}")
            + ")"
        )

    def _transition(self, snapshot: Snapshot) -> tuple[sp.csr_array, NDArray[np.bool_], NDArray[np.int64]]:
        """Column-stochastic walk matrix (as ``P.T``), dangling mask, and id -> key position.

        The walk runs over documents in *key order*, not internal-id order: a
        sum of floats depends on the order of its terms, and internal ids are
        renumbered by merges, so summing in id order would change scores in
        the last bit after a merge. In key order, they never change.
        """
        n = snapshot.n_docs
        order = np.argsort(snapshot.key_rank(np.arange(n, dtype=np.int64)), kind="stable")
        position = np.empty(n, dtype=np.int64)
        position[order] = np.arange(n, dtype=np.int64)
        adjacency = sp.csr_array(_adjacency(snapshot, self.directed)[order][:, order])
        adjacency.sort_indices()
        out_degree = np.asarray(adjacency.sum(axis=1)).ravel()
        dangling = out_degree == 0
        inverse = np.where(dangling, 0.0, 1.0 / np.where(dangling, 1.0, out_degree))
        walk = sp.csr_array((sp.diags_array(inverse) @ adjacency).T)
        walk.sort_indices()
        return walk, dangling, position

    @staticmethod
    def restart_weights(scores: NDArray[np.float64] | None, count: int) -> NDArray[np.float64]:
        """Restart probabilities of ``count`` seeds from their seed scores (``None``: uniform); sum to 1."""
        uniform = np.full(count, 1.0 / count)
        if scores is None or count == 0 or not bool(np.isfinite(scores).all()):
            return uniform
        low, high = float(scores.min()), float(scores.max())
        if high == low:
            return uniform
        weights = scores / high if low > 0 else (scores - low) / (high - low)
        return np.asarray(weights / weights.sum(), dtype=np.float64)

    def distribution(
        self, snapshot: Snapshot, seeds: NDArray[np.int64], weights: NDArray[np.float64] | None = None
    ) -> NDArray[np.float64]:
        """The personalised PageRank vector over all documents (sums to 1).

        ``weights``: the restart probability of each seed (sums to 1);
        ``None`` restarts uniformly.
        """
        walk, dangling, position = snapshot.memo(
            ("pagerank.walk", self.directed), lambda: self._transition(snapshot)
        )
        restart = np.zeros(snapshot.n_docs)
        restart[position[seeds]] = 1.0 / seeds.shape[0] if weights is None else weights
        rank = restart.copy()
        for _ in range(self.max_iterations):
            leaked = rank[dangling].sum()
            updated = self.damping * (walk @ rank) + (self.damping * leaked + 1.0 - self.damping) * restart
            change = float(np.abs(updated - rank).sum())
            rank = updated
            if change < self.tolerance:
                break
        return np.asarray(rank[position], dtype=np.float64)

    def _walk(
        self,
        snapshot: Snapshot,
        query: Query,
        k: int,
        seeds: NDArray[np.int64],
        seed_scores: NDArray[np.float64] | None,
    ) -> Stream:
        """The ``k`` documents with the highest personalised PageRank from ``seeds``."""
        weights = None
        if self.restart == "score":
            weights = self.restart_weights(seed_scores, seeds.shape[0])
        return self._finish(snapshot, query, self.distribution(snapshot, seeds, weights), seeds, k)
