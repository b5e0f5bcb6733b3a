"""WeftRetriever against langchain-core itself: order, metadata, async, LCEL, configuration errors."""

from __future__ import annotations

import asyncio
import importlib
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.documents import Document as LCDocument
from langchain_core.embeddings import Embeddings
from langchain_core.runnables import ConfigurableField, RunnableLambda
from pydantic import ValidationError

import weftsearch.integrations
from weftsearch import (
    RRF,
    BM25Scorer,
    Document,
    F,
    Index,
    Query,
    RecencyScorer,
    Schema,
    ScoreFusion,
    Scorer,
    Snapshot,
    Stream,
    TextField,
    VectorScorer,
)
from weftsearch.distributed import ShardedIndex
from weftsearch.engine.inflight import searches_in_flight
from weftsearch.errors import (
    FilterSyntaxError,
    IndexNotFoundError,
    InvalidFilterError,
    InvalidParameterError,
    InvalidQueryError,
    InvalidVectorError,
    MissingDependencyError,
    QuerySyntaxError,
    UnknownFieldError,
    VectorDimensionError,
    WeftError,
)
from weftsearch.integrations.langchain import DEFAULT_K, SEARCH_KWARGS, WeftRetriever

DAY = 86_400.0

ROWS: list[tuple[str, str, list[float], float | None]] = [
    ("bm25", "bm25 ranks sparse text retrieval by term weight", [1, 0, 0, 0], 10 * DAY),
    ("dense", "dense vector retrieval with embeddings", [0, 1, 0, 0], 40 * DAY),
    ("graph", "graph retrieval follows links between documents", [0, 0, 1, 0], None),
    ("rrf", "reciprocal rank fusion merges retrieval runs", [0.5, 0.5, 0, 0], 30 * DAY),
    ("recency", "recent documents first, decay by age", [0, 0, 0, 1], 50 * DAY),
    ("lucene", "lucene sparse text index and bm25 scoring", [0.9, 0.1, 0, 0], 5 * DAY),
    # Shares no word with the queries below: only the vector signal can find it.
    ("semantic", "meaning carried without shared words", [0.1, 0.95, 0, 0], 20 * DAY),
]

QUERY = "sparse text retrieval"
#: The query vectors the test embedding functions return, by query text.
VECTORS = {QUERY: [0.0, 1.0, 0.0, 0.0], "dense retrieval": [0.2, 0.9, 0.0, 0.0]}


def _documents() -> list[Document]:
    return [
        Document(
            key, text, vector=np.asarray(vector, dtype=np.float32), time=time, fields={"title": key.upper()}
        )
        for key, text, vector, time in ROWS
    ]


def _index() -> Index:
    index = Index()
    index.add_many(_documents())
    return index


def embed(text: str) -> list[float]:
    return VECTORS[text]


class TableEmbeddings(Embeddings):
    """A LangChain Embeddings that looks query vectors up, counting sync and async calls."""

    def __init__(self) -> None:
        self.sync_calls = 0
        self.async_calls = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        raise AssertionError("the retriever never embeds documents")

    def embed_query(self, text: str) -> list[float]:
        self.sync_calls += 1
        return VECTORS[text]

    async def aembed_query(self, text: str) -> list[float]:
        self.async_calls += 1
        return VECTORS[text]


def _expected(
    index: Index, documents: Sequence[LCDocument], query: Query, k: int, *scorers: Any, fuser: Any = None
) -> None:
    """``documents`` are exactly Index.search's hits: order, text, id and metadata."""
    results = index.search(query, k, fuser or RRF(), *scorers)
    assert [d.id for d in documents] == results.keys
    for document, hit in zip(documents, results, strict=True):
        assert isinstance(document, LCDocument)
        stored = index.get(hit.key)
        assert document.page_content == stored.text
        assert document.metadata == {
            **hit.to_dict(),
            "time": stored.timestamp,
            "text_fields": dict(stored.text_fields),
        }


# ---------------------------------------------------------------------------- results


