"""``weft-search trial plan`` and ``trial run``: the argument parsing of :mod:`weftsearch.eval.trial`.

Named ``trial`` rather than ``rank-eval``: the server's ``/v1/rank_eval``
already names a different thing (offline fusion of the server's own streams,
intervals computed server-side), and a trial is a pinned plan run through the
serving API, whose report this command writes.

``trial run --serve DIR`` starts its own server instead of naming one: ``weft-search
serve --index DIR --readonly`` in a child process on a free ``127.0.0.1`` port
(:class:`weftsearch.server.launch.ServerProcess`, the one launcher the project
has), waits for ``/health``, runs the plan, and stops the child whatever
happens: a finished run, an error, Ctrl-C, or SIGTERM to this process (turned
into a normal exit so the ``finally`` that stops the child runs).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from weftsearch._argtypes import positive_int
from weftsearch.cli._common import EXIT_PROBLEM, PROG
from weftsearch.errors import TrialValidationError
from weftsearch.eval.trial import parse_method, run_trial, write_plan

__all__ = ["add_trial_command"]


def _cmd_plan(args: argparse.Namespace) -> int:
    plan = write_plan(
        args.out,
        methods=[parse_method(text) for text in args.method],
        queries=args.queries,
        qrels=args.qrels,
        query_vectors=args.query_vectors,
        vector_model=args.vector_model,
        baseline=args.baseline,
        seed=args.seed,
        concurrency=args.concurrency,
        k=args.k,
        depth=args.depth,
        timeout_seconds=args.timeout,
        max_seconds=args.max_seconds,
        measures=args.measure or ("nDCG@10", "R@10"),
        resamples=args.resamples,
    )
    print(
        f"plan {plan.path}: {len(plan.queries)} queries x {len(plan.methods)} methods, sha256 {plan.sha256}"
    )
    return 0


@contextmanager
def _sigterm_exits() -> Iterator[None]:
    """While inside, SIGTERM raises ``SystemExit(143)`` (in the main thread only, where signals land).

    Python's default SIGTERM ends the process without unwinding, so a started server would outlive it.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _exit(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, _exit)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _cmd_run(args: argparse.Namespace) -> int:
    if args.serve is None:
        stray = [
            f for f, v in (("--vectors-record", args.vectors_record), ("--serve-log", args.serve_log)) if v
        ]
        if stray:
            print(
                f"{PROG}: trial run: {stray[0]} goes with --serve (it is the started server's)",
                file=sys.stderr,
            )
            return 2
        return _run(args, args.server, args.server_pid)
    # The launcher only (no app, no index): tests/test_architecture.py allows cli.trial exactly this.
    from weftsearch.server.launch import ServerProcess

    serve = ["--index", args.serve, "--readonly"]
    if args.vectors_record is not None:
        serve += ["--vectors-record", args.vectors_record]
    server = ServerProcess(serve, log=args.serve_log)
    with _sigterm_exits():
        try:
            server.start()  # inside the try: Ctrl-C while it waits for /health stops the child too
            return _run(args, server.base_url, server.pid if args.server_pid is None else args.server_pid)
        finally:
            server.stop()


def _run(args: argparse.Namespace, server: str, server_pid: int | None) -> int:
    try:
        report = run_trial(
            args.plan,
            server,
            args.report,
            cycle=args.cycle,
            embed=args.embed,
            server_pid=server_pid,
        )
    except TrialValidationError as exc:
        print(f"{PROG}: trial: {' '.join(str(exc).split())}", file=sys.stderr)
        return EXIT_PROBLEM
    summary: dict[str, Any] = {
        "report": args.report,
        "means": report["means"],
        "latency_ms": report["latency"]["all"],
    }
    print(json.dumps(summary, ensure_ascii=False))
    return 0


