"""What a load ladder sends and to which engine: the queries, the searchers, the corpora.

A :class:`Workload` is the queries of a run (analysed text, and vectors for the
hybrid arm); a :class:`Searcher` is a picklable recipe for a search function
(opened in the process that searches, so a worker process opens its own
engine). :class:`WeftSearcher` is weft-search's; the peers' (tantivy, LanceDB)
live outside the package, in the repository's ``bench/peers`` folder
(:mod:`weftsearch.bench.peers`). Every engine returns the keys of its top k, so
every engine pays for fetching them. The corpora (SciFact, or the shared
synthetic corpus) come analysed once, as every engine indexes the same tokens.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from weftsearch.errors import InvalidParameterError

__all__ = [
    "Corpus",
    "Searcher",
    "SleepSearcher",
    "WeftSearcher",
    "Workload",
    "build_weft_index",
    "scifact_corpus",
    "synthetic_corpus",
    "weft_search_function",
]


class Searcher(Protocol):
    """A picklable recipe for a search function: ``open()`` returns ``f(item) -> keys``."""

    def open(self) -> Callable[[int], object]:
        """Open the engine (in the calling process) and return its search function."""
        ...


@dataclass(frozen=True)
class Workload:
    """Queries a ladder sends: analysed text (space-joined tokens) and, for hybrid arms, vectors."""

    texts: tuple[str, ...]
    vectors: NDArray[np.float32] | None = None

    def __len__(self) -> int:
        return len(self.texts)


@dataclass(frozen=True)
class WeftSearcher:
    """weft-search on an index directory opened read-only: BM25, or BM25 + vector by RRF.

    Each request is ``index.search(Query(text[, vector]), k, RRF(), BM25Scorer()[,
    VectorScorer()], depth=depth)`` and reads the hits' keys (what a user gets).
    """

    path: str
    workload: Workload
    arm: str = "bm25"
    k: int = 10
    depth: int = 100

    def open(self) -> Callable[[int], object]:
        """Open the index read-only; the search function of query number ``item``."""
        from weftsearch.engine.index import Index

        return weft_search_function(
            Index.open(self.path, readonly=True), self.workload, self.arm, self.k, self.depth
        )


def weft_search_function(
    index: Any, workload: Workload, arm: str, k: int, depth: int
) -> Callable[[int], object]:
    """The search function of ``arm`` over an open :class:`~weftsearch.engine.index.Index`."""
    from weftsearch.engine.query import Query
    from weftsearch.fusion.rrf import RRF
    from weftsearch.scorers.bm25 import BM25Scorer
    from weftsearch.scorers.vector import VectorScorer

    fuser = RRF()
    if arm == "bm25":
        queries = [Query(text=t) for t in workload.texts]
        scorers: tuple[Any, ...] = (BM25Scorer(),)
    elif arm == "hybrid":
        if workload.vectors is None:
            raise InvalidParameterError("the hybrid arm needs query vectors")
        queries = [Query(text=t, vector=workload.vectors[i]) for i, t in enumerate(workload.texts)]
        scorers = (BM25Scorer(), VectorScorer())
    else:
        raise InvalidParameterError(f"unknown arm {arm!r} (known: bm25, hybrid)")

    def search(item: int) -> object:
        return index.search(queries[item], k, fuser, *scorers, depth=depth).keys

    return search


@dataclass(frozen=True)
class SleepSearcher:
    """A stand-in engine for tests: each request sleeps ``seconds`` (releasing the GIL)."""

    seconds: float

    def open(self) -> Callable[[int], object]:
        """The sleeping function."""
        seconds = self.seconds

        def search(item: int) -> object:
            time.sleep(seconds)
            return item

        return search


#: A corpus as the ladder takes it: document keys, analysed document texts, the queries and,
#: for the hybrid arm, the document vectors.
Corpus = tuple[list[str], list[str], Workload, NDArray[np.float32] | None]


def scifact_corpus(data: str, hybrid: bool) -> Corpus:
    """SciFact's keys, analysed document texts, queries and document vectors (english analyzer, once)."""
    from weftsearch.analysis import get_analyzer
    from weftsearch.eval.datasets import load_collection, load_frozen_vectors

    collection = load_collection("scifact", data)
    analyzer = get_analyzer("english")
    keys = [d.key for d in collection.documents]
    texts = [" ".join(analyzer.analyze(d.text)) for d in collection.documents]
    query_texts = tuple(" ".join(analyzer.analyze(t)) for t in collection.queries.values())
    doc_vectors = query_vectors = None
    if hybrid:
        vectors = load_frozen_vectors(collection)
        doc_vectors = np.ascontiguousarray(vectors.documents, dtype=np.float32)
        query_vectors = np.ascontiguousarray(vectors.queries, dtype=np.float32)
    return keys, texts, Workload(query_texts, query_vectors), doc_vectors


def synthetic_corpus(n_docs: int, n_queries: int, hybrid: bool) -> Corpus:
    """The shared synthetic corpus (:mod:`~weftsearch.bench.synthetic`) as SciFact comes.

    Its tokens are the analysed text already; for the hybrid arm, seeded random unit
    vectors of width 384 (cost, not quality: they mean nothing).
    """
    from weftsearch.bench.synthetic import SEED, unit_vectors, zipf_corpus

    corpus = zipf_corpus(n_docs, n_queries)
    texts = [" ".join(tokens) for tokens in corpus.doc_tokens]
    query_texts = tuple(" ".join(tokens) for tokens in corpus.query_tokens)
    doc_vectors = query_vectors = None
    if hybrid:
        doc_vectors = unit_vectors(n_docs)
        query_vectors = unit_vectors(n_queries, seed=SEED + 2)
    return corpus.doc_keys, texts, Workload(query_texts, query_vectors), doc_vectors


def build_weft_index(
    path: Path, keys: Sequence[str], texts: Sequence[str], vectors: NDArray[np.float32] | None
) -> None:
    """A weft-search index at ``path`` of the analysed ``texts`` (the simple analyzer), committed."""
    from weftsearch.documents import Document
    from weftsearch.engine.index import Index

    dim = None if vectors is None else int(vectors.shape[1])
    with Index.create(path, "simple", vector_dim=dim) as index:
        index.add_many(
            (
                Document(k, t, vector=None if vectors is None else vectors[i])
                for i, (k, t) in enumerate(zip(keys, texts, strict=True))
            ),
            progress=False,
        )
        index.commit()