def test_invoke_returns_index_search_hits_in_fused_order() -> None:
    index = _index()
    documents = WeftRetriever(index, k=5).invoke(QUERY)
    assert len(documents) == 5
    _expected(index, documents, Query(QUERY), 5, BM25Scorer())
    first = documents[0].metadata
    assert first["rank"] == 1 and first["fields"] == {"title": first["key"].upper()}
    assert [s["signal"] for s in first["signals"]] == ["bm25"]


def test_lucene_syntax_parses_the_query_string_as_the_engine_does() -> None:
    index = _index()
    text = '+retrieval -sparse dense^2'
    documents = WeftRetriever(index, k=5, syntax="lucene").invoke(text)
    _expected(index, documents, Query.parse(text), 5, BM25Scorer())
    assert asyncio.run(WeftRetriever(index, k=5, syntax="lucene").ainvoke(text)) == documents
    plain = WeftRetriever(index, k=5).invoke(text)  # plain text keeps its meaning: a bag of words
    _expected(index, plain, Query(text), 5, BM25Scorer())
    assert [d.id for d in plain] != [d.id for d in documents]
    with pytest.raises(QuerySyntaxError, match="position"):
        WeftRetriever(index, syntax="lucene").invoke('"unbalanced')
    with pytest.raises(InvalidParameterError, match="syntax must be"):
        WeftRetriever(index, syntax="sql")  # type: ignore[arg-type]


def test_metadata_carries_the_stored_named_text_fields() -> None:
    schema = Schema((TextField("text"), TextField("title"), TextField("notes", stored=False)))
    index = Index(schema=schema)
    index.add_many(
        [
            Document("a", "sparse retrieval", text_fields={"title": "Sparse", "notes": "n"}),
            Document("b", "dense retrieval"),
        ],
        progress=False,
    )
    documents = WeftRetriever(index, k=2).invoke("sparse retrieval")
    by_key = {d.id: d.metadata["text_fields"] for d in documents}
    # notes is indexed and not stored: absent, as Index.get gives the document.
    assert by_key == {"a": {"title": "Sparse"}, "b": {}}
    _expected(index, documents, Query("sparse retrieval"), 2, BM25Scorer())


def test_hybrid_metadata_explains_every_signal() -> None:
    index = _index()
    scorers: list[Scorer] = [BM25Scorer(), VectorScorer(), RecencyScorer(half_life=10 * DAY)]
    fuser = ScoreFusion([2.0, 1.0, 0.5])
    retriever = WeftRetriever(index, scorers=scorers, fuser=fuser, k=7, depth=7, embed_query=embed)
    documents = retriever.invoke(QUERY)
    query = Query(QUERY, vector=np.asarray(VECTORS[QUERY], dtype=np.float32))
    _expected(index, documents, query, 7, *scorers, fuser=fuser)
    graph = next(d for d in documents if d.id == "graph")
    assert graph.metadata["time"] is None  # no time: absent from recency
    assert graph.metadata["signals"][2] == {
        "signal": "recency",
        "rank": None,
        "score": None,
        "contribution": 0.0,
    }


def test_an_embedding_function_adds_the_vector_signal() -> None:
    index = _index()
    text_only = WeftRetriever(index, k=7).invoke(QUERY)
    hybrid = WeftRetriever(index, k=7, embed_query=embed).invoke(QUERY)
    assert "semantic" not in [d.id for d in text_only]
    semantic = next(d for d in hybrid if d.id == "semantic")
    assert [s["signal"] for s in semantic.metadata["signals"]] == ["bm25", "vector"]
    assert semantic.metadata["signals"][0]["rank"] is None
    assert semantic.metadata["signals"][1]["rank"] == 2  # after "dense", whose vector is the query's
    query = Query(QUERY, vector=np.asarray(VECTORS[QUERY], dtype=np.float32))
    _expected(index, hybrid, query, 7, BM25Scorer(), VectorScorer())


