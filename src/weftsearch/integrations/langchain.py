"""A LangChain retriever over a weft-search index: :class:`WeftRetriever`.

Needs the optional extra ``pip install 'weft-search[langchain]'`` (``langchain-core>=0.3``)::

    from weftsearch import Document, Index
    from weftsearch.integrations.langchain import WeftRetriever

    index = Index()
    index.add_many([Document("a", "sparse retrieval"), Document("b", "dense retrieval")])
    retriever = WeftRetriever(index, k=2)
    docs = retriever.invoke("sparse retrieval")  # LangChain Documents, best first

Each LangChain ``Document`` carries the stored text as ``page_content``, the
key as ``id``, and in ``metadata`` exactly what :meth:`Hit.to_dict
<weftsearch.engine.search.Hit.to_dict>` reports for the hit (``key``,
``rank``, ``score``, ``fields``, and ``signals``: each signal's rank, raw
score and contribution to the fused score) plus ``time`` (POSIX seconds, or
``None``).

This module sits above the library: it imports the engine, the scorers and
the fusers, and nothing in the library imports it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from os import PathLike
from typing import Any

import numpy as np
from numpy.typing import NDArray

from weftsearch.engine.documents import Document as WeftDocument
from weftsearch.engine.documents import as_vector
from weftsearch.engine.index import Index
from weftsearch.engine.protocols import Fuser, Scorer
from weftsearch.engine.query import Query
from weftsearch.engine.search import Hit, search_snapshot
from weftsearch.engine.snapshot import Snapshot
from weftsearch.engine.stream import check_k
from weftsearch.errors import InvalidParameterError, MissingDependencyError
from weftsearch.fusion import RRF
from weftsearch.scorers import BM25Scorer, VectorScorer

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
    )
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables.config import run_in_executor
    from pydantic import ConfigDict
except ImportError as exc:
    raise MissingDependencyError(
        f"weftsearch.integrations.langchain needs langchain-core ({exc}); "
        "install it with pip install 'weft-search[langchain]'"
    ) from exc

__all__ = ["DEFAULT_K", "EmbedFunction", "WeftRetriever"]

#: Documents returned per query when ``k`` is not given (LangChain's vector-store default).
DEFAULT_K = 4

#: A function from the query text to its embedding (same width as the index's vectors).
EmbedFunction = Callable[[str], Sequence[float] | NDArray[np.floating[Any]]]


class WeftRetriever(BaseRetriever):
    """A LangChain retriever that ranks a weft-search index with fused signals.

    Args:
        index: an :class:`~weftsearch.Index`, or the path of an index on disk,
            which is opened with ``readonly=True`` (no writer lock is taken).
        scorers: the signals to fuse, in order. ``None`` (default) means BM25
            on the text, plus the vector signal when ``embed_query`` is given.
        fuser: how the signals' streams are merged; ``None`` means ``RRF()``.
        k: documents returned per query (positive; default 4).
        depth: candidates asked of each scorer; ``None`` means ``max(k, 100)``, ``k`` with one scorer
            (see :func:`~weftsearch.engine.search.search_snapshot`). At least ``k``.
        embed_query: makes the query vector: a function from the query text to
            its embedding, or a LangChain ``Embeddings`` object (its
            ``embed_query``, and ``aembed_query`` on the async path). ``None``
            means queries carry no vector.
        refresh: for a read-only index, adopt the newest commit on disk before
            each query (one small manifest read); ``False`` keeps the state
            the index had. A writable index is never refreshed by the
            retriever: it shows what the index's snapshot rules show the
            calling thread.
        name: LangChain's run name for the retriever.
        tags: LangChain tags passed to callbacks on every call.
        metadata: LangChain metadata passed to callbacks on every call.

    Raises:
        InvalidParameterError: ``index`` is neither an Index nor a path;
            ``scorers`` is empty or holds something that is not a Scorer;
            ``fuser`` is not a Fuser; ``k`` or ``depth`` is not a positive
            integer, or ``depth < k``; ``embed_query`` is neither callable nor
            an ``Embeddings``; a :class:`~weftsearch.VectorScorer` is asked for
            with no ``embed_query`` to give it a query vector, or over an
            index that holds documents but no vectors.
        IndexStorageError: ``index`` is a path that :meth:`Index.open
            <weftsearch.Index.open>` refuses (``IndexNotFoundError``,
            ``FormatVersionError``, ``CorruptIndexError``, ...).

    A query searches one snapshot from start to finish: the hits, their
    scores and the texts returned all come from the same state of the index.
    The async path (``ainvoke``) awaits the embedding (``aembed_query``, or
    the function in a thread), takes the snapshot in the calling thread (so
    it sees that thread's own writes, as ``invoke`` does), and runs the search
    in a thread executor, so the event loop is not blocked by it. Search cost
    is that of :meth:`Index.search <weftsearch.Index.search>` with the same
    scorers plus one stored-document read per returned hit.

    The configuration is frozen after construction: make another retriever
    to change it, or let LangChain's ``configurable_fields`` choose ``k`` (or
    any other field) per call, which builds one through this constructor and
    so validates it alike. Filters on fields or time are not supported yet; when the
    engine's :class:`~weftsearch.Query` gains them, :meth:`_query` is where
    they join the query.

    """

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True, extra="forbid")

    index: Index
    """The index searched."""
    scorers: tuple[Scorer, ...]
    """The signals fused, in order."""
    fuser: Fuser
    """How the signals' streams are merged."""
    k: int = DEFAULT_K
    """Documents returned per query."""
    depth: int | None = None
    """Candidates asked of each scorer (``None``: ``max(k, 100)``; ``k`` with one scorer)."""
    embed_query: EmbedFunction | Embeddings | None = None
    """What makes the query vector, or ``None``."""
    refresh: bool = True
    """Whether a read-only index adopts the newest commit before each query."""

    def __init__(
        self,
        index: Index | str | PathLike[str],
        *,
        scorers: Sequence[Scorer] | None = None,
        fuser: Fuser | None = None,
        k: int = DEFAULT_K,
        depth: int | None = None,
        embed_query: EmbedFunction | Embeddings | None = None,
        refresh: bool = True,
        name: str | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        # Validated here, before pydantic sees the values: pydantic would turn a
        # weft error raised in a validator (they are ValueErrors) into its own
        # ValidationError, and callers catch WeftError.
        the_index = _as_index(index)
        k = check_k(k)
        if depth is not None:
            depth = check_k(depth, "depth")
            if depth < k:
                raise InvalidParameterError(f"depth ({depth}) must be at least k ({k})")
        if embed_query is not None and not isinstance(embed_query, Embeddings) and not callable(embed_query):
            raise InvalidParameterError(
                "embed_query must be a function from the query text to its vector or a LangChain "
                f"Embeddings, got {type(embed_query).__name__}"
            )
        if scorers is None:
            chosen: tuple[Scorer, ...] = (
                (BM25Scorer(),) if embed_query is None else (BM25Scorer(), VectorScorer())
            )
        else:
            chosen = _as_scorers(scorers)
        _check_vector_inputs(chosen, the_index, embed_query)
        chosen_fuser = RRF() if fuser is None else fuser
        if not isinstance(chosen_fuser, Fuser):
            raise InvalidParameterError(f"fuser {chosen_fuser!r} is not a Fuser (needs .name and .fuse)")
        if not isinstance(refresh, bool):
            raise InvalidParameterError(f"refresh must be True or False, got {refresh!r}")
        fields: dict[str, Any] = {
            "index": the_index,
            "scorers": chosen,
            "fuser": chosen_fuser,
            "k": k,
            "depth": depth,
            "embed_query": embed_query,
            "refresh": refresh,
            "name": name,
            "tags": tags,
            "metadata": metadata,
        }
        super().__init__(**fields)

    # ------------------------------------------------------------------ the steps of one query

    def _vector(self, text: str) -> NDArray[np.float32] | None:
        """The query vector made by ``embed_query``, or ``None`` without one."""
        embed = self.embed_query
        if embed is None:
            return None
        raw = embed.embed_query(text) if isinstance(embed, Embeddings) else embed(text)
        return as_vector(raw, "embed_query's vector")

    async def _avector(self, text: str) -> NDArray[np.float32] | None:
        """:meth:`_vector` without blocking the event loop."""
        embed = self.embed_query
        if embed is None:
            return None
        raw: Sequence[float] | NDArray[np.floating[Any]]
        if isinstance(embed, Embeddings):
            raw = await embed.aembed_query(text)
        else:
            raw = await run_in_executor(None, embed, text)
        return as_vector(raw, "embed_query's vector")

    def _query(self, text: str, vector: NDArray[np.float32] | None) -> Query:
        """The weft :class:`~weftsearch.Query` for a LangChain query string.

        The one place a query is built; filters join it here once the engine has them.
        """
        return Query(text=text, vector=vector)

    def _snapshot(self) -> Snapshot:
        """The snapshot to search: a read-only index first adopts its newest commit."""
        if self.refresh and self.index.readonly:
            self.index.refresh()
        return self.index.snapshot()

    def _search(self, snapshot: Snapshot, query: Query) -> list[Document]:
        """Search ``snapshot`` and turn each hit into a LangChain ``Document``. O(search + k reads)."""
        results = search_snapshot(snapshot, query, self.k, self.fuser, self.scorers, self.depth)
        ids = snapshot.ids_of(results.keys)
        return [
            _to_langchain(hit, snapshot.document(int(doc_id)))
            for hit, doc_id in zip(results, ids, strict=True)
        ]

    # ------------------------------------------------------------------ BaseRetriever

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        """The ``k`` best documents for ``query``, best first (LangChain's ``invoke``)."""
        weft_query = self._query(query, self._vector(query))
        return self._search(self._snapshot(), weft_query)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        """The ``k`` best documents for ``query``, searched in a thread (LangChain's ``ainvoke``)."""
        weft_query = self._query(query, await self._avector(query))
        snapshot = self._snapshot()  # in the caller's thread: it sees that thread's own writes
        return await run_in_executor(None, self._search, snapshot, weft_query)


def _as_index(index: object) -> Index:
    """``index`` itself, or the index at that path opened read-only."""
    if isinstance(index, Index):
        return index
    if isinstance(index, (str, PathLike)):
        return Index.open(index, readonly=True)
    raise InvalidParameterError(f"index must be an Index or the path of one, got {type(index).__name__}")


def _as_scorers(scorers: object) -> tuple[Scorer, ...]:
    """``scorers`` as a non-empty tuple of Scorer objects."""
    if isinstance(scorers, (str, bytes)) or not isinstance(scorers, Sequence):
        raise InvalidParameterError(f"scorers must be a sequence of Scorer objects, got {scorers!r}")
    if not scorers:
        raise InvalidParameterError("scorers must hold at least one Scorer")
    for scorer in scorers:
        if not isinstance(scorer, Scorer):
            raise InvalidParameterError(f"{scorer!r} is not a Scorer (needs .name and .score)")
    return tuple(scorers)


def _check_vector_inputs(scorers: Sequence[Scorer], index: Index, embed_query: object) -> None:
    """Refuse a vector signal that could never read anything.

    Only the built-in :class:`VectorScorer` is known to read ``Query.vector``;
    a custom scorer's needs are its own business.
    """
    if not any(isinstance(scorer, VectorScorer) for scorer in scorers):
        return
    if embed_query is None:
        raise InvalidParameterError(
            "a VectorScorer needs a query vector: pass embed_query (a function or a LangChain Embeddings)"
        )
    if index.vector_dim is None and len(index) > 0:
        where = "in memory" if index.path is None else str(index.path)
        raise InvalidParameterError(
            f"the index ({where}) holds {len(index)} documents and no vectors, so the vector signal "
            "would read nothing; add vectors, or leave out embed_query and the VectorScorer"
        )


def _to_langchain(hit: Hit, document: WeftDocument) -> Document:
    """A LangChain ``Document`` for one hit: the stored text, and the hit's explanation as metadata."""
    metadata = hit.to_dict()
    metadata["time"] = document.timestamp
    return Document(page_content=document.text, metadata=metadata, id=hit.key)
