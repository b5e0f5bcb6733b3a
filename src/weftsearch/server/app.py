"""The HTTP API: a FastAPI application over one index directory.

The server sits above the library and adds no new semantics: every search is
:meth:`Index.search` or :meth:`Index.search_many`, every ranking is built from
the arm-spec language of :mod:`weftsearch.ranking.specs` (a ranking profile is
spec text plus metadata, :mod:`weftsearch.ranking.profiles`), and compare and
rank_eval compute their measures and intervals with :mod:`weftsearch.eval`.

Concurrency: request handlers run on a thread pool. Searches read the newest
published snapshot without a lock (the engine's snapshot isolation), so a
search never waits on a commit. Writes (upserts, deletes, commits) serialise
on one lock in front of the index's single writer, and each write publishes
its snapshot before it answers, so the next search of any client sees it.

Read-your-writes holds in every mode: once a write is answered, every read
(search, get, stats) of any client sees it, at the generation the answer
names. One process publishes the write in memory (durable at the next commit
or a graceful stop). With ``serve --workers N`` the readers are other
processes, which can see only commits, so the writer commits each write
before it answers (``commit_writes``): the answer's ``committed`` says which.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import math
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, MutableMapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Annotated, Any, Union

from weftsearch.errors import MissingDependencyError

try:
    import prometheus_client
    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse, Response
    from pydantic import BaseModel, ConfigDict, Field, StrictFloat
    from starlette.exceptions import HTTPException as StarletteHTTPException
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError(
        f"the server needs the 'server' extra: pip install 'weft-search[server]' ({exc.name} is missing)"
    ) from exc

from weftsearch.documents import Document
from weftsearch.engine.filters import parse_filter
from weftsearch.engine.index import Index
from weftsearch.engine.query import Query
from weftsearch.engine.search import SearchResults
from weftsearch.engine.stream import PlanValue
from weftsearch.errors import (
    IndexClosedError,
    IndexLockedError,
    IndexStorageError,
    InvalidFilterError,
    InvalidParameterError,
    InvalidVectorError,
    ShardUnavailableError,
    UnknownKeyError,
    UnknownMeasureError,
    WeftError,
)
from weftsearch.eval.metrics import jaccard, rank_biased_overlap
from weftsearch.ranking.arm import Arm
from weftsearch.ranking.profiles import PROFILE_NAME, Profile, ProfileStore, build_arm
from weftsearch.scorers.vector import VectorScorer
from weftsearch.server.compare import judged_comparison, judged_evaluation, moved
from weftsearch.server.embedding import QueryEmbedder, check_fits, read_vector_model
from weftsearch.server.logs import redact
from weftsearch.server.sharded import (
    ServedIndex,
    SupportsShardedServing,
    check_sharded,
    sharded_profile_store,
)

__all__ = ["ServerLimits", "create_app", "DEFAULT_SPEC", "API_KEY_HEADER"]

LOG = logging.getLogger("weftsearch.server")

#: The ranking of a request that names neither a profile nor a spec.
DEFAULT_SPEC = "rrf(bm25, vector, k=60)@100"

#: The header that carries the API key (``Authorization: Bearer KEY`` works too).
API_KEY_HEADER = "X-API-Key"


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """Bounds on what one request may ask for; a request beyond one is refused (413 or 422).

    Every figure can be raised (or lowered) with ``weft-search serve``'s option of the same
    name (``--max-queries 20000``); the served ``/openapi.json`` states the server's figures
    (``maxItems``, ``maximum``, ``maxLength``, ``maxProperties``).

    Attributes:
        max_body_bytes: request body size (413 beyond it); the default holds 10,000 text
            queries with their judgements (a body of query vectors holds fewer).
        max_k: hits per query.
        max_depth: candidates per scorer.
        max_batch: queries per batch search request.
        max_queries: queries per compare or rank_eval request (a whole test set, such as
            SciFact's 300, gets one interval).
        max_documents: documents per upsert request.
        max_query_chars: characters of query text (and of a filter or spec).
        max_vector_dim: numbers in one vector.
        max_seeds: seed keys per query.
        max_resamples: bootstrap resamples per compare or rank_eval request.
        search_threads: threads of one batch search (``None``: the calling thread).

    """

    max_body_bytes: int = 16_000_000
    max_k: int = 1_000
    max_depth: int = 10_000
    max_batch: int = 256
    max_queries: int = 10_000
    max_documents: int = 1_000
    max_query_chars: int = 4_096
    max_vector_dim: int = 4_096
    max_seeds: int = 100
    max_resamples: int = 10_000
    search_threads: int | None = None

    def __post_init__(self) -> None:
        for name in (
            "max_body_bytes",
            "max_k",
            "max_depth",
            "max_batch",
            "max_queries",
            "max_documents",
            "max_query_chars",
            "max_vector_dim",
            "max_seeds",
            "max_resamples",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidParameterError(f"ServerLimits.{name} must be a positive integer, got {value!r}")
        threads = self.search_threads
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
            raise InvalidParameterError(
                f"ServerLimits.search_threads must be a positive integer or None, got {threads!r}"
            )


class ApiError(Exception):
    """An error answered as ``{"error": {"type", "field", "message"}}`` with ``status``."""

    def __init__(self, status: int, kind: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message
        self.field = field


def _error_body(kind: str, message: str, field: str | None) -> dict[str, Any]:
    return {"error": {"type": kind, "field": field, "message": message}}


def _status_of(exc: WeftError) -> int:
    if isinstance(exc, UnknownKeyError):
        return 404
    if isinstance(exc, IndexLockedError):
        return 409
    if isinstance(exc, (IndexClosedError, ShardUnavailableError)):
        return 503  # the server cannot answer now (closed, or a shard is down), the request is fine
    if isinstance(exc, IndexStorageError):
        return 500  # the server's files (damaged, unreadable), not the request, are at fault
    # Everything else the library raises deliberately is about its input: a bad filter, query,
    # vector, document, spec, measure or parameter.
    return 400


def _field_of(exc: WeftError, default: str | None) -> str | None:
    """The request field a library error is about, where its type says it."""
    prefix = "" if default is None or "." not in default else default.rsplit(".", 1)[0] + "."
    if isinstance(exc, InvalidFilterError):
        return prefix + "filter"
    if isinstance(exc, InvalidVectorError):
        return prefix + "vector"
    if isinstance(exc, UnknownMeasureError):
        return prefix + "measures"
    return default


@contextmanager
def _field(name: str | None) -> Iterator[None]:
    """Turn a library error raised inside into an :class:`ApiError` naming request field ``name``."""
    try:
        yield
    except ApiError:
        raise
    except WeftError as exc:
        raise ApiError(_status_of(exc), type(exc).__name__, str(exc), _field_of(exc, name)) from None


# ---------------------------------------------------------------------- request models

#: Profile names in request models; anchored, since pydantic's ``pattern`` searches.
_NAME_PATTERN = "^" + PROFILE_NAME.pattern + "$"

_NO_EXTRA = ConfigDict(extra="forbid", allow_inf_nan=False)

FieldValue = Union[bool, int, float, str]


class ProfileRef(BaseModel):
    """A stored profile by name and (optionally) version; the newest version when ``version`` is absent."""

    model_config = _NO_EXTRA
    name: str = Field(pattern=_NAME_PATTERN, description="the profile's name")
    version: int | None = Field(default=None, ge=1, description="a version; absent: the newest")


class QueryIn(BaseModel):
    """One query: what :class:`weftsearch.Query` holds."""

    model_config = _NO_EXTRA
    text: str = Field(default="", description="free text")
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


class SearchRequest(QueryIn, RankingIn):
    """``POST /v1/search``."""

    model_config = _NO_EXTRA
    k: int = Field(default=10, ge=1, description="hits wanted")
    explain: bool = Field(default=False, description="per-signal rank, score and contribution of each hit")


class BatchSearchRequest(RankingIn):
    """``POST /v1/search/batch``: many queries on one snapshot."""

    model_config = _NO_EXTRA
    queries: list[QueryIn] = Field(description="the queries, answered in order")
    k: int = Field(default=10, ge=1)
    explain: bool = False


class DocumentIn(BaseModel):
    """One document to add or replace (upsert), as :class:`weftsearch.Document` holds it."""

    model_config = _NO_EXTRA
    key: str
    text: str = ""
    vector: list[StrictFloat] | None = None  # strict, as QueryIn.vector
    links: list[str] = Field(default_factory=list)
    time: str | float | None = None
    fields: dict[str, FieldValue] = Field(default_factory=dict)


class UpsertRequest(BaseModel):
    """``POST /v1/documents``: a batch, validated whole before anything changes."""

    model_config = _NO_EXTRA
    documents: list[DocumentIn]


class ProfileIn(BaseModel):
    """``POST /v1/profiles``: the next version of a profile."""

    model_config = _NO_EXTRA
    name: str = Field(pattern=_NAME_PATTERN)
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


class HitOut(BaseModel):
    """One result."""

    model_config = _OUT
    key: str
    rank: int = Field(description="1-based position in the fused ranking")
    score: float = Field(description="the fused score")
    fields: dict[str, FieldValue] = Field(description="the document's fields")
    signals: list[SignalOut] | None = Field(default=None, description="per stream, with explain only")


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

#: The error answers every API route may give (documented in the schema).
_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": description}
    for status, description in (
        (400, "a bad value (filter, spec, a vector of another width or model, ...)"),
        (401, "no API key where one is needed"),
        (403, "a wrong API key"),
        (404, "no such document or profile"),
        (409, "the index is read-only here, or locked"),
        (413, "the request body is over the limit"),
        (422, "the request does not validate, or is over a limit; error.field names the field"),
        (503, "the index is unavailable: closed, a shard down, or its directory deleted or replaced"),
    )
}

#: Names pydantic puts in an error's location for the branch of a union it tried: not fields.
_BRANCHES = frozenset(
    {"str", "int", "float", "bool", "list[float]", "ProfileRef", "QueryIn", "RankingIn", "DocumentIn"}
)

# ---------------------------------------------------------------------- the server state


class _DirectoryWatch:
    """Notices the index directory deleted or replaced under the server, and then stays lost.

    The server keeps serving what it opened (mapped files outlive their
    names), so without a check searches answered 200 from the old data while
    stats and get answered 500 and ``/health`` said ok. A check is a ``stat``
    of the directory and of its manifest; the manifest is read again only
    when its file changed (a commit), to compare the index id. Once lost,
    the server answers 503 until restarted: it never mixes the old index
    with a new one (docs: README, "Deploy the server").
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        opened = path.stat()
        self._directory = (opened.st_dev, opened.st_ino)
        self._manifest: tuple[int, int, int, int] | None = None
        self._index_id = self._read_id()
        self.lost: str | None = None
        self._lock = threading.Lock()

    def _read_id(self) -> str:
        from weftsearch.storage.directory import MANIFEST, Manifest
        from weftsearch.storage.files import read_regular

        where = self.path / MANIFEST
        seen = where.stat()
        manifest = Manifest.from_bytes(read_regular(where), where)
        self._manifest = (seen.st_ino, seen.st_size, seen.st_mtime_ns, seen.st_ctime_ns)
        return manifest.index_id

    def problem(self) -> str | None:
        """Why the index cannot be served any more (and never again), or ``None`` while it can."""
        with self._lock:
            if self.lost is None:
                self.lost = self._check()
                if self.lost is not None:
                    LOG.error("%s: %s", self.path, self.lost)
            return self.lost

    def _check(self) -> str | None:
        from weftsearch.storage.directory import MANIFEST

        restart = "restart the server to serve what is there now"
        try:
            now = self.path.stat()
        except FileNotFoundError:
            return f"the index directory was deleted under the server; {restart}"
        except OSError as exc:
            return f"the index directory cannot be read ({exc.strerror}); {restart}"
        if (now.st_dev, now.st_ino) != self._directory:
            return f"the index directory was replaced under the server (another one is there); {restart}"
        try:
            seen = (self.path / MANIFEST).stat()
        except OSError:
            return f"the index directory lost its MANIFEST under the server; {restart}"
        if (seen.st_ino, seen.st_size, seen.st_mtime_ns, seen.st_ctime_ns) == self._manifest:
            return None
        try:
            index_id = self._read_id()
        except (OSError, WeftError) as exc:
            return f"the index directory's MANIFEST is no longer an index's ({type(exc).__name__}); {restart}"
        if index_id != self._index_id:
            return f"the index directory now holds another index (id {index_id}); {restart}"
        return None


@dataclass(frozen=True, slots=True)
class _Ranking:
    arm: Arm
    filter: str | None
    label: dict[str, Any]


class _Server:
    """What the handlers share: the index, its profiles, the write lock and the compiled rankings."""

    def __init__(
        self,
        index: ServedIndex,
        profiles: ProfileStore,
        limits: ServerLimits,
        embedder: QueryEmbedder | None,
        watch: _DirectoryWatch | None = None,
    ) -> None:
        self.index = index
        self.profiles = profiles
        self.limits = limits
        self.embedder = embedder
        self.watch = watch
        self.writes = threading.Lock()
        self._rankings: OrderedDict[tuple[Any, ...], _Ranking] = OrderedDict()
        self._rankings_lock = threading.Lock()

    # ---- rankings

    def _cached(self, key: tuple[Any, ...], make: Callable[[], _Ranking]) -> _Ranking:
        with self._rankings_lock:
            found = self._rankings.get(key)
            if found is not None:
                self._rankings.move_to_end(key)
                return found
        made = make()
        with self._rankings_lock:
            self._rankings[key] = made
            while len(self._rankings) > 256:
                self._rankings.popitem(last=False)
        return made

    def ranking(self, request: RankingIn, where: str = "") -> _Ranking:
        """The arm a request selects (a profile, a spec, or :data:`DEFAULT_SPEC`), built once and cached."""
        if request.profile is not None and request.spec is not None:
            raise ApiError(
                400, "InvalidParameterError", "give a profile or a spec, not both", where + "profile"
            )
        if request.spec is not None:
            spec = request.spec
            self.check_length(spec, where + "spec")
            with _field(where + "spec"):
                ranking = self._cached(
                    ("spec", spec), lambda: _Ranking(build_arm(spec), None, {"spec": spec.strip()})
                )
        elif request.profile is not None:
            ref = request.profile
            name, version = (ref, None) if isinstance(ref, str) else (ref.name, ref.version)
            with _field(where + "profile"):
                profile = self.profiles.get(name, version)
            ranking = self._cached(
                ("profile", profile.name, profile.version), lambda: self._of_profile(profile)
            )
        else:
            ranking = self._cached(
                ("spec", DEFAULT_SPEC),
                lambda: _Ranking(build_arm(DEFAULT_SPEC), None, {"spec": DEFAULT_SPEC}),
            )
        if request.depth is not None:
            if request.depth > self.limits.max_depth:
                raise self.too_large(where + "depth", request.depth, self.limits.max_depth, "max_depth")
            arm = ranking.arm
            ranking = _Ranking(
                Arm(arm.name, arm.scorers, arm.fuser, depth=request.depth), ranking.filter, ranking.label
            )
        if ranking.arm.depth > self.limits.max_depth:
            raise self.too_large(where + "depth", ranking.arm.depth, self.limits.max_depth, "max_depth")
        return ranking

    @staticmethod
    def _of_profile(profile: Profile) -> _Ranking:
        return _Ranking(profile.arm(), profile.filter, {"profile": profile.name, "version": profile.version})

    # ---- limits and queries

    @staticmethod
    def too_large(field: str, value: int, limit: int, option: str | None = None) -> ApiError:
        """The 422 of a request over a limit, naming the limit and the ``serve`` option that sets it."""
        where = f" (weft-search serve --{option.replace('_', '-')})" if option else ""
        return ApiError(
            422, "LimitExceeded", f"{field} is {value}; this server allows at most {limit}{where}", field
        )

    def check_length(self, text: str | None, field: str) -> None:
        if text is not None and len(text) > self.limits.max_query_chars:
            raise self.too_large(field, len(text), self.limits.max_query_chars, "max_query_chars")

    def check_k(self, k: int, field: str = "k") -> None:
        if k > self.limits.max_k:
            raise self.too_large(field, k, self.limits.max_k, "max_k")

    def check_batch(self, count: int, field: str, limit: str = "max_batch") -> None:
        """Refuse no queries, or more than the limit named ``limit`` (``max_batch``, ``max_queries``)."""
        bound = getattr(self.limits, limit)
        if count > bound:
            raise self.too_large(field, count, bound, limit)
        if count == 0:
            raise ApiError(422, "InvalidParameterError", f"{field} is empty", field)

    def query(self, q: QueryIn, default_filter: str | None, where: str = "") -> Query:
        """The :class:`Query` of ``q``, each part checked under its own field name (no embedding)."""
        self.check_length(q.text, where + "text")
        self.check_length(q.filter, where + "filter")
        if q.vector is not None and len(q.vector) > self.limits.max_vector_dim:
            raise self.too_large(
                where + "vector", len(q.vector), self.limits.max_vector_dim, "max_vector_dim"
            )
        self.check_vector_source(q, where)
        if len(q.seeds) > self.limits.max_seeds:
            raise self.too_large(where + "seeds", len(q.seeds), self.limits.max_seeds, "max_seeds")
        with _field(where + "text"):
            Query(text=q.text)
        with _field(where + "seeds"):
            Query(seeds=tuple(q.seeds))
        with _field(where + "time"):
            Query(time=q.time)
        filter_text = q.filter if q.filter is not None else default_filter
        with _field(where + "filter"):
            parsed = None if filter_text is None else parse_filter(filter_text)
        with _field(where + "vector"):
            return Query(
                text=q.text, vector=_vector(q.vector), seeds=tuple(q.seeds), time=q.time, filter=parsed
            )

    def check_vector_source(self, q: QueryIn, where: str) -> None:
        """Refuse a vector of another width than the index's, or declared to come from another model."""
        model = self.embedder.model if self.embedder is not None else None
        if q.vector_model is not None:
            if q.vector is None:
                raise ApiError(
                    422,
                    "InvalidParameterError",
                    "vector_model says which model made the vector, and no vector was sent",
                    where + "vector_model",
                )
            if model is not None and not model.accepts(q.vector_model):
                raise ApiError(
                    400,
                    "VectorModelMismatch",
                    f"the query vector was made with {q.vector_model!r} ({len(q.vector)} dims), but "
                    f"this index's vectors were made with {model.describe()}; embed the query with "
                    "that model, or send the text only and let the server embed it",
                    where + "vector_model",
                )
        width = self.index.vector_dim
        if q.vector is not None and width is not None and len(q.vector) != width:
            declared = f"made with {q.vector_model!r}, " if q.vector_model is not None else ""
            made = f"made with {model.describe()}" if model is not None else "of unrecorded model"
            raise ApiError(
                400,
                "VectorModelMismatch",
                f"the query vector ({declared}{len(q.vector)} dims) is not of this index's width: "
                f"its vectors have {width} dims ({made})",
                where + "vector",
            )

    def queries(
        self, items: Sequence[tuple[QueryIn, str]], ranking: _Ranking
    ) -> tuple[list[Query], list[dict[str, Any]]]:
        """The :class:`Query` of each ``(query, field prefix)`` and where its vector came from.

        A query without a vector whose ranking needs one (a scorer's
        ``missing_input`` says ``"a query vector"``) and with text gets the
        text embedded with the index's model, when the server knows it; the
        texts of one request are embedded in one batch.
        """
        built = [self.query(q, ranking.filter, where) for q, where in items]
        model = self.embedder.model if self.embedder is not None else None
        sources: list[dict[str, Any]] = []
        for q in (q for q, _ in items):
            if q.vector is None:
                sources.append({"source": "none", "model": None, "vectors": None, "dims": None})
                continue
            named, vectors = q.vector_model, None  # a vector that names no model: only its width is known
            if model is not None and q.vector_model is not None:  # accepted by check_vector_source
                named, vectors = model.name, model.vectors
            sources.append({"source": "request", "model": named, "vectors": vectors, "dims": len(q.vector)})
        needs = any(query.vector is None for query in built) and self.needs_vector(ranking)
        todo = [i for i, query in enumerate(built) if query.vector is None and query.text.strip()]
        if needs and todo and self.embedder is not None:
            self.embed(built, sources, todo, items)
        if needs:
            # Never a silent degrade: a vector stream searched without a query vector is empty,
            # so a hybrid ranking would quietly be its other streams alone (as eval refuses).
            for i, query in enumerate(built):
                if query.vector is None:
                    raise self.missing_vector(ranking, items[i][1])
        return built, sources

    def embed(
        self,
        built: list[Query],
        sources: list[dict[str, Any]],
        todo: list[int],
        items: Sequence[tuple[QueryIn, str]],
    ) -> None:
        """Give the queries at ``todo`` the vector of their text (one batch), and say so in ``sources``."""
        assert self.embedder is not None
        embedder = self.embedder
        with _field(items[todo[0]][1] + "text"):
            rows = embedder.embed([built[i].text for i in todo])
        for i, row in zip(todo, rows, strict=True):
            query = built[i]
            built[i] = Query(
                text=query.text, vector=row, seeds=query.seeds, time=query.time, filter=query.filter
            )
            sources[i] = {
                "source": "server",
                "model": embedder.model.name,
                "vectors": embedder.model.vectors,
                "dims": embedder.model.dims,
            }

    def missing_vector(self, ranking: _Ranking, where: str) -> ApiError:
        """The 400 of a query without a vector whose ranking needs one, naming what is missing."""
        label = ranking.label.get("spec") or f"profile {ranking.label.get('profile')!r}"
        width = self.index.vector_dim
        send = f"send the query's vector in {where}vector" + (f" ({width} numbers)" if width else "")
        if not isinstance(self.index, Index):
            why = "a server over a sharded index cannot embed query text"
        elif self.embedder is None:
            why = (
                "this server cannot embed query text (it was started without --vectors-record, "
                "the record of the model that made the index's vectors)"
            )
        else:
            why = "the query's text is empty, so the server has nothing to embed"
        return ApiError(
            400,
            "MissingInputError",
            f"the ranking {label} has a vector scorer, which needs a query vector, and the query has "
            f"none: {why}; {send}, or choose a ranking without the vector scorer (spec 'bm25')",
            where + "vector",
        )

    def needs_vector(self, ranking: _Ranking) -> bool:
        """Whether a scorer of ``ranking`` lacks a query vector (not merely vectors in the index)."""
        if not isinstance(self.index, Index):
            # No snapshot here (the shards may be Ray actors): the vector scorer needs a query
            # vector wherever the shards hold vectors.
            return self.index.vector_dim is not None and any(
                isinstance(scorer, VectorScorer) for scorer in ranking.arm.scorers
            )
        snapshot = self.index.snapshot()
        probe = Query()
        for scorer in ranking.arm.scorers:
            missing = getattr(scorer, "missing_input", None)
            if callable(missing) and missing(snapshot, probe) == "a query vector":
                return True
        return False

    # ---- writing

    def check_writable(self) -> None:
        if self.index.readonly:
            raise ApiError(409, "ReadOnly", "this server serves a read-only index; writes go to its writer")


def _vector(values: list[float] | None) -> Any:
    if values is None:
        return None
    import numpy as np

    wide = np.asarray(values, dtype=np.float64)
    if wide.size and float(np.abs(wide).max()) > float(np.finfo(np.float32).max):
        raise InvalidVectorError("a vector value is beyond float32's range (vectors are stored as float32)")
    return wide.astype(np.float32)


def _hits(results: SearchResults, explain: bool) -> list[dict[str, Any]]:
    out = []
    for hit in results:
        row = hit.to_dict()
        if not explain:
            del row["signals"]
        else:
            for signal in row["signals"]:
                if signal["score"] is not None and not math.isfinite(signal["score"]):
                    signal["score"] = None
        out.append(row)
    return out


def _search_body(
    results: SearchResults, ranking: _Ranking, explain: bool, source: dict[str, Any]
) -> dict[str, Any]:
    return {
        "query_vector": source,
        "generation": results.generation,
        "ranking": ranking.label,
        "fuser": results.fuser,
        "signals": list(results.signals),
        "depth": results.depth,
        "cut_short": list(results.cut_short),
        **({"plans": results.plans} if explain else {}),
        "hits": _hits(results, explain),
    }


#: Where each :class:`ServerLimits` figure shows in the schema: (model, property, JSON Schema keyword).
_LIMITED: dict[str, tuple[tuple[str, str, str], ...]] = {
    "max_k": tuple(
        (m, "k", "maximum")
        for m in ("SearchRequest", "BatchSearchRequest", "CompareRequest", "RankEvalRequest")
    ),
    "max_depth": tuple(
        (m, "depth", "maximum") for m in ("SearchRequest", "BatchSearchRequest", "RankingIn", "ProfileIn")
    ),
    "max_batch": (("BatchSearchRequest", "queries", "maxItems"),),
    "max_queries": (
        ("CompareRequest", "queries", "maxProperties"),
        ("RankEvalRequest", "queries", "maxProperties"),
    ),
    "max_documents": (("UpsertRequest", "documents", "maxItems"),),
    "max_query_chars": tuple(
        (m, p, "maxLength") for m in ("QueryIn", "SearchRequest") for p in ("text", "filter")
    )
    + tuple(
        (m, "spec", "maxLength") for m in ("SearchRequest", "BatchSearchRequest", "RankingIn", "ProfileIn")
    )
    + (("ProfileIn", "filter", "maxLength"),),
    "max_vector_dim": tuple((m, "vector", "maxItems") for m in ("QueryIn", "SearchRequest", "DocumentIn")),
    "max_seeds": (("QueryIn", "seeds", "maxItems"), ("SearchRequest", "seeds", "maxItems")),
    "max_resamples": (
        ("CompareRequest", "resamples", "maximum"),
        ("RankEvalRequest", "resamples", "maximum"),
    ),
}


def _document_limits(schema: dict[str, Any], limits: ServerLimits) -> None:
    """Write this server's :class:`ServerLimits` into its OpenAPI ``schema`` (in place).

    Each bounded property gets the JSON Schema keyword that states its limit
    (on the non-null branch of an optional one) and a sentence naming the
    ``serve`` option that sets it; the body limit goes in the API's description.
    The server enforces the same figures itself (422 LimitExceeded, 413).
    """
    models = schema.get("components", {}).get("schemas", {})
    for name, places in _LIMITED.items():
        value = getattr(limits, name)
        for model, prop, keyword in places:
            found = models.get(model, {}).get("properties", {}).get(prop)
            if found is None:
                continue
            wanted = {"maximum": ("integer",), "maxItems": ("array",), "maxLength": ("string",)}.get(
                keyword, ("object",)
            )
            branches = found.get("anyOf", [found])
            for branch in branches:
                if branch.get("type") in wanted:
                    branch[keyword] = value
            said = found.get("description", "")
            option = "--" + name.replace("_", "-")
            found["description"] = (said + "; " if said else "") + f"at most {value} here (serve {option})"
    info = schema.setdefault("info", {})
    info["description"] = (
        f"Request bodies over {limits.max_body_bytes} bytes are refused with 413 (serve --max-body-bytes); "
        "every other limit is stated on its field, and a request over one is refused with 422 LimitExceeded."
    )


def _check_multiprocess_metrics(folder: str | PathLike[str]) -> None:
    """Refuse a metrics folder prometheus_client will not write to (it decides when first imported)."""
    from prometheus_client import values

    named = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if values.ValueClass is values.MutexValue or named is None or Path(named) != Path(folder):
        raise InvalidParameterError(
            f"metrics_dir {str(folder)!r} needs PROMETHEUS_MULTIPROC_DIR set to it before "
            "prometheus_client is first imported in this process (weft-search serve --workers N does that)"
        )
    if not Path(folder).is_dir():
        raise InvalidParameterError(f"metrics_dir {str(folder)!r} is not a folder")


def _answers(model: type[BaseModel], *, errors: bool = True) -> dict[str, Any]:
    """A route's response model and documented error answers.

    The handlers return dicts; FastAPI validates each against ``model`` and
    drops nothing (the models keep undeclared keys, and keys a dict does not
    have are not added: ``response_model_exclude_unset``).
    """
    return {
        "response_model": model,
        "response_model_exclude_unset": True,
        "responses": dict(_ERRORS) if errors else {},
    }


def _document_body(document: Document) -> dict[str, Any]:
    return {
        "key": document.key,
        "text": document.text,
        "vector": None if document.vector is None else [float(x) for x in document.vector],
        "links": list(document.links),
        "time": document.timestamp,
        "fields": dict(document.fields),
    }


# ---------------------------------------------------------------------- body limit, keys, metrics


class _BodyLimit:
    """ASGI middleware: answer 413 once a request body exceeds ``limit`` bytes (declared or streamed)."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = -1
                if declared > self.limit or declared < 0:
                    await self._refuse(send, declared)
                    return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await self._refuse(send, size)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        sent = False

        async def replay() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            following: dict[str, Any] = await receive()  # e.g. http.disconnect
            return following

        await self.app(scope, replay, send)

    async def _refuse(self, send: Any, size: int) -> None:
        message = (
            f"the request body is over this server's limit of {self.limit} bytes "
            "(weft-search serve --max-body-bytes)"
        )
        if size < 0:
            message = "the request's Content-Length is not a number"
        payload = json.dumps(_error_body("PayloadTooLarge", message, None)).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413 if size >= 0 else 400,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(payload)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload})


def _offered_key(request: Request) -> str | None:
    offered = request.headers.get(API_KEY_HEADER)
    if offered is None:
        authorization = request.headers.get("authorization", "")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() == "bearer" and token:
            offered = token.strip()
    return offered


def _key_matches(offered: str, expected: bytes) -> bool:
    """Constant-time comparison of the SHA-256 digests (so not even the key's length shows in the time)."""
    digest = hashlib.sha256(offered.encode("utf-8", "surrogateescape")).digest()
    return hmac.compare_digest(digest, hashlib.sha256(expected).digest())


_WRITE_PATHS = re.compile(r"^/v1/(documents|commit|profiles)(/|$)")


def _is_write(method: str, path: str) -> bool:
    return method in ("POST", "PUT", "PATCH", "DELETE") and _WRITE_PATHS.match(path) is not None


#: The explorer page's files (``static/``), by URL path: served to anyone, since they hold no
#: data; the page asks for the key itself when the API answers 401.
_PAGE_FILES = {
    "/": ("explorer.html", "text/html; charset=utf-8"),
    "/explorer/explorer.js": ("explorer.js", "text/javascript; charset=utf-8"),
    "/explorer/explorer.css": ("explorer.css", "text/css; charset=utf-8"),
}


def _needs_key(method: str, path: str, reads_too: bool) -> bool:
    if path == "/health" or (method in ("GET", "HEAD") and path in _PAGE_FILES):
        return False
    if _is_write(method, path):
        return True
    return reads_too and path != "/openapi.json"


def _endpoint(app: FastAPI, request: Request) -> str:
    """The route template a request reached (or would have, when refused before routing).

    Metrics label by template (``/v1/documents/{key}``), never by the raw path,
    so their number of series stays bounded.
    """
    route = request.scope.get("route")
    if route is None:
        from starlette.routing import Match

        for candidate in app.router.routes:
            if candidate.matches(request.scope)[0] == Match.FULL:
                route = candidate
                break
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else "unmatched"


# ---------------------------------------------------------------------- the application


def create_app(
    index_path: str | PathLike[str] | SupportsShardedServing,
    *,
    api_key: str | None = None,
    read_key_required: bool = False,
    limits: ServerLimits | None = None,
    readonly: bool = False,
    writer_socket: str | None = None,
    vectors_record: str | PathLike[str] | None = None,
    metrics_dir: str | PathLike[str] | None = None,
    commit_writes: bool = False,
) -> FastAPI:
    """The weft-search HTTP API over the index at ``index_path`` (opened here, closed at shutdown).

    Args:
        index_path: an index directory made by ``weft-search index`` or :meth:`Index.create`;
            or an open :class:`weftsearch.distributed.ShardedIndex` (local or Ray
            shards), served through the same :class:`~weftsearch.engine.searchable.Searchable`
            protocol as an index (:mod:`weftsearch.server.sharded`): every
            endpoint answers with the sharded index's own results (a search is
            ``ShardedIndex.search_many``'s, a document ``ShardedIndex.get``'s,
            the statistics ``ShardedIndex.stats``'s, the generation its cut);
            profiles are kept beside its ``SHARDS`` record; graph rankings are served (the
            whole-collection protocol, docs/SCALING.md "Graph scorers"); a read-only
            one adopts its writer's newest recorded cut before every read;
            a shard that cannot be reached answers 503 ``ShardUnavailableError``
            naming it. The caller opened it and closes it: at shutdown the
            server commits it (when writable) and leaves it open. ``readonly``
            and ``writer_socket`` are the opener's choice (``readonly`` must
            match it), and ``vectors_record`` is refused.
        api_key: with a key, every write (upsert, delete, commit, profile creation)
            needs it in ``X-API-Key`` or ``Authorization: Bearer``: 401 without,
            403 with another. Compared in constant time; never logged.
        read_key_required: reads (search, documents, stats, compare, rank_eval,
            metrics) need the key as well (``/health`` never does).
        limits: bounds on requests (:class:`ServerLimits`).
        readonly: open the index read-only (writes answer 409; every read first
            adopts the writer's newest commit with :meth:`Index.refresh`).

        writer_socket: with ``readonly``, the Unix socket of the one writer
            process (``weft-search serve --workers N``): write requests that
            pass the key check here are forwarded there whole and its answer
            is returned.
        vectors_record: the record ``weft-search embed`` wrote for the index's
            vectors (:mod:`weftsearch.server.embedding`): a search sending text
            only is then embedded with that model when its ranking needs a
            vector, and a vector declared (``vector_model``) to come from
            another model is refused. Without the ``embed`` extra the server
            still serves, and such a search gets a 400 naming the extra.
        metrics_dir: with several processes serving one port (``--workers N``),
            the folder every process writes its metric values to
            (prometheus_client's multiprocess mode: ``PROMETHEUS_MULTIPROC_DIR``
            must name it before prometheus_client is first imported), so
            ``/metrics`` reports the whole server, whichever process answers.
        commit_writes: commit every upsert and delete before answering it (the
            ``--workers N`` writer: its readers see commits only, so a write
            answered uncommitted would stay invisible to them). Each write is
            then durable when answered, at the price of a commit per request:
            send documents in batches.

    At shutdown the index is committed (when writable) and closed: writes
    acknowledged but not yet committed are kept by a graceful stop, and lost
    by a crash, as with the library.

    Raises:
        IndexNotFoundError: no index at ``index_path``.
        IndexLockedError: another writer holds it (and not ``readonly``).
        InvalidParameterError: ``read_key_required`` without a key, or an empty
            key, or a ``vectors_record`` of another width than the index's vectors.
        CorpusFormatError: ``vectors_record`` is not such a record.

    """
    limits = limits or ServerLimits()
    if metrics_dir is not None:
        _check_multiprocess_metrics(metrics_dir)
    if api_key is not None and (not isinstance(api_key, str) or not api_key):
        raise InvalidParameterError("api_key must be a non-empty string")
    if writer_socket is not None and not readonly:
        raise InvalidParameterError("writer_socket is for read-only servers (the writer writes itself)")
    if commit_writes and readonly:
        raise InvalidParameterError("commit_writes is for a writable server (a read-only one writes nothing)")
    if read_key_required and api_key is None:
        raise InvalidParameterError("read_key_required needs an api_key")
    expected = None if api_key is None else api_key.encode("utf-8", "surrogateescape")
    index: ServedIndex
    owned = isinstance(index_path, (str, PathLike))  # the server closes only what it opened
    if isinstance(index_path, (str, PathLike)):
        model = None if vectors_record is None else read_vector_model(vectors_record)
        index = Index.open(Path(index_path), readonly=readonly, background_merge=not readonly)
        try:
            profiles = ProfileStore(index_path)
            index.refresh()  # publish a snapshot, so the first search takes no lock
            if model is not None:
                check_fits(model, index.vector_dim, vectors_record, index_path)
            embedder = None if model is None else QueryEmbedder(model)
            watch = _DirectoryWatch(Path(index_path))
        except BaseException:
            index.close(discard=True)
            raise
    else:
        sharded = check_sharded(index_path, readonly, writer_socket, vectors_record)
        index = sharded
        profiles = sharded_profile_store(sharded)
        embedder = None
        watch = None
    state = _Server(index, profiles, limits, embedder, watch)

    def unavailable() -> str | None:
        """Why the index cannot be served (its directory deleted or replaced), or ``None``."""
        return None if watch is None else watch.problem()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        if metrics_dir is not None:
            # This process no longer answers: its live gauges (weft_server_processes) go;
            # its counts stay in the files, since the server did serve those requests.
            from prometheus_client import multiprocess

            multiprocess.mark_process_dead(os.getpid(), str(metrics_dir))  # type: ignore[no-untyped-call]
        with state.writes:
            problem = unavailable()
            if problem is not None and not index.readonly and not index.closed:
                # Committing now would write this index's manifest into whatever is there now.
                LOG.error("no commit at shutdown (uncommitted writes are lost): %s", problem)
            elif not index.readonly and not index.closed:
                try:
                    index.commit()  # a graceful shutdown keeps what was written (a no-op when nothing was)
                except WeftError as exc:
                    LOG.error("the commit at shutdown failed; uncommitted writes are lost: %s", exc)
            if owned:
                assert isinstance(index, Index)
                index.close(discard=True)

    app = FastAPI(
        lifespan=lifespan,
        title="weft-search",
        version="1",
        summary="Hybrid retrieval over one index: search, documents, ranking profiles, compare and evaluate.",
        openapi_url="/openapi.json",
        docs_url=None,  # FastAPI's documentation pages load scripts from a CDN; the server works offline
        redoc_url=None,
    )
    app.state.weft = state
    schema_of_code = app.openapi

    def openapi_with_limits() -> dict[str, Any]:
        """FastAPI's schema with this server's limits written in (once, then cached as FastAPI does)."""
        if app.openapi_schema is None:
            _document_limits(schema_of_code(), limits)
        assert app.openapi_schema is not None
        return app.openapi_schema

    app.openapi = openapi_with_limits  # type: ignore[method-assign]

    registry = prometheus_client.CollectorRegistry()
    # With metrics_dir (the --workers N readers), every metric below writes its values to files in
    # that folder (prometheus_client's multiprocess mode, chosen by PROMETHEUS_MULTIPROC_DIR when
    # prometheus_client is imported), and /metrics sums the files of every process.
    requests_total = prometheus_client.Counter(
        "weft_requests",
        "HTTP requests by endpoint and status",
        ["endpoint", "method", "status"],
        registry=registry,
    )
    latency = prometheus_client.Histogram(
        "weft_request_seconds", "request latency in seconds by endpoint", ["endpoint"], registry=registry
    )
    # Gauges are set when /metrics is scraped, by the process that answers: with several
    # processes the most recently written value wins (each first adopts the newest commit).
    generation = prometheus_client.Gauge(
        "weft_index_generation",
        "the index generation searches see",
        registry=registry,
        multiprocess_mode="mostrecent",
    )
    documents = prometheus_client.Gauge(
        "weft_index_documents",
        "live documents in the index",
        registry=registry,
        multiprocess_mode="mostrecent",
    )
    processes = prometheus_client.Gauge(
        "weft_server_processes",
        "processes answering requests (the --workers; 1 for one process)",
        registry=registry,
        multiprocess_mode="livesum",
    )
    processes.set(1)

    async def forward_or_handle(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        if request.url.path.startswith("/v1/"):
            problem = unavailable()
            if problem is not None:
                return JSONResponse(_error_body("IndexUnavailable", problem, None), status_code=503)
        if writer_socket is None or not _is_write(request.method, request.url.path):
            return await call_next(request)
        import httpx  # the multi-process server's readers only

        headers = {
            name: value
            for name, value in request.headers.items()
            if name.lower() in ("content-type", "authorization", API_KEY_HEADER.lower())
        }
        transport = httpx.AsyncHTTPTransport(uds=writer_socket)
        async with httpx.AsyncClient(transport=transport, base_url="http://writer", timeout=None) as client:
            answer = await client.request(
                request.method, request.url.path, content=await request.body(), headers=headers
            )
        return Response(
            answer.content, status_code=answer.status_code, media_type=answer.headers.get("content-type")
        )

    @app.middleware("http")
    async def guard(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        started = time.perf_counter()
        path = request.url.path
        response: Response
        if expected is not None and _needs_key(request.method, path, read_key_required):
            offered = _offered_key(request)
            if offered is None:
                response = JSONResponse(
                    _error_body(
                        "Unauthorized", f"this request needs an API key ({API_KEY_HEADER} header)", None
                    ),
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
            elif not _key_matches(offered, expected):
                response = JSONResponse(
                    _error_body("Forbidden", "the API key is not valid", None), status_code=403
                )
            else:
                response = await forward_or_handle(request, call_next)
        else:
            response = await forward_or_handle(request, call_next)
        endpoint = _endpoint(app, request)
        seconds = time.perf_counter() - started
        requests_total.labels(endpoint, request.method, str(response.status_code)).inc()
        latency.labels(endpoint).observe(seconds)
        # The log line names the route template, never headers or bodies (no key, no document).
        LOG.info("%s %s %d %.1f ms", request.method, endpoint, response.status_code, seconds * 1000)
        return response

    app.add_middleware(_BodyLimit, limit=limits.max_body_bytes)

    def unkeyed(message: str) -> str:
        # Errors echo values (a document key, a path) that a client may have filled with the key.
        return redact(message, [api_key]) if api_key else message

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse(_error_body(exc.kind, unkeyed(exc.message), exc.field), status_code=exc.status)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        # Routing's own answers (404 no such route, 405 wrong method) in the API's error shape.
        kind = {404: "NotFound", 405: "MethodNotAllowed"}.get(exc.status_code, "HTTPError")
        return JSONResponse(
            _error_body(kind, unkeyed(str(exc.detail)), None),
            status_code=exc.status_code,
            headers=exc.headers,
        )

    @app.exception_handler(WeftError)
    async def weft_error(request: Request, exc: WeftError) -> JSONResponse:
        return JSONResponse(
            _error_body(type(exc).__name__, unkeyed(str(exc)), None), status_code=_status_of(exc)
        )

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = []
        for error in exc.errors():
            location = [
                str(part) for part in error.get("loc", ()) if part != "body" and part not in _BRANCHES
            ]
            problems.append(
                {"field": unkeyed(".".join(location)) or None, "message": unkeyed(str(error.get("msg", "")))}
            )
        first = problems[0] if problems else {"field": None, "message": "invalid request"}
        body = _error_body("ValidationError", f"{first['field']}: {first['message']}", first["field"])
        body["error"]["problems"] = problems
        return JSONResponse(body, status_code=422)

    # ---- search

    def adopt_commits() -> None:
        """A read-only server adopts the writer's newest commit before each read (one manifest read)."""
        if index.readonly:
            try:
                index.refresh()
            except IndexStorageError as exc:
                problem = unavailable()  # the directory went between the check and this read
                if problem is not None:
                    raise ApiError(503, "IndexUnavailable", problem) from None
                raise ApiError(_status_of(exc), type(exc).__name__, str(exc)) from None

    def run_search(ranking: _Ranking, queries: list[Query], k: int) -> list[SearchResults]:
        """Search (callers adopt the newest commit first, before building the queries)."""
        arm = ranking.arm
        if len(queries) == 1:
            return [index.search(queries[0], k, arm.fuser, *arm.scorers, depth=max(arm.depth, k))]
        return list(
            index.search_many(
                queries, k, arm.fuser, *arm.scorers, depth=max(arm.depth, k), threads=limits.search_threads
            )
        )

    @app.post(
        "/v1/search",
        tags=["search"],
        summary="Search with a profile, a spec or the default ranking",
        **_answers(SearchResponse),
    )
    def search(body: SearchRequest) -> dict[str, Any]:
        state.check_k(body.k)
        ranking = state.ranking(body)
        adopt_commits()
        (query,), (source,) = state.queries([(body, "")], ranking)
        with _field(None):
            (results,) = run_search(ranking, [query], body.k)
        return _search_body(results, ranking, body.explain, source)

    @app.post(
        "/v1/search/batch",
        tags=["search"],
        summary="Many queries on one snapshot (Index.search_many)",
        **_answers(BatchSearchResponse),
    )
    def search_batch(body: BatchSearchRequest) -> dict[str, Any]:
        state.check_k(body.k)
        state.check_batch(len(body.queries), "queries")
        ranking = state.ranking(body)
        adopt_commits()
        queries, sources = state.queries([(q, f"queries.{i}.") for i, q in enumerate(body.queries)], ranking)
        with _field("queries"):
            results = index.search_many(
                queries,
                body.k,
                ranking.arm.fuser,
                *ranking.arm.scorers,
                depth=max(ranking.arm.depth, body.k),
                threads=limits.search_threads,
            )
        return {
            "results": [
                _search_body(r, ranking, body.explain, source)
                for r, source in zip(results, sources, strict=True)
            ]
        }

    # ---- documents

    def publish() -> dict[str, Any]:
        """Make the write just made visible to every read (under the write lock); its generation.

        One process publishes it in memory. With ``commit_writes`` (the ``--workers N``
        writer) it is committed first, since the reader processes adopt commits only.
        """
        if commit_writes:
            index.commit()
        index.refresh()
        return {"generation": index.generation, "committed": commit_writes}

    @app.get(
        "/v1/documents/{key:path}", tags=["documents"], summary="One stored document", **_answers(DocumentOut)
    )
    def get_document(key: str) -> dict[str, Any]:
        adopt_commits()
        with _field("key"):
            return _document_body(index.get(key))

    @app.post(
        "/v1/documents",
        tags=["documents"],
        summary="Add or replace documents (upsert), all or nothing",
        **_answers(UpsertResponse),
    )
    def upsert(body: UpsertRequest) -> dict[str, Any]:
        state.check_writable()
        if len(body.documents) > limits.max_documents:
            raise state.too_large("documents", len(body.documents), limits.max_documents, "max_documents")
        made = []
        for i, doc in enumerate(body.documents):
            if doc.vector is not None and len(doc.vector) > limits.max_vector_dim:
                raise state.too_large(
                    f"documents.{i}.vector", len(doc.vector), limits.max_vector_dim, "max_vector_dim"
                )
            with _field(f"documents.{i}"):
                made.append(
                    Document(
                        key=doc.key,
                        text=doc.text,
                        vector=_vector(doc.vector),
                        links=tuple(doc.links),
                        time=doc.time,
                        fields=dict(doc.fields),
                    )
                )
        with state.writes, _field("documents"):
            index.add_many(made, progress=False)
            return {"upserted": len(made), **publish()}

    @app.delete(
        "/v1/documents/{key:path}",
        tags=["documents"],
        summary="Delete a document by key",
        **_answers(DeleteResponse),
    )
    def delete(key: str) -> dict[str, Any]:
        state.check_writable()
        with state.writes, _field("key"):
            if not index.delete(key):
                raise ApiError(404, "UnknownKeyError", f"no document with key {key!r}", "key")
            return {"deleted": key, **publish()}

    @app.post(
        "/v1/commit",
        tags=["documents"],
        summary="Make every write so far durable",
        **_answers(CommitResponse),
    )
    def commit() -> dict[str, Any]:
        state.check_writable()
        with state.writes, _field(None):
            committed = index.commit()
            index.refresh()
            return {"generation": committed}

    @app.get(
        "/v1/stats",
        tags=["index"],
        summary="Index.stats(): documents, segments, generation, bytes",
        **_answers(StatsResponse),
    )
    def stats() -> dict[str, Any]:
        adopt_commits()
        s = index.stats()
        return {
            "documents": s.documents,
            "pending": s.pending,
            "generation": s.generation,
            "analyzer": s.analyzer,
            "vector_dim": s.vector_dim,
            "vector_dtype": s.vector_dtype,
            "segments": [
                {"name": g.name, "documents": g.documents, "deleted": g.deleted, "bytes": g.bytes}
                for g in s.segments
            ],
            "bytes_on_disk": s.bytes_on_disk,
            "readonly": index.readonly,
            "query_model": None
            if embedder is None
            else {
                "model": embedder.model.name,
                "vectors": embedder.model.vectors,
                "dims": embedder.model.dims,
                "embeds_queries": embedder.problem is None,
                "problem": embedder.problem,
            },
        }

    @app.get(
        "/health",
        tags=["index"],
        summary="Liveness: the index is open, and its directory is the one opened",
        response_model=HealthResponse,
        response_model_exclude_unset=True,
        responses={503: {"model": HealthResponse, "description": "the index directory deleted or replaced"}},
    )
    def health() -> Any:
        problem = unavailable()
        if problem is not None:
            return JSONResponse({"status": "unavailable", "reason": problem}, status_code=503)
        return {"status": "ok" if not index.closed else "closed"}

    @app.get(
        "/metrics",
        tags=["index"],
        summary="Prometheus text format: requests, latency, index generation (every process of the server)",
        response_class=Response,
        responses={
            200: {
                "description": "Prometheus text exposition format",
                "content": {prometheus_client.CONTENT_TYPE_LATEST: {"schema": {"type": "string"}}},
            },
            **{status: _ERRORS[status] for status in (401, 403)},
        },
    )
    def metrics() -> Response:
        if unavailable() is None:  # not the old index's numbers once its directory went
            adopt_commits()
            if not index.closed:
                # The state searches read: an index's published snapshot, a sharded index's cut.
                generation.set(
                    float(index.snapshot().generation if isinstance(index, Index) else index.generation)
                )
                documents.set(float(index.stats().documents))
        if metrics_dir is None:
            text = prometheus_client.generate_latest(registry)
        else:
            from prometheus_client import multiprocess

            merged = prometheus_client.CollectorRegistry()
            multiprocess.MultiProcessCollector(merged, path=str(metrics_dir))  # type: ignore[no-untyped-call]
            text = prometheus_client.generate_latest(merged)
        return Response(text, media_type=prometheus_client.CONTENT_TYPE_LATEST)

    # ---- the explorer page (not part of the API's schema)

    def page_file(name: str, media_type: str) -> Callable[[], Response]:
        def serve() -> Response:
            body = (Path(__file__).with_name("static") / name).read_bytes()
            # Everything the page loads comes from this server (no CDN; it works offline).
            headers = {"Content-Security-Policy": "default-src 'self'", "X-Content-Type-Options": "nosniff"}
            return Response(body, media_type=media_type, headers=headers)

        return serve

    for page_path, (file_name, media_type) in _PAGE_FILES.items():
        app.add_api_route(
            page_path, page_file(file_name, media_type), methods=["GET"], include_in_schema=False
        )

    # ---- profiles

    @app.get(
        "/v1/profiles",
        tags=["profiles"],
        summary="The newest version of every profile",
        **_answers(ProfileListResponse),
    )
    def list_profiles() -> dict[str, Any]:
        with _field(None):
            return {
                "profiles": [
                    {**p.to_dict(), "versions": profiles.versions(p.name)} for p in profiles.latest()
                ]
            }

    @app.get(
        "/v1/profiles/{name}", tags=["profiles"], summary="A profile's newest version", **_answers(ProfileOut)
    )
    def get_profile(name: Annotated[str, Field(pattern=_NAME_PATTERN)]) -> dict[str, Any]:
        with _field("name"):
            return profiles.get(name).to_dict()

    @app.get(
        "/v1/profiles/{name}/{version}",
        tags=["profiles"],
        summary="One version of a profile",
        **_answers(ProfileOut),
    )
    def get_profile_version(
        name: Annotated[str, Field(pattern=_NAME_PATTERN)], version: Annotated[int, Field(ge=1)]
    ) -> dict[str, Any]:
        with _field("version"):
            return profiles.get(name, version).to_dict()

    @app.post(
        "/v1/profiles",
        tags=["profiles"],
        summary="Create the next version of a profile",
        status_code=201,
        **_answers(ProfileOut),
    )
    def create_profile(body: ProfileIn) -> dict[str, Any]:
        state.check_length(body.spec, "spec")
        state.check_length(body.filter, "filter")
        if body.depth is not None and body.depth > limits.max_depth:
            raise state.too_large("depth", body.depth, limits.max_depth, "max_depth")
        with _field("spec"):
            made = profiles.create(
                body.name,
                body.spec,
                depth=body.depth,
                filter=body.filter,
                description=body.description,
                provenance={"source": "api"},
            )
        if made.depth > limits.max_depth:
            raise state.too_large("depth", made.depth, limits.max_depth, "max_depth")
        return made.to_dict()

    # ---- compare and evaluate

    def rankings_of(
        ranking: _Ranking, queries: dict[str, QueryIn], k: int, where: str
    ) -> tuple[dict[str, list[str]], dict[str, list[float]], int, str | None]:
        """Keys and scores per query id, the generation searched, and the model that embedded texts."""
        qids = list(queries)
        adopt_commits()
        built, sources = state.queries([(queries[qid], f"{where}{qid}.") for qid in qids], ranking)
        with _field(where.rstrip(".")):
            results = run_search(ranking, built, k)
        keys = {qid: list(r.keys) for qid, r in zip(qids, results, strict=True)}
        scores = {qid: [float(s) for s in r.scores] for qid, r in zip(qids, results, strict=True)}
        embedded = next((s["model"] for s in sources if s["source"] == "server"), None)
        return keys, scores, results[0].generation if results else index.generation, embedded

    def check_judgements(judgements: dict[str, dict[str, int]] | None) -> None:
        bound = limits.max_queries * limits.max_k
        if judgements is not None and sum(len(j) for j in judgements.values()) > bound:
            raise state.too_large("judgements", sum(len(j) for j in judgements.values()), bound)

    @app.post(
        "/v1/compare",
        tags=["evaluate"],
        summary="Rankings A and B side by side: moves, overlap, deltas",
        **_answers(CompareResponse),
    )
    def compare(body: CompareRequest) -> dict[str, Any]:
        state.check_k(body.k)
        if (body.query is None) == (body.queries is None):
            raise ApiError(422, "InvalidParameterError", "give one query or a set of queries", "query")
        queries = {"q": body.query} if body.query is not None else dict(body.queries or {})
        state.check_batch(len(queries), "queries", "max_queries")
        if body.resamples > limits.max_resamples:
            raise state.too_large("resamples", body.resamples, limits.max_resamples, "max_resamples")
        check_judgements(body.judgements)
        ranking_a = state.ranking(body.a, "a.")
        ranking_b = state.ranking(body.b, "b.")
        keys_a, scores_a, generation_a, embedded_a = rankings_of(ranking_a, queries, body.k, "queries.")
        keys_b, scores_b, generation_b, embedded_b = rankings_of(ranking_b, queries, body.k, "queries.")
        per_query: dict[str, dict[str, Any]] = {}
        for qid in queries:
            a, b = keys_a[qid], keys_b[qid]
            per_query[qid] = {
                "a": [{"key": key, "score": score} for key, score in zip(a, scores_a[qid], strict=True)],
                "b": [{"key": key, "score": score} for key, score in zip(b, scores_b[qid], strict=True)],
                "moved": moved(a, b),
                "jaccard": jaccard(a, b),
                "rbo": rank_biased_overlap(a, b, body.p),
            }
        out: dict[str, Any] = {
            "a": ranking_a.label,
            "b": ranking_b.label,
            "k": body.k,
            "p": body.p,
            "generation": {"a": generation_a, "b": generation_b},
            "queries": per_query,
            "mean_jaccard": sum(float(q["jaccard"]) for q in per_query.values()) / len(per_query),
            "mean_rbo": sum(float(q["rbo"]) for q in per_query.values()) / len(per_query),
            "query_model": embedded_a or embedded_b,
        }
        if body.judgements is not None:
            with _field("judgements"):
                out["judged"] = judged_comparison(
                    keys_a,
                    keys_b,
                    body.judgements,
                    body.measures,
                    resamples=body.resamples,
                    seed=body.seed,
                    confidence=body.confidence,
                )
        return out

    @app.post(
        "/v1/rank_eval",
        tags=["evaluate"],
        summary="Evaluate one ranking on judged queries, with intervals",
        **_answers(RankEvalResponse),
    )
    def rank_eval(body: RankEvalRequest) -> dict[str, Any]:
        state.check_k(body.k)
        state.check_batch(len(body.queries), "queries", "max_queries")
        if body.resamples > limits.max_resamples:
            raise state.too_large("resamples", body.resamples, limits.max_resamples, "max_resamples")
        check_judgements(body.judgements)
        ranking = state.ranking(body.ranking, "ranking.")
        keys, _scores, generation_seen, embedded = rankings_of(ranking, body.queries, body.k, "queries.")
        with _field("judgements"):
            result = judged_evaluation(
                keys,
                body.judgements,
                body.measures,
                resamples=body.resamples,
                seed=body.seed,
                confidence=body.confidence,
            )
        return {
            "ranking": ranking.label,
            "k": body.k,
            "generation": generation_seen,
            "query_model": embedded,
            **result,
        }

    return app