def test_a_langchain_embeddings_object_makes_the_query_vector() -> None:
    index = _index()
    embeddings = TableEmbeddings()
    retriever = WeftRetriever(index, k=3, embed_query=embeddings)
    documents = retriever.invoke("dense retrieval")
    assert (embeddings.sync_calls, embeddings.async_calls) == (1, 0)
    query = Query("dense retrieval", vector=np.asarray(VECTORS["dense retrieval"], dtype=np.float32))
    _expected(index, documents, query, 3, BM25Scorer(), VectorScorer())
    assert asyncio.run(retriever.ainvoke("dense retrieval")) == documents
    assert (embeddings.sync_calls, embeddings.async_calls) == (1, 1)  # the async path awaits aembed_query


@pytest.mark.parametrize("k", [1, 2, DEFAULT_K, 6])
def test_k_is_honoured(k: int) -> None:
    index = _index()
    documents = WeftRetriever(index, k=k, embed_query=embed).invoke(QUERY)
    assert len(documents) == k  # every document has a vector, so every k up to 7 is filled
    assert [d.metadata["rank"] for d in documents] == list(range(1, k + 1))


def test_default_k_is_four_and_fewer_matches_give_fewer_documents() -> None:
    index = _index()
    assert len(WeftRetriever(index).invoke("retrieval")) == DEFAULT_K == 4
    assert [d.id for d in WeftRetriever(index, k=10).invoke("lucene")] == ["lucene"]


def test_an_empty_index_returns_no_documents() -> None:
    for retriever in (WeftRetriever(Index()), WeftRetriever(Index(), embed_query=embed)):
        assert retriever.invoke(QUERY) == []
        assert asyncio.run(retriever.ainvoke(QUERY)) == []


def test_a_query_matching_nothing_returns_no_documents() -> None:
    assert WeftRetriever(_index()).invoke("zebra") == []
    assert WeftRetriever(_index()).invoke("") == []


# ---------------------------------------------------------------------------- filters

#: Documents dated 20 days or later: dense, rrf, recency, semantic (graph has no time).
RECENT = "@time >= 1728000"
RECENT_KEYS = {"dense", "rrf", "recency", "semantic"}


def _keys(documents: Sequence[LCDocument]) -> list[str]:
    return [d.id or "" for d in documents]


def test_a_constructor_filter_limits_the_documents_in_string_or_structured_form() -> None:
    index = _index()
    unfiltered = WeftRetriever(index, k=7, embed_query=embed).invoke(QUERY)
    assert not set(_keys(unfiltered)) <= RECENT_KEYS  # the filter below has something to remove
    for given in (RECENT, F("@time") >= 20 * DAY):
        retriever = WeftRetriever(index, k=7, embed_query=embed, filter=given)
        documents = retriever.invoke(QUERY)
        assert set(_keys(documents)) == RECENT_KEYS
        query = Query(QUERY, vector=np.asarray(VECTORS[QUERY], dtype=np.float32), filter=RECENT)
        _expected(index, documents, query, 7, BM25Scorer(), VectorScorer())
        assert asyncio.run(retriever.ainvoke(QUERY)) == documents
    titles = WeftRetriever(index, k=7, filter="title in ('BM25', 'LUCENE')").invoke("bm25 sparse")
    assert sorted(_keys(titles)) == ["bm25", "lucene"]


def test_search_kwargs_take_filter_and_k_as_langchains_vector_store_retriever_does() -> None:
    index = _index()
    retriever = WeftRetriever(index, embed_query=embed, search_kwargs={"filter": RECENT, "k": 2})
    assert retriever.k == 2
    documents = retriever.invoke(QUERY)
    assert len(documents) == 2 and set(_keys(documents)) <= RECENT_KEYS
    query = Query(QUERY, vector=np.asarray(VECTORS[QUERY], dtype=np.float32), filter=RECENT)
    _expected(index, documents, query, 2, BM25Scorer(), VectorScorer())
    assert WeftRetriever(index, search_kwargs={"k": 6}).k == 6
    assert WeftRetriever(index, search_kwargs={}).k == DEFAULT_K


