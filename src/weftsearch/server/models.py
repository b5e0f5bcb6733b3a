"""The API's request and response bodies (pydantic models): their names and docstrings are the schema's."""

from __future__ import annotations

from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr

from weftsearch.engine.stream import PlanValue
from weftsearch.highlight import MAX_FRAGMENT_SIZE, MAX_FRAGMENTS
from weftsearch.ranking.profiles import PROFILE_NAME

# ---------------------------------------------------------------------- request models

#: Profile names in request models; anchored, since pydantic's ``pattern`` searches.
NAME_PATTERN = "^" + PROFILE_NAME.pattern + "$"

_NO_EXTRA = ConfigDict(extra="forbid", allow_inf_nan=False)

#: A field value: a scalar, or a list of strings or of numbers (a list field; strict, so a
#: mixed list or one of booleans is refused by validation, not coerced).
FieldValue = Union[bool, int, float, str, list[StrictStr], list[Union[StrictInt, StrictFloat]]]
#: A value a facet counts (list fields count their values one by one).
FacetValue = Union[bool, int, float, str]


class ProfileRef(BaseModel):
    """A stored profile by name and (optionally) version; the newest version when ``version`` is absent."""

    model_config = _NO_EXTRA
    name: str = Field(pattern=NAME_PATTERN, description="the profile's name")
    version: int | None = Field(default=None, ge=1, description="a version; absent: the newest")


class QueryIn(BaseModel):
    """One query: what :class:`weftsearch.Query` holds."""

    model_config = _NO_EXTRA
    text: str = Field(default="", description="free text")
    syntax: Literal["plain", "lucene"] = Field(
        default="plain",
        description="how text is read: plain (a bag of words) or lucene (the query language: +must -not "
        '"phrases"~N field:term term^2 prefix* AND OR NOT (...)); a malformed query is answered 400 '
        "QuerySyntaxError with its position (error.position); an empty text is not parsed",
    )
    # Strict: a JSON true or "1.5" is refused (422), not read as a number (issue 26 item 9d).
    vector: list[StrictFloat] | None = Field(
        default=None,
        description="a query embedding of the index's width; absent: the server embeds the text when the "
        "ranking needs a vector and it knows the index's model (see query_vector in the response), "
        "and answers 400 MissingInputError when it cannot",
    )
    vector_model: str | None = Field(
        default=None,
        max_length=200,
        description="the model that made vector (its name, or its vector-set name); another model than "
        "the index's is refused (400)",
    )
    seeds: list[str] = Field(default_factory=list, description="document keys graph scorers start from")
    filter: str | None = Field(default=None, description="a filter in string form: year >= 1990 and ...")
    time: str | float | None = Field(default=None, description="'now' for recency: ISO-8601 or POSIX seconds")


class RankingIn(BaseModel):
    """Which ranking to run: a stored profile, or an inline spec (``rrf(bm25, vector, k=60)@100``)."""

    model_config = _NO_EXTRA
    profile: str | ProfileRef | None = Field(default=None, description="a profile name, or {name, version}")
    spec: str | None = Field(
        default=None, description="an inline ranking expression of the arm-spec language"
    )
    depth: int | None = Field(
        default=None, ge=1, description="candidates per scorer (default: the ranking's)"
    )


class HighlightIn(BaseModel):
    """What to highlight in each hit, as Elasticsearch's ``highlight`` (one pre and one post tag)."""

    model_config = _NO_EXTRA
    fields: list[str] | dict[str, dict[str, Any]] = Field(
        default_factory=lambda: ["text"],
        description='text fields to highlight: ["text"], or {"text": {}} as Elasticsearch writes it '
        "(per-field options are not supported: give them at this level)",
    )
    fragment_size: int = Field(default=150, ge=1, le=MAX_FRAGMENT_SIZE, description="characters per snippet")
    number_of_fragments: int = Field(
        default=3, ge=0, le=MAX_FRAGMENTS, description="snippets per field, best first; 0: the whole text"
    )
    pre_tags: list[str] = Field(
        default_factory=lambda: ["<em>"], min_length=1, max_length=1, description="the tag before a match"
    )
    post_tags: list[str] = Field(
        default_factory=lambda: ["</em>"], min_length=1, max_length=1, description="the tag after a match"
    )
    encoder: Literal["default", "html"] = Field(
        default="default",
        description="html: the text is HTML-escaped around the tags (safe to insert as HTML)",
    )


