"""The demo behind ``weft-search demo``, and the toy hashing embedding it uses.

The package ships a small corpus of its own (``data/demo_corpus.jsonl``:
short notes on retrieval topics, with links between them and dates), so the
demo runs anywhere without a download. So that the vector signal has real
vectors to work with, each document (and each demo query) gets a vector from
:func:`hash_embedding`: a deterministic feature-hashing embedding, not a
language model. It captures word overlap, not meaning; it is there to show
the plumbing of a hybrid search, not to be a good embedding.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
import zlib
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import TextIO

import numpy as np
from numpy.typing import NDArray

from weftsearch.analysis import Analyzer, EnglishAnalyzer
from weftsearch.corpus import iter_documents
from weftsearch.documents import Document
from weftsearch.engine.index import Index
from weftsearch.engine.protocols import Fuser, Scorer
from weftsearch.engine.query import Query
from weftsearch.engine.search import SearchResults
from weftsearch.errors import InvalidParameterError
from weftsearch.fusion import WeightedRRF
from weftsearch.scorers import BM25Scorer, GraphScorer, RecencyScorer, VectorScorer

__all__ = [
    "DEMO_DIM",
    "DEMO_QUERIES",
    "DEMO_HALF_LIFE_DAYS",
    "hash_embedding",
    "demo_documents",
    "demo_scorers",
    "demo_query",
    "build_demo_index",
    "run_demo",
]

#: Width of the demo's toy hash vectors.
DEMO_DIM = 64
#: Half-life of the demo's recency signal, in days.
DEMO_HALF_LIFE_DAYS = 365.0
#: The queries ``weft-search demo`` runs.
DEMO_QUERIES: tuple[str, ...] = (
    "combining keyword and embedding rankings",
    "fast approximate nearest neighbour search over vectors",
    "measuring ranking quality with relevance judgements",
    "random walk on a link graph",
)

_DEMO_CORPUS = "data/demo_corpus.jsonl"
_ANALYZER: Analyzer | None = None


def _default_analyzer() -> Analyzer:
    global _ANALYZER
    if _ANALYZER is None:
        _ANALYZER = EnglishAnalyzer()
    return _ANALYZER


def hash_embedding(text: str, dim: int = DEMO_DIM, analyzer: Analyzer | None = None) -> NDArray[np.float32]:
    """A deterministic toy embedding of ``text`` by signed feature hashing.

    The text is analysed (``english`` by default: lower-cased, stopwords
    removed, Snowball-stemmed). Each distinct term ``t`` (repeats count once)
    adds ``sign(t)`` to bucket ``crc32(t) mod dim``, where ``sign(t)`` is +1 if bit 31 of ``crc32(t)``
    is 0 and -1 otherwise (Weinberger et al. 2009, "Feature Hashing for Large
    Scale Multitask Learning"). The result is L2-normalised. CRC-32 (``zlib``)
    is fixed across platforms and Python versions, unlike ``hash()``, so the
    same text always gives the same vector.

    Args:
        text: the text to embed.
        dim: the vector width (positive).
        analyzer: the analyzer that produces the terms.

    Returns:
        A float32 vector of unit length, or all zeros for a text with no terms
        (a zero vector means "no opinion" to :class:`VectorScorer`).

    Raises:
        InvalidParameterError: ``dim`` is not positive.

    """
    if dim <= 0:
        raise InvalidParameterError(f"dim must be positive, got {dim}")
    terms = (analyzer or _default_analyzer()).analyze(text)
    vector = np.zeros(dim, dtype=np.float64)
    for term in sorted(set(terms)):
        code = zlib.crc32(term.encode("utf-8"))
        vector[code % dim] += -1.0 if code >> 31 else 1.0
    norm = float(np.linalg.norm(vector))
    if norm > 0.0:
        vector /= norm
    return vector.astype(np.float32)


def demo_documents(dim: int = DEMO_DIM) -> list[Document]:
    """The shipped demo corpus, each document with its :func:`hash_embedding` vector."""
    with resources.as_file(resources.files("weftsearch").joinpath(_DEMO_CORPUS)) as path:
        documents = list(iter_documents(path, "jsonl", progress=False))
    return [dataclasses.replace(d, vector=hash_embedding(d.text, dim)) for d in documents]


def demo_scorers(half_life_days: float = DEMO_HALF_LIFE_DAYS) -> list[Scorer]:
    """The demo's four signals: BM25 text, vector cosine, graph (seeded by BM25), recency.

    The graph signal keeps its seeds (the BM25 top 3). On a corpus of a few
    dozen documents every stream holds nearly every document, so under RRF a
    document missing from one stream falls far; dropping the seeds (the
    library default) would push the best text matches down for that reason
    alone.
    """
    return [
        BM25Scorer(name="text"),
        VectorScorer(name="vector"),
        GraphScorer(BM25Scorer(), max_depth=2, seed_n=3, keep_seeds=True, name="graph"),
        RecencyScorer(half_life_days * 86400.0, name="recency"),
    ]


def demo_query(text: str, dim: int = DEMO_DIM) -> Query:
    """A demo query: the text, and its toy hash vector for the vector signal."""
    return Query(text=text, vector=hash_embedding(text, dim))


def build_demo_index(path: Path, dim: int = DEMO_DIM) -> Index:
    """Create an on-disk index of the demo corpus at ``path``, commit it and reopen it."""
    index = Index.create(path, "english", vector_dim=dim, overwrite=True)
    index.add_many(demo_documents(dim), progress=False)
    index.commit()
    index.close()
    return Index.open(path, readonly=True)


def run_demo(
    out: TextIO,
    render: Callable[[SearchResults, Index], str],
    *,
    k: int = 5,
    queries: Sequence[str] = DEMO_QUERIES,
    fuser: Fuser | None = None,
) -> list[SearchResults]:
    """Index the demo corpus in a temporary directory, run the demo queries, print the results.

    Args:
        out: where to write.
        render: turns one query's results into text (the CLI passes its
            explained table).
        k: hits per query.
        queries: the query texts.
        fuser: the fuser; by default weighted RRF with the graph and recency
            streams at 0.2 and 0.1 of text's and vector's vote, as README advises
            (at equal weight they lowered nDCG@10 in every experiment of
            docs/EVAL.md that tried them).

    Returns:
        The results of each query, in order.

    """
    fuser = fuser or WeightedRRF([1.0, 1.0, 0.2, 0.1])
    scorers = demo_scorers()
    all_results = []
    with tempfile.TemporaryDirectory(prefix="weft-demo-") as directory:
        started = time.perf_counter()
        index = build_demo_index(Path(directory) / "index")
        elapsed = time.perf_counter() - started
        out.write(
            f"weft-search demo: {len(index)} short documents on retrieval topics, indexed on disk "
            f"in {elapsed:.2f} s (temporary directory, removed afterwards)\n"
            f"signals: text = BM25; vector = cosine; graph = link hops (up to 2) from the BM25 top 3, "
            f"seeds kept; recency = half-life {DEMO_HALF_LIFE_DAYS:g} days; fused with {fuser!r}\n"
            f"note: the vectors are toy {DEMO_DIM}-dim hash vectors (feature hashing of stemmed "
            f"words), not a language model: they see shared words, not meaning.\n"
            f"columns: each signal's rank for the hit ('-': absent); below each hit, the signal's "
            f"raw score and its share of the fused score.\n"
        )
        for number, text in enumerate(queries, start=1):
            results = index.search(demo_query(text), k, fuser, *scorers)
            all_results.append(results)
            out.write(f"\n[{number}/{len(queries)}] query: {text!r}\n")
            out.write(render(results, index))
    return all_results