def test_a_call_filter_overrides_the_retrievers_in_invoke_ainvoke_and_batch() -> None:
    index = _index()
    plain = WeftRetriever(index, k=7, embed_query=embed)
    limited = WeftRetriever(index, k=7, embed_query=embed, filter="title == 'BM25'")
    recent = WeftRetriever(index, k=7, embed_query=embed, filter=RECENT).invoke(QUERY)
    for retriever in (plain, limited):
        assert retriever.invoke(QUERY, filter=RECENT) == recent
        assert asyncio.run(retriever.ainvoke(QUERY, filter=F("@time") >= 20 * DAY)) == recent
        assert retriever.batch([QUERY, QUERY], filter=RECENT) == [recent, recent]
    assert _keys(limited.invoke(QUERY)) == ["bm25"]
    assert limited.invoke(QUERY, filter=None) == plain.invoke(QUERY)  # None: unfiltered for this call
    assert _keys(plain.invoke(QUERY, k=2)) == _keys(plain.invoke(QUERY))[:2]


def test_a_filter_can_be_chosen_per_call_through_configurable_fields() -> None:
    retriever = WeftRetriever(_index(), k=7).configurable_fields(filter=ConfigurableField(id="filter"))
    assert (
        set(_keys(retriever.invoke("retrieval", config={"configurable": {"filter": RECENT}}))) <= RECENT_KEYS
    )
    assert "bm25" in _keys(retriever.invoke("retrieval"))


def test_a_filter_matching_nothing_returns_no_documents() -> None:
    retriever = WeftRetriever(_index(), embed_query=embed, filter="title == 'NONE'")
    assert retriever.invoke(QUERY) == []


BAD_KEYWORDS: list[tuple[str, dict[str, Any]]] = [
    ("a vector store's", {"fetch_k": 20}),
    ("a misspelt filter", {"filters": RECENT}),
    ("two at once", {"score_threshold": 0.5, "where": {"a": 1}}),
]


@pytest.mark.parametrize("keywords", [c[1] for c in BAD_KEYWORDS], ids=[c[0] for c in BAD_KEYWORDS])
def test_an_unknown_keyword_is_refused_naming_it_and_the_accepted_ones(keywords: dict[str, Any]) -> None:
    retriever = WeftRetriever(_index())
    names = ", ".join(repr(name) for name in sorted(keywords))
    accepted = f"accepted: {', '.join(SEARCH_KWARGS)}"
    for call in (
        lambda: retriever.invoke(QUERY, **keywords),
        lambda: asyncio.run(retriever.ainvoke(QUERY, **keywords)),
        lambda: retriever.batch([QUERY], **keywords),
        lambda: WeftRetriever(_index(), search_kwargs={**keywords, "k": 2}),
    ):
        with pytest.raises(InvalidParameterError) as caught:
            call()
        assert names in str(caught.value) and accepted in str(caught.value)
    assert retriever.invoke(QUERY, verbose=False) == retriever.invoke(QUERY)  # LangChain's own keyword


def test_bad_filters_and_search_kwargs_raise_typed_errors() -> None:
    index = _index()
    with pytest.raises(FilterSyntaxError):
        WeftRetriever(index, filter="year >=")
    with pytest.raises(FilterSyntaxError):
        WeftRetriever(index, search_kwargs={"filter": "year >= and"})
    with pytest.raises(InvalidFilterError, match="got dict"):
        WeftRetriever(index, filter={"year": 2015})  # type: ignore[arg-type]
    with pytest.raises(InvalidFilterError, match="got dict"):
        WeftRetriever(index).invoke(QUERY, filter={"year": 2015})
    with pytest.raises(UnknownFieldError, match="year"):
        WeftRetriever(index, filter="year >= 2015").invoke(QUERY)  # fields are checked at query time
    with pytest.raises(FilterSyntaxError):
        WeftRetriever(index).invoke(QUERY, filter="year >=")
    with pytest.raises(InvalidParameterError, match="search_kwargs must be a mapping, got list"):
        WeftRetriever(index, search_kwargs=[("k", 2)])  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="k is given twice"):
        WeftRetriever(index, k=3, search_kwargs={"k": 2})
    with pytest.raises(InvalidParameterError, match="filter is given twice"):
        WeftRetriever(index, filter=RECENT, search_kwargs={"filter": RECENT})
    with pytest.raises(InvalidParameterError, match="k must be a positive integer"):
        WeftRetriever(index, search_kwargs={"k": 0})
    with pytest.raises(InvalidParameterError, match="k must be a positive integer"):
        WeftRetriever(index).invoke(QUERY, k=0)
    with pytest.raises(InvalidParameterError, match=r"k \(8\) must be at most the retriever's depth \(5\)"):
        WeftRetriever(index, k=2, depth=5).invoke(QUERY, k=8)


