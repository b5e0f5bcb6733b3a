"""``weft-search serve``: the HTTP API of :mod:`weftsearch.server.app` under uvicorn.

Importing this module needs no web framework; ``serve`` imports FastAPI and
uvicorn when it runs and names the ``server`` extra when they are missing.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from weftsearch.errors import InvalidParameterError, MissingDependencyError

__all__ = ["add_subcommand", "serve"]


def serve(
    index: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8080,
    api_key: str | None = None,
    read_key_required: bool = False,
    workers: int = 1,
    readonly: bool = False,
) -> None:
    """Serve the index at ``index`` until interrupted (see :func:`weftsearch.server.app.create_app`).

    Raises:
        MissingDependencyError: the ``server`` extra is not installed.
        InvalidParameterError: ``workers`` other than 1 (multi-process serving is not built yet).

    """
    if workers != 1:
        raise InvalidParameterError(
            f"--workers {workers}: multi-process serving is not available yet; run one process (--workers 1)"
        )
    from weftsearch.server.app import create_app

    try:
        import uvicorn
    except ImportError as exc:
        raise MissingDependencyError(
            "weft-search serve needs the 'server' extra: "
            "pip install 'weft-search[server]' (uvicorn is missing)"
        ) from exc
    app = create_app(index, api_key=api_key, read_key_required=read_key_required, readonly=readonly)
    # uvicorn's access log prints the request line only (never headers), so the key stays out of it.
    uvicorn.run(app, host=host, port=port, log_level="info")


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a port is a number from 1 to 65535, got {text!r}") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"a port is a number from 1 to 65535, got {text!r}")
    return value


def _workers(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--workers takes a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"--workers takes a positive integer, got {text!r}")
    return value


def _cmd_serve(args: argparse.Namespace) -> int:
    api_key = None
    if args.api_key_env is not None:
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            raise InvalidParameterError(
                f"--api-key-env {args.api_key_env}: that environment variable is not set"
            )
    if args.require_key_for_reads and api_key is None:
        raise InvalidParameterError("--require-key-for-reads needs --api-key-env")
    serve(
        args.index,
        host=args.host,
        port=args.port,
        api_key=api_key,
        read_key_required=args.require_key_for_reads,
        workers=args.workers,
        readonly=args.readonly,
    )
    return 0


def add_subcommand(commands: Any) -> None:
    """Add ``serve`` to the ``weft-search`` subcommand parser."""
    parser = commands.add_parser(
        "serve",
        help="serve an index over HTTP (JSON API under /v1; needs the 'server' extra)",
        description="Serve the index at DIR over HTTP: search, batch search, documents, commit, stats, "
        "ranking profiles, compare and rank_eval under /v1, /health, /metrics (Prometheus), /openapi.json. "
        "Binds 127.0.0.1 unless --host says otherwise. With --api-key-env NAME, every write needs the key "
        "held in the environment variable NAME (X-API-Key or Authorization: Bearer).",
    )
    parser.add_argument("--index", required=True, metavar="DIR", help="index directory")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: %(default)s)")
    parser.add_argument("--port", type=_port, default=8080, help="port (default: %(default)s)")
    parser.add_argument(
        "--api-key-env", metavar="NAME", help="the environment variable holding the API key (never a file)"
    )
    parser.add_argument("--require-key-for-reads", action="store_true", help="reads need the key too")
    parser.add_argument("--workers", type=_workers, default=1, help="processes (only 1 for now)")
    parser.add_argument(
        "--readonly", action="store_true", help="open the index read-only (writes answer 409)"
    )
    parser.set_defaults(handler=_cmd_serve)
