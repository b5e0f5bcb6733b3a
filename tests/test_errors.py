"""Every bad input raises the documented exception from weftsearch.errors.

Each case checks three things: the exact weft-search class (so a bare
KeyError, IndexError or TypeError from deep inside fails the test), that it is
a ``WeftError``, and that it is also the built-in exception its class promises
(``ValueError``, ``KeyError``, ``RuntimeError``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np
import pytest

from weftsearch import (
    RRF,
    BM25Scorer,
    Document,
    GraphScorer,
    Index,
    PageRankScorer,
    Query,
    RecencyScorer,
    ScoreFusion,
    Scorer,
    Snapshot,
    Stream,
    VectorScorer,
    WeightedRRF,
    errors,
    get_analyzer,
    make_fuser,
    register_analyzer,
)
from weftsearch.errors import (
    CorpusFormatError,
    CorruptIndexError,
    DuplicateKeyError,
    FormatVersionError,
    IndexNotFoundError,
    IndexStorageError,
    InvalidDocumentError,
    InvalidParameterError,
    InvalidQueryError,
    InvalidVectorError,
    ScorerOutputError,
    UnknownAnalyzerError,
    UnknownKeyError,
    UnknownSignalError,
    VectorDimensionError,
    WeftError,
)


def expect(error: type[WeftError], builtin: type[Exception], action: Callable[[], object]) -> None:
    with pytest.raises(Exception) as info:
        action()
    raised = info.value
    assert isinstance(raised, error), f"expected {error.__name__}, got {type(raised).__name__}: {raised}"
    assert isinstance(raised, WeftError)
    assert isinstance(raised, builtin)
    assert str(raised)


def small_index() -> Index:
    index = Index(analyzer="simple")
    index.add_many(
        [
            Document("a", "alpha beta", vector=np.array([1.0, 0.0])),
            Document("b", "beta gamma", vector=np.array([0.0, 1.0])),
        ]
    )
    return index


# ---------------------------------------------------------------- the hierarchy


@pytest.mark.parametrize(
    ("error", "builtin"),
    [
        (InvalidDocumentError, ValueError),
        (DuplicateKeyError, InvalidDocumentError),
        (UnknownKeyError, KeyError),
        (InvalidVectorError, ValueError),
        (VectorDimensionError, InvalidVectorError),
        (InvalidQueryError, ValueError),
        (InvalidParameterError, ValueError),
        (UnknownSignalError, ValueError),
        (ScorerOutputError, RuntimeError),
        (UnknownAnalyzerError, ValueError),
        (CorpusFormatError, ValueError),
        (IndexStorageError, OSError),
        (IndexNotFoundError, IndexStorageError),
        (CorruptIndexError, IndexStorageError),
        (FormatVersionError, IndexStorageError),
    ],
)
def test_error_hierarchy(error: type[WeftError], builtin: type[Exception]) -> None:
    assert issubclass(error, WeftError)
    assert issubclass(error, builtin)


def test_every_exported_error_is_a_weft_error() -> None:
    for name in errors.__all__:
        assert issubclass(getattr(errors, name), WeftError)


def test_unknown_key_error_message_is_not_quoted() -> None:
    assert str(UnknownKeyError("no document with key 'x'")) == "no document with key 'x'"


# ---------------------------------------------------------------- documents


@pytest.mark.parametrize("key", ["", None, 1, b"a", ("a",), "a\x00b"])
def test_bad_document_key(key: Any) -> None:
    expect(InvalidDocumentError, ValueError, lambda: Document(key, "text"))


def test_bad_document_text() -> None:
    expect(InvalidDocumentError, ValueError, lambda: Document("a", None))  # type: ignore[arg-type]
    expect(InvalidDocumentError, ValueError, lambda: Document("a", b"bytes"))  # type: ignore[arg-type]


def test_duplicate_key_within_one_add_many() -> None:
    index = Index()
    expect(
        DuplicateKeyError,
        ValueError,
        lambda: index.add_many([Document("a", "x"), Document("b", "y"), Document("a", "z")]),
    )
    assert len(index) == 0


def test_non_document_in_add_many() -> None:
    expect(InvalidDocumentError, ValueError, lambda: Index().add_many(["a"]))  # type: ignore[list-item]


@pytest.mark.parametrize(
    "vector",
    [[math.nan, 1.0], [1.0, math.inf], [-math.inf], [], [[1.0, 2.0]], 3.0, "abc", {"a": 1}, [None, 1.0]],
)
def test_bad_document_vector(vector: Any) -> None:
    expect(InvalidVectorError, ValueError, lambda: Document("a", vector=vector))


@pytest.mark.parametrize("vector", [[math.nan, 1.0], [math.inf], [], [[1.0]], "abc"])
def test_bad_query_vector(vector: Any) -> None:
    expect(InvalidVectorError, ValueError, lambda: Query(vector=vector))


def test_wrong_vector_width() -> None:
    index = small_index()
    expect(
        VectorDimensionError,
        ValueError,
        lambda: index.add(Document("c", vector=np.ones(3, dtype=np.float32))),
    )
    fixed = Index(vector_dim=4)
    expect(
        VectorDimensionError,
        ValueError,
        lambda: fixed.add(Document("c", vector=np.ones(3, dtype=np.float32))),
    )
    expect(
        VectorDimensionError,
        ValueError,
        lambda: index.search(Query(vector=np.ones(5, dtype=np.float32)), 5, RRF(), VectorScorer()),
    )


@pytest.mark.parametrize("time", ["2020-13-01", "2020", True, math.nan, math.inf, [1.0]])
def test_bad_document_time(time: Any) -> None:
    expect(InvalidDocumentError, ValueError, lambda: Document("a", time=time))


@pytest.mark.parametrize("time", ["now", False, math.nan])
def test_bad_query_time(time: Any) -> None:
    expect(InvalidQueryError, ValueError, lambda: Query(time=time))


@pytest.mark.parametrize(
    "fields",
    [
        {"tags": ["a", 1]},  # a list field holds strings or numbers, not both (issue 30)
        {"tags": [["a"]]},
        {"tags": [True]},
        {"meta": {"x": 1}},
        {"none": None},
        {"arr": np.array([1.0])},
        {"bad": math.nan},
        {"": "empty name"},
        {1: "int name"},
        None,
        [("a", 1)],
    ],
)
def test_fields_with_non_scalar_values(fields: Any) -> None:
    expect(InvalidDocumentError, ValueError, lambda: Document("a", fields=fields))


@pytest.mark.parametrize("links", ["b", [""], [1], None, 5])
def test_bad_links(links: Any) -> None:
    expect(InvalidDocumentError, ValueError, lambda: Document("a", links=links))


# ---------------------------------------------------------------- queries


@pytest.mark.parametrize("seeds", ["a", "abc", [""], [1], None, 5])
def test_bad_query_seeds(seeds: Any) -> None:
    expect(InvalidQueryError, ValueError, lambda: Query(seeds=seeds))


def test_bad_query_text_and_type() -> None:
    expect(InvalidQueryError, ValueError, lambda: Query(text=None))  # type: ignore[arg-type]
    index = small_index()
    expect(InvalidQueryError, ValueError, lambda: index.search(5, 5, RRF(), BM25Scorer()))  # type: ignore[arg-type]


# ---------------------------------------------------------------- k and depth


@pytest.mark.parametrize("k", [0, -1, -100, True, False, 2.0, 1.5, "5", None])
def test_bad_k_in_search(k: Any) -> None:
    index = small_index()
    expect(InvalidParameterError, ValueError, lambda: index.search("alpha", k, RRF(), BM25Scorer()))


@pytest.mark.parametrize("k", [0, -1, True, 3.0])
@pytest.mark.parametrize(
    "scorer",
    [BM25Scorer(), VectorScorer(), GraphScorer(), PageRankScorer(), RecencyScorer(1.0)],
    ids=["bm25", "vector", "graph", "pagerank", "recency"],
)
def test_bad_k_in_scorers(k: Any, scorer: Scorer) -> None:
    snapshot = small_index().snapshot()
    query = Query("alpha", vector=np.ones(2, dtype=np.float32), seeds=("a",))
    expect(InvalidParameterError, ValueError, lambda: scorer.score(snapshot, query, k))


@pytest.mark.parametrize("k", [0, -1, True, 2.5])
def test_bad_k_in_fusers(k: Any) -> None:
    snapshot = small_index().snapshot()
    stream = Stream([0, 1], [2.0, 1.0])
    for fuser in (RRF(), WeightedRRF([1.0]), ScoreFusion()):
        expect(InvalidParameterError, ValueError, partial(fuser.fuse, [stream], k, snapshot))


@pytest.mark.parametrize("depth", [0, -3, True, 10.0])
def test_bad_depth(depth: Any) -> None:
    index = small_index()
    expect(
        InvalidParameterError, ValueError, lambda: index.search("alpha", 1, RRF(), BM25Scorer(), depth=depth)
    )


def test_depth_less_than_k() -> None:
    index = small_index()
    expect(InvalidParameterError, ValueError, lambda: index.search("alpha", 10, RRF(), BM25Scorer(), depth=5))


# ---------------------------------------------------------------- analyzers


@pytest.mark.parametrize("name", ["nope", "English", ""])
def test_unknown_analyzer(name: str) -> None:
    expect(UnknownAnalyzerError, ValueError, lambda: Index(analyzer=name))
    expect(UnknownAnalyzerError, ValueError, lambda: get_analyzer(name))


def test_analyzer_that_is_not_one() -> None:
    expect(InvalidParameterError, ValueError, lambda: Index(analyzer=5))  # type: ignore[arg-type]
    expect(InvalidParameterError, ValueError, lambda: Index(analyzer=None))  # type: ignore[arg-type]


def test_register_bad_analyzer_name() -> None:
    expect(InvalidParameterError, ValueError, lambda: register_analyzer("", lambda: get_analyzer("simple")))


def test_registered_factory_with_wrong_name() -> None:
    register_analyzer("test-errors-misnamed", lambda: get_analyzer("simple"))
    expect(UnknownAnalyzerError, ValueError, lambda: get_analyzer("test-errors-misnamed"))


@pytest.mark.parametrize("vector_dim", [0, -1, 1.5, True, "3"])
def test_bad_vector_dim(vector_dim: Any) -> None:
    expect(InvalidParameterError, ValueError, lambda: Index(vector_dim=vector_dim))


# ---------------------------------------------------------------- scorer parameters


@pytest.mark.parametrize("k1", [-0.1, math.nan, math.inf, "1.2", None, True])
def test_bad_bm25_k1(k1: Any) -> None:
    expect(InvalidParameterError, ValueError, lambda: BM25Scorer(k1=k1))


@pytest.mark.parametrize("b", [-0.01, 1.01, math.nan, "0.5", None, True])
def test_bad_bm25_b(b: Any) -> None:
    expect(InvalidParameterError, ValueError, lambda: BM25Scorer(b=b))


@pytest.mark.parametrize(
    "make",
    [
        lambda: GraphScorer(max_depth=0),
        lambda: GraphScorer(max_depth=True),
        lambda: GraphScorer(seed_n=0),
        lambda: GraphScorer(seed_n=2.0),  # type: ignore[arg-type]
        lambda: GraphScorer("bm25"),  # type: ignore[arg-type]
        lambda: PageRankScorer(damping=1.0),
        lambda: PageRankScorer(damping=-0.1),
        lambda: PageRankScorer(damping=math.nan),
        lambda: PageRankScorer(tolerance=0.0),
        lambda: PageRankScorer(max_iterations=0),
        lambda: RecencyScorer(0),
        lambda: RecencyScorer(-5.0),
        lambda: RecencyScorer(None),  # type: ignore[arg-type]
        lambda: RecencyScorer(1.0, now="yesterday"),
    ],
)
def test_bad_scorer_parameters(make: Callable[[], object]) -> None:
    expect(InvalidParameterError, ValueError, make)


# ---------------------------------------------------------------- fusion parameters


@pytest.mark.parametrize("k", [-1, math.nan, math.inf, "60", None, True])
def test_bad_rrf_k(k: Any) -> None:
    expect(InvalidParameterError, ValueError, lambda: RRF(k))
    expect(InvalidParameterError, ValueError, lambda: WeightedRRF([1.0], k=k))


@pytest.mark.parametrize(
    "weights",
    [[-1.0, 1.0], [math.nan], [math.inf, 1.0], [0.0, 0.0], [], ["1"], [True, 1.0], [None], 5, None],
)
def test_bad_weighted_rrf_weights(weights: Any) -> None:
    expect(InvalidParameterError, ValueError, lambda: WeightedRRF(weights))


@pytest.mark.parametrize("weights", [[-1.0], [math.nan], [0.0], [], ["x"], 5])
def test_bad_score_fusion_weights(weights: Any) -> None:
    expect(InvalidParameterError, ValueError, lambda: ScoreFusion(weights))


def test_bad_score_fusion_norm() -> None:
    expect(InvalidParameterError, ValueError, lambda: ScoreFusion(norm="max"))  # type: ignore[arg-type]


def test_weights_count_not_matching_streams() -> None:
    index = small_index()
    expect(
        InvalidParameterError,
        ValueError,
        lambda: index.search("alpha", 5, WeightedRRF([1.0, 2.0, 3.0]), BM25Scorer(), VectorScorer()),
    )
    expect(
        InvalidParameterError,
        ValueError,
        lambda: index.search("alpha", 5, ScoreFusion([1.0]), BM25Scorer(), VectorScorer()),
    )


@pytest.mark.parametrize("name", ["nope", "RRF", "", "bm25"])
def test_unknown_fusion_name(name: str) -> None:
    expect(UnknownSignalError, ValueError, lambda: make_fuser(name))


def test_infinite_scores_in_score_fusion() -> None:
    snapshot = small_index().snapshot()
    stream = Stream([0, 1], [math.inf, 1.0])
    expect(InvalidParameterError, ValueError, lambda: ScoreFusion().fuse([stream], 2, snapshot))


# ---------------------------------------------------------------- search contract


def test_non_scorer_passed_to_search() -> None:
    index = small_index()
    expect(InvalidParameterError, ValueError, lambda: index.search("alpha", 5, RRF(), "bm25"))  # type: ignore[arg-type]
    expect(InvalidParameterError, ValueError, lambda: index.search("alpha", 5, RRF(), BM25Scorer(), None))  # type: ignore[arg-type]
    expect(InvalidParameterError, ValueError, lambda: index.search("alpha", 5, RRF()))


def test_non_fuser_passed_to_search() -> None:
    index = small_index()
    expect(InvalidParameterError, ValueError, lambda: index.search("alpha", 5, "rrf", BM25Scorer()))  # type: ignore[arg-type]


class BadScorer:
    """A custom scorer whose output breaks the contract."""

    name = "bad"

    def __init__(self, ids: Sequence[int], scores: Sequence[float], raw: object = None) -> None:
        self.ids = list(ids)
        self.scores = list(scores)
        self.raw = raw

    def score(self, snapshot: Snapshot, query: Query, k: int) -> Stream:
        if self.raw is not None:
            return self.raw  # type: ignore[return-value]
        return Stream(np.asarray(self.ids), np.asarray(self.scores))


@pytest.mark.parametrize(
    "scorer",
    [
        BadScorer([0, 2], [1.0, 0.5]),  # id past the last document
        BadScorer([-1], [1.0]),  # negative id
        BadScorer([0, 0], [1.0, 0.5]),  # the same document twice
        BadScorer([0, 1], [math.nan, 1.0]),  # NaN score
        BadScorer([], [], raw=[(0, 1.0)]),  # not a Stream
        BadScorer([], [], raw=(np.array([0]), np.array([1.0]))),
    ],
    ids=["id-too-large", "negative-id", "duplicate", "nan", "list", "tuple"],
)
def test_scorer_output_breaking_contract(scorer: BadScorer) -> None:
    index = small_index()
    expect(ScorerOutputError, RuntimeError, lambda: index.search("alpha", 5, RRF(), BM25Scorer(), scorer))


def test_scorer_returning_more_than_depth() -> None:
    index = small_index()
    scorer = BadScorer([0, 1], [2.0, 1.0])
    expect(ScorerOutputError, RuntimeError, lambda: index.search("alpha", 1, RRF(), scorer, depth=1))


class BadFuser:
    name = "bad-fuser"

    def fuse(self, streams: Sequence[Stream], k: int, keys: object) -> object:
        return "not a fused stream"


def test_fuser_output_breaking_contract() -> None:
    index = small_index()
    # Two streams: one stream alone passes through without calling the fuser (docs/ARCHITECTURE.md).
    expect(
        ScorerOutputError,
        RuntimeError,
        lambda: index.search("alpha", 5, BadFuser(), BM25Scorer(), BM25Scorer()),  # type: ignore[arg-type]
    )


def test_stream_of_mismatched_shapes() -> None:
    expect(InvalidParameterError, ValueError, lambda: Stream([0, 1], [1.0]))
    expect(InvalidParameterError, ValueError, lambda: Stream([[0]], [[1.0]]))


# ---------------------------------------------------------------- keys


def test_unknown_keys() -> None:
    index = small_index()
    expect(UnknownKeyError, KeyError, lambda: index.get("missing"))
    expect(UnknownKeyError, KeyError, lambda: index.snapshot().id_of("missing"))
    expect(UnknownKeyError, KeyError, lambda: index.snapshot().key(2))
    expect(UnknownKeyError, KeyError, lambda: index.snapshot().document(-1))


def test_delete_many_rejects_a_single_string() -> None:
    # A str is an iterable of one-character keys; like Query.seeds and
    # Document.links, delete_many must refuse it rather than delete "a" and "b".
    index = small_index()
    expect(InvalidParameterError, ValueError, lambda: index.delete_many("ab"))
    assert index.keys() == ["a", "b"]


@pytest.mark.parametrize("spec", ["text,bogus", "BM25", "", ",", "text,,vectors"])
def test_unknown_signal_name_on_the_command_line(spec: str) -> None:
    from weftsearch.cli import parse_signals  # imported here: the CLI module is optional to this file

    expect(UnknownSignalError, ValueError, lambda: parse_signals(spec))
