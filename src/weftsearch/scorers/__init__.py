"""Built-in scorers, one module each.

Each implements the Scorer protocol (:class:`weftsearch.engine.protocols.Scorer`)
and imports no other scorer.
"""

from __future__ import annotations

from weftsearch.scorers.bm25 import BM25Scorer
from weftsearch.scorers.graph import GraphScorer, PageRankScorer
from weftsearch.scorers.propagation import PropagationScorer
from weftsearch.scorers.recency import RecencyScorer
from weftsearch.scorers.vector import VectorScorer

__all__ = [
    "BM25Scorer",
    "VectorScorer",
    "GraphScorer",
    "PageRankScorer",
    "PropagationScorer",
    "RecencyScorer",
]