# ---------------------------------------------------------------------------- searches in flight


class InFlightRecorder:
    """BM25 that records how many searches were in flight in this process when it ran."""

    def __init__(self) -> None:
        self.inner = BM25Scorer()
        self.counts: list[int] = []

    @property
    def name(self) -> str:
        return "bm25"

    def score(self, snapshot: Snapshot, query: Query, k: int) -> Stream:
        self.counts.append(searches_in_flight())
        return self.inner.score(snapshot, query, k)


def test_a_retriever_search_counts_as_a_search_in_flight() -> None:
    # Commits yield to searches in flight and BM25 picks its path by the count:
    # a retriever's search must be one of them, on the sync and the async path.
    index = _index()
    recorder = InFlightRecorder()
    retriever = WeftRetriever(index, scorers=[recorder], k=3, filter=RECENT)
    base = searches_in_flight()
    retriever.invoke("retrieval")
    asyncio.run(retriever.ainvoke("retrieval"))
    assert recorder.counts == [base + 1, base + 1]
    assert searches_in_flight() == base and not index._searches


# ---------------------------------------------------------------------------- async


class ThreadRecorder:
    """BM25 that records the thread each search ran on."""

    def __init__(self) -> None:
        self.inner = BM25Scorer()
        self.threads: list[int] = []

    @property
    def name(self) -> str:
        return "bm25"

    def score(self, snapshot: Snapshot, query: Query, k: int) -> Stream:
        self.threads.append(threading.get_ident())
        return self.inner.score(snapshot, query, k)


def test_ainvoke_matches_invoke_and_searches_off_the_event_loop() -> None:
    index = _index()
    recorder = ThreadRecorder()
    retriever = WeftRetriever(index, scorers=[recorder, VectorScorer()], k=5, embed_query=embed)
    sync = retriever.invoke(QUERY)
    assert recorder.threads == [threading.get_ident()]

    async def run() -> tuple[list[LCDocument], int]:
        return await retriever.ainvoke(QUERY), threading.get_ident()

    documents, loop_thread = asyncio.run(run())
    assert documents == sync
    assert len(recorder.threads) == 2 and recorder.threads[1] != loop_thread


def test_ainvoke_sees_the_calling_threads_own_writes() -> None:
    # The async path takes its snapshot in the calling thread, as invoke does: a
    # snapshot taken in the executor's thread would be the last one published.
    index = _index()
    retriever = WeftRetriever(index, k=10)
    assert "fresh" not in [d.id for d in retriever.invoke("retrieval")]
    index.add(Document("fresh", "fresh retrieval retrieval retrieval"))
    documents = asyncio.run(retriever.ainvoke("retrieval"))
    assert documents[0].id == "fresh"
    assert documents == retriever.invoke("retrieval")


def test_abatch_runs_queries_concurrently_with_the_same_answers() -> None:
    retriever = WeftRetriever(_index(), k=3, embed_query=embed)
    queries = [QUERY, "dense retrieval"]
    assert asyncio.run(retriever.abatch(queries)) == retriever.batch(queries)