class SearchRequest(QueryIn, RankingIn):
    """``POST /v1/search``."""

    model_config = _NO_EXTRA
    k: int = Field(default=10, ge=1, description="hits wanted")
    explain: bool = Field(default=False, description="per-signal rank, score and contribution of each hit")
    explain_terms: bool = Field(
        default=False,
        description="each hit's explanation: its score broken into streams, query terms and fields "
        "(idf, tf, lengths; Elasticsearch's _explanation); offset pages (not after): one more search "
        "of the same snapshot (a sharded index: of the same cut, the tree one index gives)",
    )
    offset: int = Field(
        default=0,
        ge=0,
        description="hits to skip: the answer is hits offset .. offset + k - 1 of the search with "
        "k = offset + k (offset + k at most max_k, and at most the depth)",
    )
    after: str | None = Field(
        default=None,
        max_length=4096,
        description="a next_cursor from an earlier answer: the k hits after its page, from the snapshot "
        "that page searched, with the same query and ranking (400 InvalidCursorError otherwise; "
        "410 CursorExpiredError when the index no longer keeps that snapshot)",
    )
    highlight: HighlightIn | None = Field(
        default=None, description="snippets of each hit's stored text with the query's terms marked"
    )
    facets: list[str] | None = Field(
        default=None,
        max_length=32,
        description="field names whose values are counted over every document the filter matches "
        "(keyword, boolean, number and list fields); the answer's facets",
    )
    facet_k: int = Field(
        default=10, ge=1, le=10_000, description="values per facet field, most frequent first"
    )


class BatchSearchRequest(RankingIn):
    """``POST /v1/search/batch``: many queries on one snapshot."""

    model_config = _NO_EXTRA
    queries: list[QueryIn] = Field(description="the queries, answered in order")
    k: int = Field(default=10, ge=1)
    explain: bool = False
    facets: list[str] | None = Field(
        default=None,
        max_length=32,
        description="as in /v1/search, for each query (its own filter), on the batch's snapshot",
    )
    facet_k: int = Field(
        default=10, ge=1, le=10_000, description="values per facet field, most frequent first"
    )


class DocumentIn(BaseModel):
    """One document to add or replace (upsert), as :class:`weftsearch.Document` holds it."""

    model_config = _NO_EXTRA
    key: str
    text: str = ""
    vector: list[StrictFloat] | None = None  # strict, as QueryIn.vector
    links: list[str] = Field(default_factory=list)
    time: str | float | None = None
    fields: dict[str, FieldValue] = Field(default_factory=dict)
    text_fields: dict[str, StrictStr] = Field(
        default_factory=dict,
        description="named text fields besides text, name -> text (Document.text_fields): each name must "
        "be one of the index's schema (400 InvalidDocumentError naming it and the known ones otherwise)",
    )


class UpsertRequest(BaseModel):
    """``POST /v1/documents``: a batch, validated whole before anything changes."""

    model_config = _NO_EXTRA
    documents: list[DocumentIn]


class ProfileIn(BaseModel):
    """``POST /v1/profiles``: the next version of a profile."""

    model_config = _NO_EXTRA
    name: str = Field(pattern=NAME_PATTERN)
    spec: str = Field(description="a ranking expression, as in rrf(bm25, vector, k=60)@100")
    depth: int | None = Field(default=None, ge=1)
    filter: str | None = Field(default=None, description="a default filter, used when a request gives none")
    description: str = ""


class CompareRequest(BaseModel):
    """``POST /v1/compare``: rankings A and B on one query or a query set."""

    model_config = _NO_EXTRA
    a: RankingIn
    b: RankingIn
    query: QueryIn | None = Field(default=None, description="one query (or give queries)")
    queries: dict[str, QueryIn] | None = Field(default=None, description="query id -> query")
    k: int = Field(default=10, ge=1)
    p: float = Field(default=0.9, gt=0, lt=1, description="persistence of rank-biased overlap")
    judgements: dict[str, dict[str, int]] | None = Field(
        default=None, description="query id -> document key -> grade (with one query, its id is 'q')"
    )
    measures: list[str] = Field(default_factory=lambda: ["nDCG@10"])
    resamples: int = Field(default=1_000, ge=1)
    seed: int = Field(default=0, ge=0)
    confidence: float = Field(default=0.95, gt=0, lt=1)