def add_trial_command(commands: Any) -> None:
    """Add ``trial`` (``plan`` and ``run``) to the ``weft-search`` subcommand parser."""
    parser = commands.add_parser(
        "trial",
        help="compare ranking profiles through a live server from a pinned plan (interleaved, validated)",
        description="A trial: 'plan' pins the methods, queries, judgements, seed and budgets in a plan file; "
        "'run' sends one request per (query, method) to a server in a seeded shuffled order, validates "
        "every response and writes a report (JSON and Markdown). Exit 1 when a response broke the plan.",
    )
    steps = parser.add_subparsers(dest="step", required=True, metavar="STEP")
    plan = steps.add_parser("plan", help="write a trial plan (never over an existing file)")
    plan.add_argument("--out", required=True, metavar="FILE", help="the plan file to write (JSON)")
    plan.add_argument(
        "--method",
        action="append",
        required=True,
        metavar="NAME:VERSION|LABEL=SPEC",
        help="a stored profile at a version, or an inline spec with a label; twice or more; the first "
        "is the baseline unless --baseline names another",
    )
    plan.add_argument("--queries", required=True, metavar="FILE", help="queries (.jsonl or .txt)")
    plan.add_argument(
        "--qrels", required=True, metavar="FILE", help="judgements; unjudged queries are left out"
    )
    plan.add_argument(
        "--query-vectors", metavar="FILE.npy", help="frozen query vectors (FILE_ids.txt beside)"
    )
    plan.add_argument(
        "--vector-model", metavar="NAME", help="the query vector model every response must report"
    )
    plan.add_argument("--baseline", metavar="NAME", help="the method the others are compared with")
    plan.add_argument("--seed", type=int, default=0, help="order and bootstrap seed (default: %(default)s)")
    plan.add_argument("--concurrency", type=positive_int, default=4, help="requests in flight (default: 4)")
    plan.add_argument("-k", type=positive_int, default=10, help="hits per request (default: 10)")
    plan.add_argument("--depth", type=positive_int, help="candidates per scorer (default: the ranking's)")
    plan.add_argument("--timeout", type=float, default=30.0, help="seconds per request (default: 30)")
    plan.add_argument("--max-seconds", type=float, default=3600.0, help="bound on the run (default: 3600)")
    plan.add_argument("--measure", action="append", help="a measure (default: nDCG@10 and R@10)")
    plan.add_argument("--resamples", type=positive_int, default=10_000, help="bootstrap resamples")
    plan.set_defaults(handler=_cmd_plan)

    run = steps.add_parser("run", help="run a plan against a server and write the report")
    run.add_argument("plan", metavar="PLAN", help="the plan file")
    where = run.add_mutually_exclusive_group(required=True)
    where.add_argument("--server", metavar="URL", help="a running server, http://127.0.0.1:PORT")
    where.add_argument(
        "--serve",
        metavar="INDEX_DIR",
        help="start 'weft-search serve --index INDEX_DIR --readonly' on 127.0.0.1 (a free port) for "
        "this run, and stop it at the end, on an error or on Ctrl-C",
    )
    run.add_argument(
        "--vectors-record",
        metavar="FILE",
        help="with --serve: the started server's --vectors-record (it embeds query text; --cycle)",
    )
    run.add_argument("--serve-log", metavar="FILE", help="with --serve: the started server's output")
    run.add_argument("--report", required=True, metavar="FILE", help="the report (JSON; FILE.md beside it)")
    run.add_argument(
        "--cycle", action="store_true", help="client-cycle latency: one serial client, text to response"
    )
    run.add_argument(
        "--embed",
        choices=("server", "client"),
        default="server",
        help="with --cycle: the server embeds the text (serve --vectors-record) or this client does, "
        "with the offline model (the embed extra) (default: server)",
    )
    run.add_argument(
        "--server-pid",
        type=positive_int,
        help="the server's process for CPU and memory (default: found from a loopback URL's port)",
    )
    run.set_defaults(handler=_cmd_run)
