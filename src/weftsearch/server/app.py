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

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from os import PathLike
from pathlib import Path
from typing import Any

from weftsearch.errors import MissingDependencyError

try:
    import prometheus_client  # noqa: F401 - checked here, used by the modules below
    from fastapi import FastAPI
    from pydantic import BaseModel  # noqa: F401
    from starlette.exceptions import HTTPException  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError(
        f"the server needs the 'server' extra: pip install 'weft-search[server]' ({exc.name} is missing)"
    ) from exc

from weftsearch.engine.index import Index
from weftsearch.errors import InvalidParameterError
from weftsearch.ranking.profiles import ProfileStore
from weftsearch.server.embedding import QueryEmbedder, check_fits, read_vector_model
from weftsearch.server.handlers import install_handlers
from weftsearch.server.limits import ServerLimits, document_limits
from weftsearch.server.metrics import check_multiprocess_metrics
from weftsearch.server.middleware import API_KEY_HEADER, BodyLimit, guard
from weftsearch.server.routes import documents, evaluate, operations, profiles, search
from weftsearch.server.sharded import SupportsShardedServing, check_sharded, sharded_profile_store
from weftsearch.server.state import DEFAULT_SPEC, DirectoryWatch, ServerState

__all__ = ["ServerLimits", "create_app", "DEFAULT_SPEC", "API_KEY_HEADER"]


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
        check_multiprocess_metrics(metrics_dir)
    if api_key is not None and (not isinstance(api_key, str) or not api_key):
        raise InvalidParameterError("api_key must be a non-empty string")
    if writer_socket is not None and not readonly:
        raise InvalidParameterError("writer_socket is for read-only servers (the writer writes itself)")
    if commit_writes and readonly:
        raise InvalidParameterError("commit_writes is for a writable server (a read-only one writes nothing)")
    if read_key_required and api_key is None:
        raise InvalidParameterError("read_key_required needs an api_key")
    options: dict[str, Any] = {
        "api_key": api_key,
        "read_key_required": read_key_required,
        "writer_socket": writer_socket,
        "metrics_dir": metrics_dir,
        "commit_writes": commit_writes,
    }
    if isinstance(index_path, (str, PathLike)):
        state = _open(Path(index_path), limits, readonly, vectors_record, options)
    else:
        sharded = check_sharded(index_path, readonly, writer_socket, vectors_record)
        # Watched as a single index is: its directory and its SHARDS record's sharded index id.
        watch = DirectoryWatch(
            Path(str(sharded.path)), sharded.record_name, lambda _: sharded.recorded_index_id()
        )
        # A sharded index made with an embedder embeds query text here, as a single index's server does.
        recorded = getattr(sharded, "embedder", None)
        embedder = None if recorded is None else QueryEmbedder.of_index(recorded, None, None)
        state = ServerState(sharded, sharded_profile_store(sharded), limits, embedder, watch, **options)

    app = FastAPI(
        lifespan=_lifespan,
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
            document_limits(schema_of_code(), limits)
        assert app.openapi_schema is not None
        return app.openapi_schema

    app.openapi = openapi_with_limits  # type: ignore[method-assign]
    app.middleware("http")(guard)
    app.add_middleware(BodyLimit, limit=limits.max_body_bytes)
    install_handlers(app)
    # The schema lists the routes in this order.
    for area in (search, documents, operations, profiles, evaluate):
        app.include_router(area.router)
    return app


def _open(
    path: Path,
    limits: ServerLimits,
    readonly: bool,
    vectors_record: str | PathLike[str] | None,
    options: dict[str, Any],
) -> ServerState:
    """The state of a server over the index directory ``path``, which it opens (and will close)."""
    model = None if vectors_record is None else read_vector_model(vectors_record)
    index = Index.open(path, readonly=readonly, background_merge=not readonly)
    try:
        profiles = ProfileStore(path)
        index.refresh()  # publish a snapshot, so the first search takes no lock
        if index.embedder is not None:  # the index's own embedder (a record, if given, must name it)
            embedder: QueryEmbedder | None = QueryEmbedder.of_index(index.embedder, model, vectors_record)
        else:
            if model is not None:
                check_fits(model, index.vector_dim, vectors_record, path)
            embedder = None if model is None else QueryEmbedder(model)
        watch = DirectoryWatch(path)
        return ServerState(index, profiles, limits, embedder, watch, owned=True, **options)
    except BaseException:
        index.close(discard=True)
        raise


@asynccontextmanager
async def _lifespan(app: FastAPI) -> AsyncIterator[None]:
    """At shutdown: this process's live metrics go, and the index is committed (and closed if opened here)."""
    yield
    state: ServerState = app.state.weft
    state.metrics.stop()
    state.shut_down()
