"""Run the HTTP API of :mod:`weftsearch.server.app` under uvicorn (what ``weft-search serve`` calls).

Importing this module needs no web framework; ``serve`` imports FastAPI and
uvicorn when it runs and names the ``server`` extra when they are missing.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import tempfile
import time
from typing import TYPE_CHECKING, Any

from weftsearch.errors import InvalidParameterError, MissingDependencyError

if TYPE_CHECKING:
    from weftsearch.server.app import ServerLimits

__all__ = ["serve", "reader_app", "LIMIT_DEFAULTS"]

#: ``ServerLimits``' figures and their defaults, each an option of ``serve`` (``max_k``: ``--max-k``).
#: Kept here so the parser (:mod:`weftsearch.cli.serve`) needs no web framework;
#: tests/server/test_command.py checks they are ``ServerLimits``' own.
LIMIT_DEFAULTS: dict[str, int | None] = {
    "max_body_bytes": 16_000_000,
    "max_k": 1_000,
    "max_depth": 10_000,
    "max_batch": 256,
    "max_queries": 10_000,
    "max_documents": 1_000,
    "max_query_chars": 4_096,
    "max_vector_dim": 4_096,
    "max_seeds": 100,
    "max_resamples": 10_000,
    "search_threads": None,
}


def serve(
    index: str | None,
    *,
    host: str = "127.0.0.1",
    port: int = 8080,
    api_key_env: str | None = None,
    read_key_required: bool = False,
    workers: int = 1,
    readonly: bool = False,
    vectors_record: str | None = None,
    sharded: str | None = None,
    ray: str | None = None,
    limits: dict[str, int | None] | None = None,
) -> None:
    """Serve the index at ``index`` (or the sharded index at ``sharded``) until interrupted.

    See :func:`weftsearch.server.app.create_app`.

    With ``workers`` above 1: one writer process serves the write endpoints on
    a Unix socket in a private (0700) temporary folder, and ``workers``
    uvicorn worker processes share ``host:port``, each opening the index
    read-only and adopting the newest commit before every read. A write
    request reaches any worker, passes the key check there, and is forwarded
    whole to the writer over the socket; so writes serialise on the one
    writer and searches scale over processes (one GIL each). The readers see
    commits only, so the writer commits each upsert and delete before it
    answers (``"committed": true`` in the answer): as with one process, every
    read after a write's answer sees it (read-your-writes), and the write is
    durable as well; the price is a commit per write request, so send
    documents in batches. The readers
    write their metrics to files in a second private folder
    (prometheus_client's multiprocess mode), so ``/metrics`` reports every
    reader, whichever answers; both folders are removed at exit.

    Args:
        index: the index directory.
        host: the address to bind (loopback by default).
        port: the TCP port.
        api_key_env: the name of the environment variable holding the API key
            (the key itself never appears on a command line).
        read_key_required: reads need the key too.
        workers: processes that serve searches.
        readonly: open the index read-only (one process only).
        vectors_record: the ``weft-search embed`` record of the index's vectors:
            queries sent as text only are embedded with that model (see
            :mod:`weftsearch.server.embedding`).
        sharded: instead of ``index``, the directory of a
            :class:`~weftsearch.distributed.ShardedIndex`, opened here (its
            shards in this process, or Ray actors with ``ray``) and served by
            one process (``workers`` 1, no ``vectors_record``); see
            docs/SCALING.md, "Serving a sharded index".
        ray: with ``sharded``, the address (``HOST:PORT``) of the Ray cluster
            whose actors hold the shards, or ``"local"`` for a loopback cluster
            started in this process and stopped at exit (the ``ray`` extra).
        limits: ``ServerLimits`` figures to set, by name (``{"max_queries": 20000}``);
            the others keep their defaults (:data:`LIMIT_DEFAULTS`). Every process
            of ``--workers N`` (readers and writer) applies the same.

    Raises:
        MissingDependencyError: the ``server`` extra is not installed.
        InvalidParameterError: the variable is unset, or a bad combination.

    """
    from weftsearch.server.app import create_app

    unknown = sorted(set(limits or {}) - set(LIMIT_DEFAULTS))
    if unknown:
        raise InvalidParameterError(
            f"no such server limit {unknown[0]!r}; the limits are {', '.join(LIMIT_DEFAULTS)}"
        )
    chosen = _limits_of(limits or {})
    try:
        import uvicorn
    except ImportError as exc:
        raise MissingDependencyError(
            "weft-search serve needs the 'server' extra: "
            "pip install 'weft-search[server]' (uvicorn is missing)"
        ) from exc
    api_key = _key_from(api_key_env)
    logging_config = _logging(api_key_env)
    if read_key_required and api_key is None:
        raise InvalidParameterError("--require-key-for-reads needs --api-key-env")
    if (index is None) == (sharded is None):
        raise InvalidParameterError("serve one index: give --index DIR or --sharded DIR, not both or neither")
    if api_key is None and not readonly:
        # Said once, before uvicorn's own lines: an open server is a choice, not a default to miss.
        print(
            f"weft-search serve: WARNING: no API key (--api-key-env NAME): anyone who can reach "
            f"{host}:{port} can add, delete and commit documents and create profiles",
            file=sys.stderr,
            flush=True,
        )
    if sharded is not None:
        _serve_sharded(
            sharded,
            ray,
            host=host,
            port=port,
            api_key=api_key,
            read_key_required=read_key_required,
            workers=workers,
            readonly=readonly,
            vectors_record=vectors_record,
            logging_config=logging_config,
            limits=chosen,
        )
        return
    assert index is not None
    if ray is not None:
        raise InvalidParameterError("--ray ADDRESS serves a sharded index: give --sharded DIR, not --index")
    if workers == 1:
        app = create_app(
            index,
            api_key=api_key,
            read_key_required=read_key_required,
            readonly=readonly,
            vectors_record=vectors_record,
            limits=chosen,
        )
        # uvicorn's access log prints the request line (never headers); the filter drops its query
        # string and the key, wherever it was put (weftsearch.server.logs).
        uvicorn.run(app, host=host, port=port, log_level="info", log_config=logging_config)
        return
    if readonly:
        raise InvalidParameterError("--workers N runs its own writer; --readonly is for one process")
    _serve_workers(
        index,
        host=host,
        port=port,
        api_key_env=api_key_env,
        read_key_required=read_key_required,
        workers=workers,
        vectors_record=vectors_record,
        logging_config=logging_config,
        limits=limits or {},
    )


def _serve_workers(
    index: str,
    *,
    host: str,
    port: int,
    api_key_env: str | None,
    read_key_required: bool,
    workers: int,
    vectors_record: str | None,
    logging_config: dict[str, Any],
    limits: dict[str, int | None],
) -> None:
    """``serve --workers N``: one writer process on a private socket, N uvicorn readers on the port."""
    import uvicorn

    from weftsearch.engine.index import Index

    # A missing or unreadable index, or a record that does not fit it, fails here, before any
    # process: uvicorn would restart a worker that fails at start, again and again.
    with Index.open(index, readonly=True) as opened:
        if vectors_record is not None:
            from weftsearch.server.embedding import check_fits, read_vector_model

            check_fits(read_vector_model(vectors_record), opened.vector_dim, vectors_record, index)
    # The writer keeps its metrics to itself (the readers count the writes they forward), so it
    # must not inherit a multiprocess folder: prometheus_client reads the variable at import.
    for name in ("PROMETHEUS_MULTIPROC_DIR", "prometheus_multiproc_dir"):
        os.environ.pop(name, None)
    with tempfile.TemporaryDirectory(prefix="weft-serve-") as folder:  # mode 0700
        socket_path = os.path.join(folder, "writer.sock")
        writer = multiprocessing.get_context("spawn").Process(
            target=_run_writer,
            args=(index, socket_path, api_key_env, read_key_required, limits),
            daemon=False,
        )
        writer.start()
        try:
            while not os.path.exists(socket_path):
                if not writer.is_alive():
                    raise InvalidParameterError(
                        f"the writer process for {index} stopped at start (see its log)"
                    )
                time.sleep(0.05)
            os.environ[_ENV_INDEX] = str(index)
            os.environ[_ENV_SOCKET] = socket_path
            os.environ[_ENV_KEY_NAME] = api_key_env or ""
            os.environ[_ENV_READS] = "1" if read_key_required else ""
            os.environ[_ENV_RECORD] = vectors_record or ""
            os.environ[_ENV_LIMITS] = json.dumps(limits)
            metrics_dir = os.path.join(folder, "metrics")
            os.mkdir(metrics_dir, 0o700)
            # Set before uvicorn spawns the readers, which import prometheus_client afresh.
            os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
            uvicorn.run(
                "weftsearch.server.run:reader_app",
                factory=True,
                host=host,
                port=port,
                workers=workers,
                log_level="info",
                log_config=logging_config,  # each worker process applies it at its start
            )
        finally:
            writer.terminate()  # SIGTERM: uvicorn shuts down gracefully, and the writer commits
            writer.join()


def _serve_sharded(
    directory: str,
    ray: str | None,
    *,
    host: str,
    port: int,
    api_key: str | None,
    read_key_required: bool,
    workers: int,
    readonly: bool,
    vectors_record: str | None,
    logging_config: dict[str, Any],
    limits: ServerLimits,
) -> None:
    """``serve --sharded DIR [--ray ADDRESS]``: one process, the coordinator of the sharded index."""
    import uvicorn

    from weftsearch.server.app import create_app

    if workers != 1:
        raise InvalidParameterError(
            f"--workers {workers} with --sharded: a sharded index is served by one process (its one "
            "coordinator; the shards already search in parallel); use --workers 1"
        )
    if vectors_record is not None:
        raise InvalidParameterError(
            "--vectors-record is not supported with --sharded: send query vectors with the requests"
        )
    from weftsearch.distributed import ShardedIndex
    from weftsearch.distributed.sharded import ShardFactory

    factory: ShardFactory | None = None
    started = False
    if ray is not None:
        from weftsearch.distributed.ray_shard import (
            connect,
            ray_shards,
            start_local_cluster,
            stop_local_cluster,
        )

        if ray == "local":
            start_local_cluster()
            started = True
        else:
            connect(ray)
        factory = ray_shards()
    try:
        with ShardedIndex.open(directory, readonly=readonly, factory=factory) as opened:
            app = create_app(
                opened, api_key=api_key, read_key_required=read_key_required, readonly=readonly, limits=limits
            )
            uvicorn.run(app, host=host, port=port, log_level="info", log_config=logging_config)
    finally:
        if started:
            stop_local_cluster()


_ENV_INDEX = "WEFT_SERVE_INDEX"
_ENV_SOCKET = "WEFT_SERVE_WRITER_SOCKET"
_ENV_KEY_NAME = "WEFT_SERVE_API_KEY_ENV"
_ENV_READS = "WEFT_SERVE_KEY_FOR_READS"
_ENV_RECORD = "WEFT_SERVE_VECTORS_RECORD"
_ENV_LIMITS = "WEFT_SERVE_LIMITS"


def _limits_of(figures: dict[str, Any]) -> ServerLimits:
    """``ServerLimits`` with ``figures`` (by name) set and the others at their defaults."""
    from weftsearch.server.app import ServerLimits

    return ServerLimits(**figures)


def _key_from(name: str | None) -> str | None:
    if name is None or name == "":
        return None
    key = os.environ.get(name)
    if not key:
        raise InvalidParameterError(f"--api-key-env {name}: that environment variable is not set")
    return key


def _logging(api_key_env: str | None) -> dict[str, Any]:
    """The logging configuration of uvicorn, its lines cleared of query strings and of the key."""
    import uvicorn.config

    from weftsearch.server.logs import log_config

    return log_config(uvicorn.config.LOGGING_CONFIG, api_key_env)


def _run_writer(
    index: str,
    socket_path: str,
    api_key_env: str | None,
    read_key_required: bool,
    limits: dict[str, int | None],
) -> None:
    """The writer process of ``--workers N``: the full API on a Unix socket only the server reaches."""
    import uvicorn

    from weftsearch.server.app import create_app

    app = create_app(
        index,
        api_key=_key_from(api_key_env),
        read_key_required=read_key_required,
        limits=_limits_of(limits),
        commit_writes=True,  # the readers see commits only: an uncommitted write would be invisible
    )
    uvicorn.run(app, uds=socket_path, log_level="warning", log_config=_logging(api_key_env))


def reader_app() -> Any:
    """The app of one ``--workers N`` reader process (uvicorn calls it in each worker)."""
    from weftsearch.server.app import create_app

    return create_app(
        os.environ[_ENV_INDEX],
        limits=_limits_of(json.loads(os.environ.get(_ENV_LIMITS) or "{}")),
        api_key=_key_from(os.environ.get(_ENV_KEY_NAME) or None),
        read_key_required=bool(os.environ.get(_ENV_READS)),
        readonly=True,
        writer_socket=os.environ[_ENV_SOCKET],
        vectors_record=os.environ.get(_ENV_RECORD) or None,
        metrics_dir=os.environ["PROMETHEUS_MULTIPROC_DIR"],
    )
