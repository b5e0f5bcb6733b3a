"""The HTTP API: a FastAPI application over one index directory.

The server sits above the library and adds no new semantics: every search is
:meth:`Index.search` or :meth:`Index.search_many`, every ranking is built from
the arm-spec language of :mod:`weftsearch.eval.specs` (a ranking profile is
spec text plus metadata, :mod:`weftsearch.server.profiles`), and compare and
rank_eval compute their measures and intervals with :mod:`weftsearch.eval`.

Concurrency: request handlers run on a thread pool. Searches read the newest
published snapshot without a lock (the engine's snapshot isolation), so a
search never waits on a commit. Writes (upserts, deletes, commits) serialise
on one lock in front of the index's single writer, and each write publishes
its snapshot before it answers, so the next search of any client sees it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import math
import re
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, MutableMapping
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
    from pydantic import BaseModel, ConfigDict, Field
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError(
        f"the server needs the 'server' extra: pip install 'weft-search[server]' ({exc.name} is missing)"
    ) from exc

from weftsearch.engine.documents import Document
from weftsearch.engine.filters import parse_filter
from weftsearch.engine.index import Index
from weftsearch.engine.query import Query
from weftsearch.engine.search import SearchResults
from weftsearch.errors import (
    IndexClosedError,
    IndexLockedError,
    IndexStorageError,
    InvalidFilterError,
    InvalidParameterError,
    InvalidVectorError,
    UnknownKeyError,
    UnknownMeasureError,
    WeftError,
)
from weftsearch.eval.runs import Arm
from weftsearch.server.compare import (
    jaccard,
    judged_comparison,
    judged_evaluation,
    moved,
    rank_biased_overlap,
)
from weftsearch.server.profiles import PROFILE_NAME, Profile, ProfileStore, build_arm

__all__ = ["ServerLimits", "create_app", "DEFAULT_SPEC", "API_KEY_HEADER"]

LOG = logging.getLogger("weftsearch.server")

#: The ranking of a request that names neither a profile nor a spec.
DEFAULT_SPEC = "rrf(bm25, vector, k=60)@100"

#: The header that carries the API key (``Authorization: Bearer KEY`` works too).
API_KEY_HEADER = "X-API-Key"


@dataclass(frozen=True, slots=True)
class ServerLimits:
    """Bounds on what one request may ask for; a request beyond one is refused (413 or 422).

    Attributes:
        max_body_bytes: request body size (413 beyond it).
        max_k: hits per query.
        max_depth: candidates per scorer.
        max_batch: queries per batch search, compare or rank_eval request.
        max_documents: documents per upsert request.
        max_query_chars: characters of query text (and of a filter or spec).
        max_vector_dim: numbers in one vector.
        max_seeds: seed keys per query.
        max_resamples: bootstrap resamples per compare or rank_eval request.
        search_threads: threads of one batch search (``None``: the calling thread).

    """

    max_body_bytes: int = 8_000_000
    max_k: int = 1_000
    max_depth: int = 10_000
    max_batch: int = 256
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
            "max_documents",
            "max_query_chars",
            "max_vector_dim",
            "max_seeds",
            "max_resamples",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidParameterError(f"ServerLimits.{name} must be a positive integer, got {value!r}")


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
    if isinstance(exc, IndexClosedError):
        return 503
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
    vector: list[float] | None = Field(default=None, description="a query embedding, the index's width")
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
    vector: list[float] | None = None
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


#: Names pydantic puts in an error's location for the branch of a union it tried: not fields.
_BRANCHES = frozenset(
    {"str", "int", "float", "bool", "list[float]", "ProfileRef", "QueryIn", "RankingIn", "DocumentIn"}
)

# ---------------------------------------------------------------------- the server state


@dataclass(frozen=True, slots=True)
class _Ranking:
    arm: Arm
    filter: str | None
    label: dict[str, Any]


class _Server:
    """What the handlers share: the index, its profiles, the write lock and the compiled rankings."""

    def __init__(self, index: Index, profiles: ProfileStore, limits: ServerLimits) -> None:
        self.index = index
        self.profiles = profiles
        self.limits = limits
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
                raise self.too_large(where + "depth", request.depth, self.limits.max_depth)
            arm = ranking.arm
            ranking = _Ranking(
                Arm(arm.name, arm.scorers, arm.fuser, depth=request.depth), ranking.filter, ranking.label
            )
        if ranking.arm.depth > self.limits.max_depth:
            raise self.too_large(where + "depth", ranking.arm.depth, self.limits.max_depth)
        return ranking

    @staticmethod
    def _of_profile(profile: Profile) -> _Ranking:
        return _Ranking(profile.arm(), profile.filter, {"profile": profile.name, "version": profile.version})

    # ---- limits and queries

    @staticmethod
    def too_large(field: str, value: int, limit: int) -> ApiError:
        return ApiError(
            422, "LimitExceeded", f"{field} is {value}; this server allows at most {limit}", field
        )

    def check_length(self, text: str | None, field: str) -> None:
        if text is not None and len(text) > self.limits.max_query_chars:
            raise self.too_large(field, len(text), self.limits.max_query_chars)

    def check_k(self, k: int, field: str = "k") -> None:
        if k > self.limits.max_k:
            raise self.too_large(field, k, self.limits.max_k)

    def check_batch(self, count: int, field: str) -> None:
        if count > self.limits.max_batch:
            raise self.too_large(field, count, self.limits.max_batch)
        if count == 0:
            raise ApiError(422, "InvalidParameterError", f"{field} is empty", field)

    def query(self, q: QueryIn, default_filter: str | None, where: str = "") -> Query:
        """The :class:`Query` of ``q``, each part checked under its own field name."""
        self.check_length(q.text, where + "text")
        self.check_length(q.filter, where + "filter")
        if q.vector is not None and len(q.vector) > self.limits.max_vector_dim:
            raise self.too_large(where + "vector", len(q.vector), self.limits.max_vector_dim)
        if len(q.seeds) > self.limits.max_seeds:
            raise self.too_large(where + "seeds", len(q.seeds), self.limits.max_seeds)
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


def _search_body(results: SearchResults, ranking: _Ranking, explain: bool) -> dict[str, Any]:
    return {
        "generation": results.generation,
        "ranking": ranking.label,
        "fuser": results.fuser,
        "signals": list(results.signals),
        "depth": results.depth,
        "hits": _hits(results, explain),
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
        message = f"the request body is over this server's limit of {self.limit} bytes"
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
    index_path: str | PathLike[str],
    *,
    api_key: str | None = None,
    read_key_required: bool = False,
    limits: ServerLimits | None = None,
    readonly: bool = False,
    writer_socket: str | None = None,
) -> FastAPI:
    """The weft-search HTTP API over the index at ``index_path`` (opened here, closed at shutdown).

    Args:
        index_path: an index directory made by ``weft-search index`` or :meth:`Index.create`.
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

    At shutdown the index is committed (when writable) and closed: writes
    acknowledged but not yet committed are kept by a graceful stop, and lost
    by a crash, as with the library.

    Raises:
        IndexNotFoundError: no index at ``index_path``.
        IndexLockedError: another writer holds it (and not ``readonly``).
        InvalidParameterError: ``read_key_required`` without a key, or an empty key.

    """
    limits = limits or ServerLimits()
    if api_key is not None and (not isinstance(api_key, str) or not api_key):
        raise InvalidParameterError("api_key must be a non-empty string")
    if writer_socket is not None and not readonly:
        raise InvalidParameterError("writer_socket is for read-only servers (the writer writes itself)")
    if read_key_required and api_key is None:
        raise InvalidParameterError("read_key_required needs an api_key")
    expected = None if api_key is None else api_key.encode("utf-8", "surrogateescape")
    index = Index.open(Path(index_path), readonly=readonly, background_merge=not readonly)
    try:
        profiles = ProfileStore(index_path)
        index.refresh()  # publish a snapshot, so the first search takes no lock
    except BaseException:
        index.close(discard=True)
        raise
    state = _Server(index, profiles, limits)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        with state.writes:
            if not index.readonly:
                try:
                    index.commit()  # a graceful shutdown keeps what was written (a no-op when nothing was)
                except WeftError as exc:
                    LOG.error("the commit at shutdown failed; uncommitted writes are lost: %s", exc)
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

    registry = prometheus_client.CollectorRegistry()
    requests_total = prometheus_client.Counter(
        "weft_requests",
        "HTTP requests by endpoint and status",
        ["endpoint", "method", "status"],
        registry=registry,
    )
    latency = prometheus_client.Histogram(
        "weft_request_seconds", "request latency in seconds by endpoint", ["endpoint"], registry=registry
    )
    generation = prometheus_client.Gauge(
        "weft_index_generation", "the index generation searches see", registry=registry
    )
    generation.set_function(lambda: float(index.snapshot().generation) if not index.closed else math.nan)
    documents = prometheus_client.Gauge(
        "weft_index_documents", "live documents in the index", registry=registry
    )
    documents.set_function(lambda: float(len(index)) if not index.closed else math.nan)

    async def forward_or_handle(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
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

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse(_error_body(exc.kind, exc.message, exc.field), status_code=exc.status)

    @app.exception_handler(WeftError)
    async def weft_error(request: Request, exc: WeftError) -> JSONResponse:
        return JSONResponse(_error_body(type(exc).__name__, str(exc), None), status_code=_status_of(exc))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = []
        for error in exc.errors():
            location = [
                str(part) for part in error.get("loc", ()) if part != "body" and part not in _BRANCHES
            ]
            problems.append({"field": ".".join(location) or None, "message": str(error.get("msg", ""))})
        first = problems[0] if problems else {"field": None, "message": "invalid request"}
        body = _error_body("ValidationError", f"{first['field']}: {first['message']}", first["field"])
        body["error"]["problems"] = problems
        return JSONResponse(body, status_code=422)

    # ---- search

    def adopt_commits() -> None:
        """A read-only server adopts the writer's newest commit before each read (one manifest read)."""
        if index.readonly:
            with _field(None):
                index.refresh()

    def run_search(ranking: _Ranking, queries: list[Query], k: int) -> list[SearchResults]:
        adopt_commits()
        arm = ranking.arm
        if len(queries) == 1:
            return [index.search(queries[0], k, arm.fuser, *arm.scorers, depth=max(arm.depth, k))]
        return index.search_many(
            queries, k, arm.fuser, *arm.scorers, depth=max(arm.depth, k), threads=limits.search_threads
        )

    @app.post("/v1/search", tags=["search"], summary="Search with a profile, a spec or the default ranking")
    def search(body: SearchRequest) -> dict[str, Any]:
        state.check_k(body.k)
        ranking = state.ranking(body)
        query = state.query(body, ranking.filter)
        with _field(None):
            (results,) = run_search(ranking, [query], body.k)
        return _search_body(results, ranking, body.explain)

    @app.post("/v1/search/batch", tags=["search"], summary="Many queries on one snapshot (Index.search_many)")
    def search_batch(body: BatchSearchRequest) -> dict[str, Any]:
        state.check_k(body.k)
        state.check_batch(len(body.queries), "queries")
        ranking = state.ranking(body)
        queries = [state.query(q, ranking.filter, f"queries.{i}.") for i, q in enumerate(body.queries)]
        adopt_commits()
        with _field("queries"):
            results = index.search_many(
                queries,
                body.k,
                ranking.arm.fuser,
                *ranking.arm.scorers,
                depth=max(ranking.arm.depth, body.k),
                threads=limits.search_threads,
            )
        return {"results": [_search_body(r, ranking, body.explain) for r in results]}

    # ---- documents

    @app.get("/v1/documents/{key:path}", tags=["documents"], summary="One stored document")
    def get_document(key: str) -> dict[str, Any]:
        adopt_commits()
        with _field("key"):
            return _document_body(index.get(key))

    @app.post(
        "/v1/documents", tags=["documents"], summary="Add or replace documents (upsert), all or nothing"
    )
    def upsert(body: UpsertRequest) -> dict[str, Any]:
        state.check_writable()
        if len(body.documents) > limits.max_documents:
            raise state.too_large("documents", len(body.documents), limits.max_documents)
        made = []
        for i, doc in enumerate(body.documents):
            if doc.vector is not None and len(doc.vector) > limits.max_vector_dim:
                raise state.too_large(f"documents.{i}.vector", len(doc.vector), limits.max_vector_dim)
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
            index.refresh()  # published: every client's next search sees these documents
            return {"upserted": len(made), "generation": index.generation}

    @app.delete("/v1/documents/{key:path}", tags=["documents"], summary="Delete a document by key")
    def delete(key: str) -> dict[str, Any]:
        state.check_writable()
        with state.writes, _field("key"):
            if not index.delete(key):
                raise ApiError(404, "UnknownKeyError", f"no document with key {key!r}", "key")
            index.refresh()
            return {"deleted": key, "generation": index.generation}

    @app.post("/v1/commit", tags=["documents"], summary="Make every write so far durable")
    def commit() -> dict[str, Any]:
        state.check_writable()
        with state.writes, _field(None):
            committed = index.commit()
            index.refresh()
            return {"generation": committed}

    @app.get("/v1/stats", tags=["index"], summary="Index.stats(): documents, segments, generation, bytes")
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
        }

    @app.get("/health", tags=["index"], summary="Liveness: the index is open")
    def health() -> dict[str, Any]:
        return {"status": "ok" if not index.closed else "closed"}

    @app.get("/metrics", tags=["index"], summary="Prometheus text format", response_class=Response)
    def metrics() -> Response:
        return Response(
            prometheus_client.generate_latest(registry), media_type=prometheus_client.CONTENT_TYPE_LATEST
        )

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

    @app.get("/v1/profiles", tags=["profiles"], summary="The newest version of every profile")
    def list_profiles() -> dict[str, Any]:
        with _field(None):
            return {
                "profiles": [
                    {**p.to_dict(), "versions": profiles.versions(p.name)} for p in profiles.latest()
                ]
            }

    @app.get("/v1/profiles/{name}", tags=["profiles"], summary="A profile's newest version")
    def get_profile(name: Annotated[str, Field(pattern=_NAME_PATTERN)]) -> dict[str, Any]:
        with _field("name"):
            return profiles.get(name).to_dict()

    @app.get("/v1/profiles/{name}/{version}", tags=["profiles"], summary="One version of a profile")
    def get_profile_version(
        name: Annotated[str, Field(pattern=_NAME_PATTERN)], version: Annotated[int, Field(ge=1)]
    ) -> dict[str, Any]:
        with _field("version"):
            return profiles.get(name, version).to_dict()

    @app.post(
        "/v1/profiles", tags=["profiles"], summary="Create the next version of a profile", status_code=201
    )
    def create_profile(body: ProfileIn) -> dict[str, Any]:
        state.check_length(body.spec, "spec")
        state.check_length(body.filter, "filter")
        if body.depth is not None and body.depth > limits.max_depth:
            raise state.too_large("depth", body.depth, limits.max_depth)
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
            raise state.too_large("depth", made.depth, limits.max_depth)
        return made.to_dict()

    # ---- compare and evaluate

    def rankings_of(
        ranking: _Ranking, queries: dict[str, QueryIn], k: int, where: str
    ) -> tuple[dict[str, list[str]], dict[str, list[float]], int]:
        built = {qid: state.query(q, ranking.filter, f"{where}{qid}.") for qid, q in queries.items()}
        qids = list(built)
        with _field(where.rstrip(".")):
            results = run_search(ranking, [built[qid] for qid in qids], k)
        keys = {qid: list(r.keys) for qid, r in zip(qids, results, strict=True)}
        scores = {qid: [float(s) for s in r.scores] for qid, r in zip(qids, results, strict=True)}
        return keys, scores, results[0].generation if results else index.generation

    def check_judgements(judgements: dict[str, dict[str, int]] | None) -> None:
        if (
            judgements is not None
            and sum(len(j) for j in judgements.values()) > limits.max_batch * limits.max_k
        ):
            raise state.too_large(
                "judgements", sum(len(j) for j in judgements.values()), limits.max_batch * limits.max_k
            )

    @app.post(
        "/v1/compare", tags=["evaluate"], summary="Rankings A and B side by side: moves, overlap, deltas"
    )
    def compare(body: CompareRequest) -> dict[str, Any]:
        state.check_k(body.k)
        if (body.query is None) == (body.queries is None):
            raise ApiError(422, "InvalidParameterError", "give one query or a set of queries", "query")
        queries = {"q": body.query} if body.query is not None else dict(body.queries or {})
        state.check_batch(len(queries), "queries")
        if body.resamples > limits.max_resamples:
            raise state.too_large("resamples", body.resamples, limits.max_resamples)
        check_judgements(body.judgements)
        ranking_a = state.ranking(body.a, "a.")
        ranking_b = state.ranking(body.b, "b.")
        keys_a, scores_a, generation_a = rankings_of(ranking_a, queries, body.k, "queries.")
        keys_b, scores_b, generation_b = rankings_of(ranking_b, queries, body.k, "queries.")
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
        "/v1/rank_eval", tags=["evaluate"], summary="Evaluate one ranking on judged queries, with intervals"
    )
    def rank_eval(body: RankEvalRequest) -> dict[str, Any]:
        state.check_k(body.k)
        state.check_batch(len(body.queries), "queries")
        if body.resamples > limits.max_resamples:
            raise state.too_large("resamples", body.resamples, limits.max_resamples)
        check_judgements(body.judgements)
        ranking = state.ranking(body.ranking, "ranking.")
        keys, _scores, generation_seen = rankings_of(ranking, body.queries, body.k, "queries.")
        with _field("judgements"):
            result = judged_evaluation(
                keys,
                body.judgements,
                body.measures,
                resamples=body.resamples,
                seed=body.seed,
                confidence=body.confidence,
            )
        return {"ranking": ranking.label, "k": body.k, "generation": generation_seen, **result}

    return app