class RankEvalRequest(BaseModel):
    """``POST /v1/rank_eval``: one ranking over a judged query set, ir_measures names out."""

    model_config = _NO_EXTRA
    ranking: RankingIn = Field(default_factory=RankingIn)
    queries: dict[str, QueryIn]
    judgements: dict[str, dict[str, int]]
    measures: list[str] = Field(default_factory=lambda: ["nDCG@10", "P@10", "RR", "R@100"])
    k: int = Field(default=100, ge=1)
    resamples: int = Field(default=1_000, ge=1)
    seed: int = Field(default=0, ge=0)
    confidence: float = Field(default=0.95, gt=0, lt=1)


# ---------------------------------------------------------------------- response models

#: Response models keep keys they do not declare (a new key is never silently dropped).
_OUT = ConfigDict(extra="allow")


class ErrorDetail(BaseModel):
    """What went wrong: the error's type, the request field it is about (or null) and a message."""

    model_config = _OUT
    type: str = Field(description="ValidationError, LimitExceeded, Unauthorized, InvalidFilterError, ...")
    field: str | None = Field(description="the request field, dotted (queries.0.filter), or null")
    message: str
    problems: list[dict[str, Any]] | None = Field(
        default=None, description="validation errors: every problem found, each with field and message"
    )
    position: int | None = Field(
        default=None, description="QuerySyntaxError: the character position in the query text"
    )


class ErrorResponse(BaseModel):
    """Every 4xx answer: ``{"error": {"type", "field", "message"}}``."""

    model_config = _OUT
    error: ErrorDetail


class SignalOut(BaseModel):
    """One stream's part in a hit (with ``explain``)."""

    model_config = _OUT
    signal: str = Field(description="the stream's label (the scorer's name)")
    rank: int | None = Field(description="1-based rank in that stream; null where it did not return the hit")
    score: float | None = Field(description="the scorer's raw score; null where absent")
    contribution: float = Field(description="the part of the fused score owed to this stream")


class SnippetOut(BaseModel):
    """One snippet of a hit's text field (offsets are code point offsets into the stored text)."""

    model_config = _OUT
    marked: str = Field(description="the snippet with each match between the tags")
    text: str = Field(description="the snippet unmarked (the stored text from start to end)")
    start: int
    end: int
    spans: list[list[int]] = Field(description="[start, end) of each match, in the stored text")
    matched: int = Field(description="distinct query terms and phrases in the snippet")


class FieldHighlightOut(BaseModel):
    """A hit's snippets of one text field, best first, or why there are none."""

    model_config = _OUT
    snippets: list[SnippetOut]
    reason: str | None = Field(
        description="why there is no snippet (text not stored, no match); null if some"
    )
    truncated: bool = Field(description="the text was longer than the characters analysed for highlighting")


class ExplanationOut(BaseModel):
    """Why a hit scored what it did (:class:`weftsearch.Explanation`, Elasticsearch's ``_explanation``)."""

    model_config = _OUT
    value: float | None = Field(description="the number this node explains (null if not finite)")
    description: str = Field(description="what the value is")
    details: list[ExplanationOut] = Field(description="what it was computed from, in order")


class HitOut(BaseModel):
    """One result."""

    model_config = _OUT
    key: str
    rank: int = Field(description="1-based position in the fused ranking")
    score: float = Field(description="the fused score")
    fields: dict[str, FieldValue] = Field(description="the document's fields")
    signals: list[SignalOut] | None = Field(default=None, description="per stream, with explain only")
    explanation: ExplanationOut | None = Field(
        default=None, description="with explain_terms: the score broken down (Index.explain)"
    )
    highlight: dict[str, list[str]] | None = Field(
        default=None,
        description="with highlight: each field's marked snippets, best first (as Elasticsearch)",
    )
    highlights: dict[str, FieldHighlightOut] | None = Field(
        default=None, description="with highlight: each field's snippets with their offsets, or why none"
    )


class RankingLabel(BaseModel):
    """The ranking that ran: an inline spec, or a profile's name and version."""

    model_config = _OUT
    spec: str | None = None
    profile: str | None = None
    version: int | None = None


