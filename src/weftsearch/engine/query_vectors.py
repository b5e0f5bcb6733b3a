"""Query vectors from an index's embedder: whether a ranking needs one, and making it.

A query given as text gets the vector of its text only when a scorer says
(by its optional ``missing_input``, docs/ARCHITECTURE.md, "Adding a scorer")
that it lacks ``"a query vector"``: BM25 alone never costs an embedding. Used
by :class:`~weftsearch.Index` and by the sharded coordinator, which asks its
shards whether a scorer needs one (:func:`needs_query_vector`) and embeds the
texts itself (:func:`embed_query_texts`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from weftsearch.embedders import EMBED_BATCH_SIZE, Embedder, run_embedder_counting, warn_truncated
from weftsearch.engine.protocols import Scorer
from weftsearch.engine.query import Query
from weftsearch.engine.snapshot import Snapshot

__all__ = ["embed_queries", "embed_query_texts", "needs_query_vector"]


def embed_queries(
    embedder: Embedder | None, queries: Sequence[Query | str], snapshot: Snapshot, scorers: Sequence[Scorer]
) -> Sequence[Query | str]:
    """``queries`` with text and no vector given the vector of their text, when a scorer needs one.

    A scorer needs one when its optional ``missing_input`` says ``"a query
    vector"`` on ``snapshot``; the texts of one call are embedded in one batch
    per :data:`~weftsearch.embedders.EMBED_BATCH_SIZE`. Without an embedder,
    or given something else than a list or tuple (which the search then
    refuses), the queries are returned as they are.
    """
    if (
        embedder is None
        or not isinstance(queries, (list, tuple))
        or not all(isinstance(q, (Query, str)) for q in queries)  # the search refuses them first
    ):
        return queries
    out = list(queries)
    built = [Query(text=q) if isinstance(q, str) else q for q in out]
    todo = [i for i, q in enumerate(built) if q.vector is None and q.text.strip()]
    if not todo or not needs_query_vector(scorers, snapshot, built[todo[0]]):
        return out
    embedded = embed_query_texts(embedder, built, todo)
    for i in todo:
        out[i] = embedded[i]
    return out


def _needs_vector(scorer: Scorer, snapshot: Snapshot, query: Query) -> bool:
    """Whether ``scorer`` says (by its optional ``missing_input``) that ``query`` lacks a query vector."""
    missing = getattr(scorer, "missing_input", None)
    return callable(missing) and missing(snapshot, query) == "a query vector"


def needs_query_vector(scorers: Sequence[Scorer], snapshot: Snapshot, query: Query) -> bool:
    """Whether a scorer says (its ``missing_input``) that ``query`` lacks a query vector on ``snapshot``."""
    return any(_needs_vector(scorer, snapshot, query) for scorer in scorers)


def embed_query_texts(embedder: Embedder, queries: list[Query], todo: Sequence[int]) -> list[Query]:
    """``queries`` with those at ``todo`` given their text's vector, in batches; truncation warned of once.

    Raises:
        EmbeddingError: the embedder failed on a batch.

    """
    out = list(queries)
    texts = [queries[i].text for i in todo]
    truncated: list[int] = []
    for start in range(0, len(todo), EMBED_BATCH_SIZE):
        chunk = todo[start : start + EMBED_BATCH_SIZE]
        more = f" and {len(chunk) - 1} more" if len(chunk) > 1 else ""
        what = f"the query text {texts[start]!r:.80}{more}"
        rows, cut = run_embedder_counting(embedder, texts[start : start + len(chunk)], what)
        for i, row, was_cut in zip(chunk, rows, cut, strict=True):
            out[i] = replace(queries[i], vector=row)
            if was_cut:
                truncated.append(i)
    # stacklevel 5: warn_truncated < embed_query_texts < embed_queries < search < the caller.
    warn_truncated(embedder, truncated, [], "query text", stacklevel=5)
    return out
