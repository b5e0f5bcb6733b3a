"""``weft-search serve``: the argument parsing of :func:`weftsearch.server.run.serve`.

Importing this module needs no web framework; ``serve`` imports FastAPI and
uvicorn when it runs and names the ``server`` extra when they are missing.
"""

from __future__ import annotations

import argparse
from typing import Any

from weftsearch._argtypes import port, positive_int
from weftsearch.server.run import LIMIT_DEFAULTS, serve

__all__ = ["add_serve_command"]

_LIMIT_HELP = {
    "max_body_bytes": "request body size in bytes (413 beyond it)",
    "max_k": "hits per query",
    "max_depth": "candidates per scorer",
    "max_batch": "queries per batch search",
    "max_queries": "queries per compare or rank_eval request",
    "max_documents": "documents per upsert",
    "max_query_chars": "characters of a query text, filter or spec",
    "max_vector_dim": "numbers in one vector",
    "max_seeds": "seed keys per query",
    "max_resamples": "bootstrap resamples per compare or rank_eval",
    "search_threads": "threads of one batch search (default: the request's own thread)",
}


def _cmd_serve(args: argparse.Namespace) -> int:
    serve(
        args.index,
        sharded=args.sharded,
        ray=args.ray,
        host=args.host,
        port=args.port,
        api_key_env=args.api_key_env,
        read_key_required=args.require_key_for_reads,
        workers=args.workers,
        readonly=args.readonly,
        vectors_record=args.vectors_record,
        limits={name: getattr(args, name) for name in LIMIT_DEFAULTS if getattr(args, name) is not None},
    )
    return 0


def add_serve_command(commands: Any) -> None:
    """Add ``serve`` to the ``weft-search`` subcommand parser."""
    parser = commands.add_parser(
        "serve",
        help="serve an index over HTTP (JSON API under /v1; needs the 'server' extra)",
        description="Serve the index at DIR over HTTP: search, batch search, documents, commit, stats, "
        "ranking profiles, compare and rank_eval under /v1, /health, /metrics (Prometheus), /openapi.json. "
        "Binds 127.0.0.1 unless --host says otherwise. With --api-key-env NAME, every write needs the key "
        "held in the environment variable NAME (X-API-Key or Authorization: Bearer).",
    )
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--index", metavar="DIR", help="index directory")
    which.add_argument(
        "--sharded",
        metavar="DIR",
        help="a sharded index's directory (ShardedIndex; one process, no --vectors-record): its shards "
        "run in this process, or as Ray actors with --ray",
    )
    parser.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="with --sharded: the Ray cluster (HOST:PORT) to run the shard actors on, or 'local' for a "
        "loopback cluster started here and stopped at exit (the ray extra)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: %(default)s)")
    parser.add_argument("--port", type=port, default=8080, help="port (default: %(default)s)")
    parser.add_argument(
        "--api-key-env", metavar="NAME", help="the environment variable holding the API key (never a file)"
    )
    parser.add_argument("--require-key-for-reads", action="store_true", help="reads need the key too")
    parser.add_argument(
        "--workers",
        type=positive_int,
        default=1,
        help="search processes; above 1, a writer process beside them takes the writes (default: 1)",
    )
    parser.add_argument(
        "--readonly", action="store_true", help="open the index read-only (writes answer 409)"
    )
    parser.add_argument(
        "--vectors-record",
        metavar="FILE",
        help="the record weft-search embed wrote for the index's vectors (NAME.json or record.json): "
        "searches sending text only are embedded with that model (needs the 'embed' extra), and vectors "
        "declared to come from another model are refused",
    )
    limits = parser.add_argument_group(
        "request limits",
        "bounds on one request (ServerLimits); a request over one is refused with 422 LimitExceeded "
        "(413 for the body) naming it, and /openapi.json states the figures this server applies",
    )
    for name, default in LIMIT_DEFAULTS.items():
        shown = "none" if default is None else f"{default:,}"
        limits.add_argument(
            "--" + name.replace("_", "-"),
            dest=name,
            type=positive_int,
            default=None,
            metavar="N",
            help=f"{_LIMIT_HELP[name]} (default: {shown})",
        )
    parser.set_defaults(handler=_cmd_serve)