# ---------------------------------------------------------------------------- LangChain composition


def test_the_retriever_runs_in_an_lcel_chain() -> None:
    index = _index()
    retriever = WeftRetriever(index, k=3)

    def keys(documents: list[LCDocument]) -> list[str]:
        return [d.metadata["key"] for d in documents]

    chain = retriever | RunnableLambda(keys)
    assert chain.invoke(QUERY) == index.search(QUERY, 3, RRF(), BM25Scorer()).keys
    assert chain.batch([QUERY, "graph"]) == [
        index.search(QUERY, 3, RRF(), BM25Scorer()).keys,
        index.search("graph", 3, RRF(), BM25Scorer()).keys,
    ]
    assert asyncio.run(chain.ainvoke(QUERY)) == chain.invoke(QUERY)


def test_k_can_be_chosen_per_call_through_configurable_fields() -> None:
    # LangChain rebuilds the retriever with the configured values, through the
    # same constructor, so a per-call k is validated like any other.
    retriever = WeftRetriever(_index(), k=2).configurable_fields(k=ConfigurableField(id="k"))
    assert len(retriever.invoke(QUERY)) == 2
    assert len(retriever.invoke(QUERY, config={"configurable": {"k": 5}})) == 5
    with pytest.raises(InvalidParameterError, match="k must be a positive integer, got 0"):
        retriever.invoke(QUERY, config={"configurable": {"k": 0}})


def test_the_configuration_is_frozen() -> None:
    retriever = WeftRetriever(_index(), k=3)
    with pytest.raises(ValidationError, match="frozen"):
        retriever.k = 0


# ---------------------------------------------------------------------------- an index on disk


def test_a_path_is_opened_read_only_and_follows_new_commits(tmp_path: Path) -> None:
    path = tmp_path / "idx"
    writer = Index.create(path)
    writer.add_many(_documents()[:3])
    writer.commit()
    following = WeftRetriever(path, k=10)
    fixed = WeftRetriever(str(path), k=10, refresh=False)
    assert following.index.readonly and fixed.index.readonly
    assert [d.id for d in following.invoke("retrieval")] == writer.search(
        "retrieval", 10, RRF(), BM25Scorer()
    ).keys
    writer.add(Document("fresh", "fresh retrieval retrieval retrieval"))
    writer.commit()
    assert following.invoke("retrieval")[0].id == "fresh"
    assert asyncio.run(following.ainvoke("retrieval"))[0].id == "fresh"
    assert "fresh" not in [d.id for d in fixed.invoke("retrieval")]
    queries = ["retrieval", "graph", "dense retrieval"]
    assert following.batch(queries) == [following.invoke(q) for q in queries]  # threads share one index
    writer.close()


def test_a_missing_path_raises_index_not_found(tmp_path: Path) -> None:
    with pytest.raises(IndexNotFoundError):
        WeftRetriever(tmp_path / "nothing-here")


# ---------------------------------------------------------------------------- bad configuration


def _vectorless_index() -> Index:
    index = Index()
    index.add_many([Document("a", "sparse retrieval"), Document("b", "dense retrieval")])
    return index


BAD_CONFIGURATIONS: list[tuple[str, dict[str, Any], str]] = [
    ("k zero", {"k": 0}, "k must be a positive integer"),
    ("k negative", {"k": -3}, "k must be a positive integer"),
    ("k a string", {"k": "4"}, "k must be a positive integer"),
    ("k a bool", {"k": True}, "k must be a positive integer"),
    ("depth zero", {"depth": 0}, "depth must be a positive integer"),
    ("depth below k", {"k": 5, "depth": 3}, r"depth \(3\) must be at least k \(5\)"),
    ("no scorers", {"scorers": []}, "at least one Scorer"),
    ("a scorer that is not one", {"scorers": [BM25Scorer(), object()]}, "is not a Scorer"),
    ("scorers a string", {"scorers": "bm25"}, "sequence of Scorer"),
    ("a fuser that is not one", {"fuser": "rrf"}, "is not a Fuser"),
    ("embed_query not callable", {"embed_query": [0.0, 1.0]}, "embed_query must be"),
    ("vector scorer, no embed_query", {"scorers": [BM25Scorer(), VectorScorer()]}, "needs a query vector"),
    ("refresh not a bool", {"refresh": "yes"}, "refresh must be True or False"),
]