class QueryVectorOut(BaseModel):
    """Where the query's vector came from, and which model made it."""

    model_config = _OUT
    source: str = Field(
        description="'request' (sent with the query), 'server' (the server embedded the text) or "
        "'none' (no vector: the ranking needs none); a query whose ranking needs a vector the server "
        "cannot make (no vector sent, and no --vectors-record, a sharded server, or empty text) is "
        "refused: 400 MissingInputError"
    )
    model: str | None = Field(
        description="the model that made the vector: the server's (source 'server') or the one the "
        "request's vector_model names; null when neither says"
    )
    vectors: str | None = Field(description="the vector set's name (all-minilm-l6-v2-int8), when known")
    dims: int | None = Field(description="the vector's width")


class FacetOut(BaseModel):
    """One value of a facet and the number of matching documents that hold it."""

    model_config = _OUT
    value: FacetValue
    count: int


class SearchResponse(BaseModel):
    """``POST /v1/search``: the fused ranking, best first."""

    model_config = _OUT
    generation: int = Field(description="the snapshot generation searched")
    ranking: RankingLabel
    fuser: str
    signals: list[str] = Field(description="stream labels, in the order of the ranking's scorers")
    depth: int = Field(description="candidates asked of each scorer")
    cut_short: list[str] = Field(
        description="signals a budget stopped before they found every candidate they could "
        "(an approximate search under a filter); empty when none was"
    )
    plans: dict[str, dict[str, PlanValue] | None] | None = Field(
        default=None,
        description="with explain: each signal's plan (vector: exact scan, lists probed, rows read, budget; "
        "bm25: compiled or numpy, postings, postings and blocks skipped), by label, a sharded stream's "
        "under shard-NNNN.<key> per shard; null for a scorer that does not describe its plan",
    )
    hits: list[HitOut]
    query_vector: QueryVectorOut
    offset: int | None = Field(default=None, description="hits of the ranking before these (rank offset)")
    next_cursor: str | None = Field(
        default=None,
        description="send as after= (with the same query and ranking) for the next page; null when the "
        "ranking ended on this page",
    )
    facets: dict[str, list[FacetOut]] | None = Field(
        default=None,
        description="with facets: per field, its values and how many matching documents hold each, count "
        "descending then value ascending (exact, live documents only)",
    )


class BatchSearchResponse(BaseModel):
    """``POST /v1/search/batch``: one result per query, in order."""

    model_config = _OUT
    results: list[SearchResponse]


class DocumentOut(BaseModel):
    """A stored document."""

    model_config = _OUT
    key: str
    text: str
    vector: list[float] | None
    links: list[str]
    time: float | None = Field(description="POSIX seconds, or null")
    fields: dict[str, FieldValue]
    text_fields: dict[str, str] = Field(
        description="the named text fields the schema stores, name -> text (an unstored field is absent)"
    )


_WRITE_GENERATION = (
    "the generation that holds this write: every read answered after this reply, by any process "
    "of the server, sees it (read-your-writes, with one process or --workers N)"
)
_WRITE_COMMITTED = (
    "whether the write was committed (durable) before this reply: true with serve --workers N, "
    "whose writer commits each write so the reader processes (which see commits only) see it; "
    "false with one process, where it is durable at the next POST /v1/commit or a graceful stop"
)


class UpsertResponse(BaseModel):
    """``POST /v1/documents``: how many documents were added or replaced."""

    model_config = _OUT
    upserted: int
    generation: int = Field(description=_WRITE_GENERATION)
    committed: bool = Field(description=_WRITE_COMMITTED)


class DeleteResponse(BaseModel):
    """``DELETE /v1/documents/{key}``."""

    model_config = _OUT
    deleted: str
    generation: int = Field(description=_WRITE_GENERATION)
    committed: bool = Field(description=_WRITE_COMMITTED)


class CommitResponse(BaseModel):
    """``POST /v1/commit``: the generation now durable."""

    model_config = _OUT
    generation: int


class SegmentOut(BaseModel):
    """One segment of the index."""

    model_config = _OUT
    name: str | None = Field(
        description="the segment's file name; null for a segment written (upserted) and not yet committed"
    )
    documents: int
    deleted: int
    bytes: int


