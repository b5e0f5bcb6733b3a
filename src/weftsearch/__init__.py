"""weft-search: an embeddable hybrid retrieval engine.

Index documents, score them with any number of signals (BM25 text, vector
cosine, link-graph proximity, recency, or your own scorer), and fuse the
ranked streams::

    from weftsearch import Index, Document, Query, BM25Scorer, VectorScorer, RRF

    index = Index()
    index.add_many([Document("a", "sparse retrieval"), Document("b", "dense retrieval")])
    hits = index.search("retrieval", 10, RRF(), BM25Scorer())
"""

from __future__ import annotations

from weftsearch.analysis import (
    Analyzer,
    EnglishAnalyzer,
    SimpleAnalyzer,
    get_analyzer,
    register_analyzer,
)
from weftsearch.documents import Document
from weftsearch.embed import MiniLMEmbedder  # registers it as "minilm-l6-int8"
from weftsearch.embedders import Embedder, embedder_names, get_embedder, register_embedder
from weftsearch.engine.asynchronous import AsyncIndex
from weftsearch.engine.explanation import Explanation
from weftsearch.engine.filters import F, Filter, parse_filter
from weftsearch.engine.index import Index
from weftsearch.engine.protocols import Fuser, Scorer
from weftsearch.engine.query import Query
from weftsearch.engine.search import ExplainArrays, Hit, SearchResults, SignalHit
from weftsearch.engine.snapshot import Postings, Snapshot, VectorBlock
from weftsearch.engine.stream import FusedStream, KeyOrder, Stream, top_k
from weftsearch.fusion import RRF, ScoreFusion, WeightedRRF, make_fuser
from weftsearch.highlight import FieldHighlight, HighlightOptions, Snippet
from weftsearch.native import inversion as _inversion  # noqa: F401 - gives the segment writer its compiled inversion
from weftsearch.schema import Schema, TextField
from weftsearch.scorers import (
    BM25Scorer,
    GraphScorer,
    PageRankScorer,
    PropagationScorer,
    RecencyScorer,
    VectorScorer,
)

__version__ = "0.1.0"

__all__ = [
    "Analyzer",
    "EnglishAnalyzer",
    "SimpleAnalyzer",
    "get_analyzer",
    "register_analyzer",
    "Document",
    "Embedder",
    "MiniLMEmbedder",
    "register_embedder",
    "get_embedder",
    "embedder_names",
    "Schema",
    "TextField",
    "Query",
    "F",
    "Filter",
    "parse_filter",
    "Index",
    "AsyncIndex",
    "Snapshot",
    "Postings",
    "VectorBlock",
    "Stream",
    "FusedStream",
    "KeyOrder",
    "top_k",
    "Scorer",
    "Fuser",
    "Hit",
    "SignalHit",
    "SearchResults",
    "ExplainArrays",
    "Explanation",
    "HighlightOptions",
    "FieldHighlight",
    "Snippet",
    "RRF",
    "WeightedRRF",
    "ScoreFusion",
    "make_fuser",
    "BM25Scorer",
    "VectorScorer",
    "GraphScorer",
    "PageRankScorer",
    "PropagationScorer",
    "RecencyScorer",
    "__version__",
]