@pytest.mark.parametrize(
    ("options", "message"), [c[1:] for c in BAD_CONFIGURATIONS], ids=[c[0] for c in BAD_CONFIGURATIONS]
)
def test_a_bad_configuration_raises_a_typed_error_at_construction(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(InvalidParameterError, match=message):
        WeftRetriever(_index(), **options)


def test_an_index_that_is_not_one_is_refused() -> None:
    with pytest.raises(
        InvalidParameterError, match=r"index must be Searchable \(an Index, a ShardedIndex\) or the pa.*int"
    ):
        WeftRetriever(42)  # type: ignore[arg-type]


def test_a_sharded_index_is_retrieved_from_as_the_index_with_filters_passed_through(tmp_path: Path) -> None:
    """Any Searchable: a ShardedIndex gives the single index's documents, filters and k included."""
    sharded = ShardedIndex.create(tmp_path / "sharded", 3, vector_dim=4)
    sharded.add_many(_documents())
    sharded.commit()
    single = _index()
    try:
        for options in (
            {"embed_query": embed},
            {"embed_query": embed, "search_kwargs": {"filter": RECENT, "k": 3}},
            {"filter": "title in ('BM25', 'LUCENE')", "k": 7},
        ):
            mine = WeftRetriever(sharded, **options)
            theirs = WeftRetriever(single, **options)
            assert mine.index is sharded
            got = mine.invoke(QUERY)
            assert got and got == theirs.invoke(QUERY)
            assert asyncio.run(mine.ainvoke(QUERY, filter=RECENT)) == theirs.invoke(QUERY, filter=RECENT)
        filtered = WeftRetriever(sharded, embed_query=embed, k=7).invoke(QUERY, filter=RECENT)
        assert filtered and set(_keys(filtered)) <= RECENT_KEYS
        with ShardedIndex.create(tmp_path / "bare", 2) as bare:
            bare.add_many([Document("a", "sparse text")])
            bare.commit()
            with pytest.raises(InvalidParameterError, match="holds 1 documents and no vectors"):
                WeftRetriever(bare, embed_query=embed)
    finally:
        sharded.close()


def test_a_vector_signal_over_an_index_without_vectors_is_refused() -> None:
    with pytest.raises(InvalidParameterError, match="holds 2 documents and no vectors"):
        WeftRetriever(_vectorless_index(), embed_query=embed)
    # Text only is fine there, and so is an empty index that may receive vectors later.
    assert [d.id for d in WeftRetriever(_vectorless_index()).invoke("sparse")] == ["a"]
    WeftRetriever(Index(), embed_query=embed)


def test_unknown_options_are_refused_not_ignored() -> None:
    with pytest.raises(TypeError):
        WeftRetriever(_index(), kk=3)  # type: ignore[call-arg]


def test_bad_embeddings_and_queries_raise_typed_errors_at_query_time() -> None:
    index = _index()
    with pytest.raises(VectorDimensionError):
        WeftRetriever(index, embed_query=lambda text: [1.0, 0.0]).invoke(QUERY)

    def words(text: str) -> Any:
        return ["not", "numbers"]

    with pytest.raises(InvalidVectorError, match="embed_query's vector"):
        WeftRetriever(index, embed_query=words).invoke(QUERY)
    with pytest.raises(InvalidQueryError):
        WeftRetriever(index).invoke(3)  # type: ignore[arg-type]
    with pytest.raises(WeftError):
        asyncio.run(WeftRetriever(index, embed_query=lambda text: [1.0]).ainvoke(QUERY))


# ---------------------------------------------------------------------------- without langchain-core


def test_importing_without_langchain_core_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    # A None entry in sys.modules makes an import of that name raise ImportError;
    # every langchain_core module already loaded gets one, or it would be reused.
    for name in [name for name in sys.modules if name.split(".")[0] == "langchain_core"]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, "weftsearch.integrations.langchain")
    with pytest.raises(MissingDependencyError, match=r"pip install 'weft-search\[langchain\]'") as caught:
        importlib.import_module("weftsearch.integrations.langchain")
    assert isinstance(caught.value, ImportError)
    assert "langchain-core" in str(caught.value)
    # The integrations package itself needs nothing optional. (The package
    # attribute is restored too, so later imports see the original module.)
    monkeypatch.setattr(weftsearch, "integrations", weftsearch.integrations)
    monkeypatch.delitem(sys.modules, "weftsearch.integrations")
    assert importlib.import_module("weftsearch.integrations").__all__ == []


