"""A LangChain retriever over a weft-search index: :class:`WeftRetriever`.

Needs the optional extra ``pip install 'weft-search[langchain]'`` (``langchain-core>=0.3``)::

    from weftsearch import Document, Index
    from weftsearch.integrations.langchain import WeftRetriever

    index = Index()
    index.add_many([Document("a", "sparse retrieval"), Document("b", "dense retrieval")])
    retriever = WeftRetriever(index, k=2)
    docs = retriever.invoke("sparse retrieval")  # LangChain Documents, best first

A filter on the documents' fields or time (the engine's string form, or a
:class:`~weftsearch.F` expression) is given to the constructor (``filter=``),
in LangChain's ``search_kwargs={"filter": ..., "k": ...}``, or per call
(``retriever.invoke(q, filter="year >= 2015")``), which overrides the
retriever's own for that call.

Each LangChain ``Document`` carries the stored text as ``page_content``, the
key as ``id``, and in ``metadata`` exactly what :meth:`Hit.to_dict
<weftsearch.engine.search.Hit.to_dict>` reports for the hit (``key``,
``rank``, ``score``, ``fields``, and ``signals``: each signal's rank, raw
score and contribution to the fused score) plus ``time`` (POSIX seconds, or
``None``) and ``text_fields`` (the named text fields the index's schema
stores, name -> text; ``{}`` without any).

This module sits above the library: it imports the engine, the scorers and
the fusers, and nothing in the library imports it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from os import PathLike
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from weftsearch.documents import Document as WeftDocument
from weftsearch.documents import as_vector
from weftsearch.engine.asynchronous import AsyncIndex
from weftsearch.engine.filters import Filter, as_filter
from weftsearch.engine.index import Index
from weftsearch.engine.protocols import Fuser, Scorer
from weftsearch.engine.query import Query
from weftsearch.engine.search import Hit
from weftsearch.engine.searchable import Searchable
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
    from pydantic import ConfigDict, PrivateAttr
except ImportError as exc:
    raise MissingDependencyError(
        f"weftsearch.integrations.langchain needs langchain-core ({exc}); "
        "install it with pip install 'weft-search[langchain]'"
    ) from exc

__all__ = ["DEFAULT_K", "SEARCH_KWARGS", "EmbedFunction", "WeftRetriever"]

#: Documents returned per query when ``k`` is not given (LangChain's vector-store default).
DEFAULT_K = 4

#: The keywords ``search_kwargs`` and a call (``invoke(q, filter=...)``) accept; any other is refused.
SEARCH_KWARGS = ("filter", "k")

#: Keywords LangChain's own ``invoke`` reads and passes on to the retriever: accepted and not used.
_LANGCHAIN_KWARGS = frozenset({"verbose"})

#: A function from the query text to its embedding (same width as the index's vectors).
EmbedFunction = Callable[[str], Sequence[float] | NDArray[np.floating[Any]]]


class WeftRetriever(BaseRetriever):
    """A LangChain retriever that ranks a weft-search index with fused signals.

    Args:
        index: anything :class:`~weftsearch.engine.searchable.Searchable`: an
            :class:`~weftsearch.Index`, a
            :class:`~weftsearch.distributed.ShardedIndex`; an
            :class:`~weftsearch.AsyncIndex` (its index is searched, and
            ``ainvoke`` runs on its threads); or the path of an index on
            disk, which is opened with ``readonly=True`` (no writer lock is
            taken).
        scorers: the signals to fuse, in order. ``None`` (default) means BM25
            on the text, plus the vector signal when ``embed_query`` is given.
        fuser: how the signals' streams are merged; ``None`` means ``RRF()``.
        k: documents returned per query (positive; ``None`` means 4, or
            ``search_kwargs["k"]``).
        depth: candidates asked of each scorer; ``None`` means ``max(k, 100)``, ``k`` with one scorer
            (see :func:`~weftsearch.engine.search.search_snapshot`). At least ``k``.
        embed_query: makes the query vector: a function from the query text to
            its embedding, or a LangChain ``Embeddings`` object (its
            ``embed_query``, and ``aembed_query`` on the async path). ``None``
            means the index's own embedder (an :class:`~weftsearch.Index`
            created with ``embedder=...``: :meth:`Index.embed_query
            <weftsearch.Index.embed_query>`), or no query vector for an
            index without one.
        filter: which documents may be returned: a filter in the engine's
            string form (``"year >= 2015 and source in ('pubmed', 'arxiv')"``)
            or a :class:`~weftsearch.Filter` built with :class:`~weftsearch.F`
            (``F("year") >= 2015``); ``None`` for none. Parsed here, so a
            malformed one raises at construction; its fields are checked
            against the index at each query (an unknown field or a value of
            the wrong type raises then). A call's own ``filter`` overrides it.
        search_kwargs: LangChain's ``VectorStoreRetriever`` spelling of the
            same: a mapping with ``"filter"`` and/or ``"k"`` (see
            :data:`SEARCH_KWARGS`). Giving a value both here and as its own
            argument raises, as does any other key.
        syntax: ``"plain"`` (default): the query string is plain text, a bag
            of words; ``"lucene"``: it is parsed as the query language
            (:meth:`Query.parse <weftsearch.Query.parse>`: ``"phrases"``,
            ``+must -not``, ``AND``/``OR``/``NOT``, ``field:term``, boosts,
            ``prefix*``), a malformed one raising
            :class:`~weftsearch.errors.QuerySyntaxError` with its position.
        refresh: for a read-only index, adopt the newest commit on disk before
            each query (one small manifest read); ``False`` keeps the state
            the index had. A writable index is never refreshed by the
            retriever: it shows what the index's snapshot rules show the
            calling thread.
        name: LangChain's run name for the retriever.
        tags: LangChain tags passed to callbacks on every call.
        metadata: LangChain metadata passed to callbacks on every call.

    Raises:
        InvalidParameterError: ``index`` is neither Searchable nor a path;
            ``scorers`` is empty or holds something that is not a Scorer;
            ``fuser`` is not a Fuser; ``k`` or ``depth`` is not a positive
            integer, or ``depth < k``; ``embed_query`` is neither callable nor
            an ``Embeddings``; a :class:`~weftsearch.VectorScorer` is asked for
            with no ``embed_query`` to give it a query vector, or over an
            index that holds documents but no vectors; ``search_kwargs`` is
            not a mapping, holds a key not in :data:`SEARCH_KWARGS`, or
            repeats ``filter``/``k`` given as arguments.
        InvalidFilterError: ``filter`` is neither a string, a Filter nor
            ``None`` (a dict of field values, as some vector stores take, is
            not a filter here); :class:`~weftsearch.errors.FilterSyntaxError`
            when its string form does not parse.
        IndexStorageError: ``index`` is a path that :meth:`Index.open
            <weftsearch.Index.open>` refuses (``IndexNotFoundError``,
            ``FormatVersionError``, ``CorruptIndexError``, ...).

    A query searches one snapshot from start to finish: the hits, their
    scores and the texts returned all come from the same state of the index.
    A :class:`~weftsearch.distributed.ShardedIndex` is searched at its
    current cut through the same protocol, and each hit's text is then read
    with its ``get`` (one call to the hit's shard), at the cut it reads then:
    the same one unless the caller commits or refreshes it in between.
    The async path (``ainvoke``) awaits the embedding (``aembed_query``, or
    the function in a thread), takes the snapshot in the calling thread (so
    it sees that thread's own writes, as ``invoke`` does), and awaits the
    search and the hits' texts through an :class:`~weftsearch.AsyncIndex`
    (the one given, or one made over the given Index: its bounded pool of
    read threads, where the GIL-releasing kernels run in parallel), so the
    event loop is not blocked by it; a sharded index is searched in
    LangChain's thread executor. Search cost
    is that of :meth:`Index.search <weftsearch.Index.search>` with the same
    scorers plus one stored-document read per returned hit.

    A call may pass ``filter`` and ``k`` as keywords (``invoke(q,
    filter="year >= 2015", k=10)``, ``ainvoke`` and ``batch`` alike). A call's
    ``filter`` replaces the retriever's for that call, whatever it is
    (``filter=None`` searches unfiltered); a call's ``k`` must not exceed
    ``depth`` when one was set. Any other keyword raises
    :class:`~weftsearch.errors.InvalidParameterError` naming it and the
    accepted ones, rather than being dropped (LangChain's own ``verbose`` is
    accepted). Every search goes through the index's own ``search``
    (:meth:`Index.search <weftsearch.Index.search>`, so it counts as a search
    in flight: the index's commits and merges yield to it), with the filter.

    The configuration is frozen after construction: make another retriever
    to change it, or let LangChain's ``configurable_fields`` choose ``k``,
    ``filter`` (or any other field) per call, which builds one through this
    constructor and so validates it alike.

    """

    model_config = ConfigDict(arbitrary_types_allowed=True, frozen=True, extra="forbid")

    index: Searchable
    """The index searched (an Index, a ShardedIndex, anything Searchable)."""
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
    filter: Filter | None = None
    """Which documents may be returned (parsed), or ``None``; a call's ``filter`` overrides it."""
    refresh: bool = True
    """Whether a read-only index adopts the newest commit before each query."""
    syntax: Literal["plain", "lucene"] = "plain"
    """How a query string is read: plain text, or parsed as the query language."""
    _async: AsyncIndex | None = PrivateAttr(default=None)

    def __init__(
        self,
        index: Searchable | AsyncIndex | str | PathLike[str],
        *,
        scorers: Sequence[Scorer] | None = None,
        fuser: Fuser | None = None,
        k: int | None = None,
        depth: int | None = None,
        embed_query: EmbedFunction | Embeddings | None = None,
        filter: Filter | str | None = None,
        search_kwargs: Mapping[str, Any] | None = None,
        refresh: bool = True,
        syntax: Literal["plain", "lucene"] = "plain",
        name: str | None = None,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        # Validated here, before pydantic sees the values: pydantic would turn a
        # weft error raised in a validator (they are ValueErrors) into its own
        # ValidationError, and callers catch WeftError.
        given_async: AsyncIndex | None = index if isinstance(index, AsyncIndex) else None
        the_index = _as_index(given_async.index if given_async is not None else index)
        extra = _search_kwargs(search_kwargs, "search_kwargs")
        if "k" in extra:
            if k is not None:
                raise InvalidParameterError(
                    f"k is given twice: k={k!r} and search_kwargs['k']={extra['k']!r}"
                )
            k = extra["k"]
        if "filter" in extra:
            if filter is not None:
                raise InvalidParameterError(
                    f"the filter is given twice: filter={filter!r} and "
                    f"search_kwargs['filter']={extra['filter']!r}"
                )
            filter = extra["filter"]
        k = DEFAULT_K if k is None else check_k(k)
        the_filter = as_filter(filter)
        if depth is not None:
            depth = check_k(depth, "depth")
            if depth < k:
                raise InvalidParameterError(f"depth ({depth}) must be at least k ({k})")
        if embed_query is not None and not isinstance(embed_query, Embeddings) and not callable(embed_query):
            raise InvalidParameterError(
                "embed_query must be a function from the query text to its vector or a LangChain "
                f"Embeddings, got {type(embed_query).__name__}"
            )
        if embed_query is None and isinstance(the_index, Index) and the_index.embedder is not None:
            embed_query = the_index.embed_query  # the model the index's vectors were made with
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
        if syntax not in ("plain", "lucene"):
            raise InvalidParameterError(f"syntax must be 'plain' or 'lucene', got {syntax!r}")
        fields: dict[str, Any] = {
            "index": the_index,
            "scorers": chosen,
            "fuser": chosen_fuser,
            "k": k,
            "depth": depth,
            "embed_query": embed_query,
            "filter": the_filter,
            "refresh": refresh,
            "syntax": syntax,
            "name": name,
            "tags": tags,
            "metadata": metadata,
        }
        super().__init__(**fields)
        if given_async is None and isinstance(the_index, Index):
            given_async = AsyncIndex(the_index)
        self._async = given_async

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

    def _options(self, kwargs: Mapping[str, Any]) -> tuple[int, Filter | None]:
        """The ``k`` and filter of one call: the retriever's, overridden by the call's keywords."""
        given = _search_kwargs(kwargs, "a call of WeftRetriever", also=_LANGCHAIN_KWARGS)
        k = check_k(given["k"]) if "k" in given else self.k
        if self.depth is not None and k > self.depth:
            raise InvalidParameterError(f"k ({k}) must be at most the retriever's depth ({self.depth})")
        return k, as_filter(given["filter"]) if "filter" in given else self.filter

    def _query(self, text: str, vector: NDArray[np.float32] | None, filter: Filter | None) -> Query:
        """The weft :class:`~weftsearch.Query` for a LangChain query string (the one place one is built)."""
        if self.syntax == "lucene":
            return Query.parse(text, vector=vector, filter=filter)
        return Query(text=text, vector=vector, filter=filter)

    def _snapshot(self) -> Snapshot | None:
        """The snapshot to search (``None`` for an index without snapshots, e.g. a ShardedIndex).

        A read-only index first adopts its newest commit (its newest recorded cut).
        """
        if self.refresh and self.index.readonly:
            self.index.refresh()
        return self.index.snapshot() if isinstance(self.index, Index) else None

    def _search(self, snapshot: Snapshot | None, query: Query, k: int) -> list[Document]:
        """Search and turn each hit into a LangChain ``Document``. O(search + k reads).

        Through the index's own ``search``: for an :class:`Index`, on
        ``snapshot`` (:meth:`Index.search <weftsearch.Index.search>`'s
        ``snapshot=``, so the search counts as one in flight) and the texts
        are read from that snapshot; for any other Searchable, at its current
        state, the texts read with its ``get``.
        """
        index = self.index
        if isinstance(index, Index):
            assert snapshot is not None  # _snapshot gives an Index's
            results = index.search(query, k, self.fuser, *self.scorers, depth=self.depth, snapshot=snapshot)
            ids = snapshot.ids_of(results.keys)
            return [
                _to_langchain(hit, snapshot.document(int(doc_id)))
                for hit, doc_id in zip(results, ids, strict=True)
            ]
        results = index.search(query, k, self.fuser, *self.scorers, depth=self.depth)
        return [_to_langchain(hit, index.get(hit.key)) for hit in results]

    # ------------------------------------------------------------------ BaseRetriever

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        """The ``k`` best documents for ``query``, best first (LangChain's ``invoke``).

        ``kwargs``: the call's ``filter`` and ``k`` (see the class); any other raises.
        """
        k, the_filter = self._options(kwargs)  # before the embedding: a bad keyword costs nothing
        weft_query = self._query(query, self._vector(query), the_filter)
        return self._search(self._snapshot(), weft_query, k)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        """The ``k`` best documents for ``query``, searched in a thread (LangChain's ``ainvoke``).

        ``kwargs``: the call's ``filter`` and ``k`` (see the class); any other raises.
        """
        k, the_filter = self._options(kwargs)
        weft_query = self._query(query, await self._avector(query), the_filter)
        snapshot = self._snapshot()  # in the caller's thread: it sees that thread's own writes
        if self._async is not None:
            return await self._async.run(functools.partial(self._search, snapshot, weft_query, k))
        return await run_in_executor(None, self._search, snapshot, weft_query, k)


def _search_kwargs(given: object, where: str, *, also: frozenset[str] = frozenset()) -> dict[str, Any]:
    """``given`` as a dict of :data:`SEARCH_KWARGS` (``also``: keys accepted and dropped); others raise."""
    if given is None:
        return {}
    if not isinstance(given, Mapping):
        raise InvalidParameterError(f"{where} must be a mapping, got {type(given).__name__}")
    unknown = sorted(str(key) for key in given if key not in SEARCH_KWARGS and key not in also)
    if unknown:
        raise InvalidParameterError(
            f"{where} got unknown keyword{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(repr(key) for key in unknown)}; accepted: {', '.join(SEARCH_KWARGS)}"
        )
    return {key: given[key] for key in SEARCH_KWARGS if key in given}


def _as_index(index: object) -> Searchable:
    """``index`` itself when Searchable, or the index at that path opened read-only."""
    if isinstance(index, Searchable):
        return index
    if isinstance(index, (str, PathLike)):
        return Index.open(index, readonly=True)
    raise InvalidParameterError(
        f"index must be Searchable (an Index, a ShardedIndex) or the path of an index, "
        f"got {type(index).__name__}"
    )


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


def _check_vector_inputs(scorers: Sequence[Scorer], index: Searchable, embed_query: object) -> None:
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
    documents = index.stats().documents if index.vector_dim is None else 0
    if documents > 0:
        where = "in memory" if index.path is None else str(index.path)
        raise InvalidParameterError(
            f"the index ({where}) holds {documents} documents and no vectors, so the vector signal "
            "would read nothing; add vectors, or leave out embed_query and the VectorScorer"
        )


def _to_langchain(hit: Hit, document: WeftDocument) -> Document:
    """A LangChain ``Document`` for one hit: the stored text, and the hit's explanation as metadata."""
    metadata = hit.to_dict()
    metadata["time"] = document.timestamp
    # page_content is the default field only: the named ones would be lost without this.
    metadata["text_fields"] = dict(document.text_fields)
    return Document(page_content=document.text, metadata=metadata, id=hit.key)