class StatsResponse(BaseModel):
    """``GET /v1/stats``: :meth:`Index.stats`."""

    model_config = _OUT
    documents: int
    pending: int
    generation: int
    analyzer: str
    vector_dim: int | None
    vector_dtype: str | None
    segments: list[SegmentOut]
    bytes_on_disk: int
    readonly: bool
    query_model: QueryModelOut | None = Field(
        description="the model of the index's vectors, when the server was given its record"
    )


class QueryModelOut(BaseModel):
    """The index's vector model, and whether this server can embed query texts with it."""

    model_config = _OUT
    model: str
    vectors: str
    dims: int
    embeds_queries: bool
    problem: str | None = Field(description="why the server cannot embed queries, or null")


class HealthResponse(BaseModel):
    """``GET /health``: 200 ``ok``, or 503 ``unavailable`` with the reason."""

    model_config = _OUT
    status: str = Field(
        description="'ok' while the index is open and its directory is the one opened; 'closed' after "
        "shutdown; 'unavailable' (503) once the directory was deleted or replaced under the server"
    )
    reason: str | None = Field(default=None, description="why the index is unavailable (with 503 only)")


class ProfileOut(BaseModel):
    """One version of a ranking profile."""

    model_config = _OUT
    name: str
    version: int
    spec: str
    depth: int
    filter: str | None
    description: str
    provenance: dict[str, Any]
    created: float = Field(description="POSIX seconds")


class ProfileSummary(ProfileOut):
    """The newest version of a profile, with every version's number."""

    versions: list[int]


class ProfileListResponse(BaseModel):
    """``GET /v1/profiles``."""

    model_config = _OUT
    profiles: list[ProfileSummary]


class ScoredKey(BaseModel):
    """A key and its fused score."""

    model_config = _OUT
    key: str
    score: float


class MovedKey(BaseModel):
    """A key's rank under A and B (null where absent); ``change`` is ``rank_a - rank_b``."""

    model_config = _OUT
    key: str
    rank_a: int | None
    rank_b: int | None
    change: int | None


class ComparedQuery(BaseModel):
    """Both rankings of one query and how they differ."""

    model_config = _OUT
    a: list[ScoredKey]
    b: list[ScoredKey]
    moved: list[MovedKey]
    jaccard: float
    rbo: float


class Difference(BaseModel):
    """The paired bootstrap of B - A over queries."""

    model_config = _OUT
    mean: float
    low: float
    high: float
    p_value: float
    confidence: float
    resamples: int
    seed: int
    excludes_zero: bool


class PairedValues(BaseModel):
    """One query's measure under A and B."""

    model_config = _OUT
    a: float
    b: float
    delta: float


class ComparedMeasure(BaseModel):
    """One measure: means, per-query deltas and the interval of the difference."""

    model_config = _OUT
    mean_a: float
    mean_b: float
    per_query: dict[str, PairedValues]
    difference: Difference


class JudgedComparison(BaseModel):
    """Compare with judgements."""

    model_config = _OUT
    queries: list[str]
    unjudged: list[str]
    measures: dict[str, ComparedMeasure]


class GenerationPair(BaseModel):
    """The snapshot generation each side searched."""

    model_config = _OUT
    a: int
    b: int


class CompareResponse(BaseModel):
    """``POST /v1/compare``."""

    model_config = _OUT
    a: RankingLabel
    b: RankingLabel
    k: int
    p: float
    generation: GenerationPair
    queries: dict[str, ComparedQuery]
    mean_jaccard: float
    mean_rbo: float
    query_model: str | None = Field(
        description="the model that embedded query texts on the server, or null when none was"
    )
    judged: JudgedComparison | None = Field(default=None, description="with judgements only")


class EvaluatedMeasure(BaseModel):
    """One measure: its mean with a percentile bootstrap interval, and per-query values."""

    model_config = _OUT
    mean: float
    low: float
    high: float
    confidence: float
    resamples: int
    seed: int
    per_query: dict[str, float]


class RankEvalResponse(BaseModel):
    """``POST /v1/rank_eval``."""

    model_config = _OUT
    ranking: RankingLabel
    k: int
    generation: int
    query_model: str | None = Field(
        description="the model that embedded query texts on the server, or null when none was"
    )
    queries: list[str]
    unjudged: list[str]
    missing: list[str]
    measures: dict[str, EvaluatedMeasure]


StatsResponse.model_rebuild()