# ---------------------------------------------------------------------------- the README example


def test_the_readme_example_runs_and_prints_the_fused_order(capsys: pytest.CaptureFixture[str]) -> None:
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Use it with LangChain\n", 1)[1].split("\n## ", 1)[0]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    exec(compile(code, "README.md (Use it with LangChain)", "exec"), {"__name__": "readme_langchain"})
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "bm25 1 0.0328 [('bm25', 1), ('vector', 1)]"
    assert lines[1].startswith("rrf 2 ")
    assert lines[2:] == ["Dense retrieval compares embeddings", "Reciprocal rank fusion merges term rankings"]


def test_ainvoke_runs_on_the_async_index_s_read_threads() -> None:
    """ainvoke awaits the search through an AsyncIndex (issue 30 item 5): its pool, not LangChain's."""
    from concurrent.futures import ThreadPoolExecutor

    from weftsearch import AsyncIndex

    index = _index()
    recorder = ThreadRecorder()
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="mine") as pool:
        retriever = WeftRetriever(
            AsyncIndex(index, executor=pool), scorers=[recorder, VectorScorer()], k=5, embed_query=embed
        )
        assert retriever.index is index

        async def run() -> list[list[LCDocument]]:
            return list(await asyncio.gather(*(retriever.ainvoke(QUERY) for _ in range(6))))

        answers = asyncio.run(run())
        names = {thread.ident: thread.name for thread in threading.enumerate()}
    assert all(answer == retriever.invoke(QUERY) for answer in answers)
    assert {names.get(ident, "gone").split("_")[0] for ident in recorder.threads[:6]} == {"mine"}


def test_ainvoke_over_an_index_uses_the_shared_read_pool() -> None:
    from weftsearch.engine.asynchronous import read_executor

    recorder = ThreadRecorder()
    retriever = WeftRetriever(_index(), scorers=[recorder], k=3)
    asyncio.run(retriever.ainvoke(QUERY))
    pool_threads = {thread.ident for thread in read_executor()._threads}
    assert recorder.threads[0] in pool_threads


def test_an_index_made_with_an_embedder_embeds_the_query_itself(tmp_path: Path) -> None:
    from tests.fake_embedder import NAME, FakeEmbedder

    with Index.create(tmp_path / "idx", embedder=NAME) as index:
        index.add_many(
            [
                Document("sparse", "sparse retrieval with inverted indexes"),
                Document("dense", "dense retrieval with neural embeddings"),
                Document("graph", "graph walks over citation links"),
            ]
        )
    retriever = WeftRetriever(tmp_path / "idx", k=3)  # opened read-only: the embedder found by name
    documents = retriever.invoke("citation walks")
    assert [s["signal"] for s in documents[0].metadata["signals"]] == ["bm25", "vector"]
    with Index.open(tmp_path / "idx", readonly=True) as reopened:
        vector = FakeEmbedder().embed(["citation walks"])[0]
        _expected(
            reopened, documents, Query("citation walks", vector=vector), 3, BM25Scorer(), VectorScorer()
        )
    assert asyncio.run(retriever.ainvoke("citation walks")) == documents
