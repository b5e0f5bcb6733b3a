"""``weft-search trial plan`` and ``trial run``: the argument parsing of :mod:`weftsearch.eval.trial`.

Named ``trial`` rather than ``rank-eval``: the server's ``/v1/rank_eval``
already names a different thing (offline fusion of the server's own streams,
intervals computed server-side), and a trial is a pinned plan run through the
serving API, whose report this command writes.
"""

from __future__ import annotations

import argparse
import json
import sys
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


def _cmd_run(args: argparse.Namespace) -> int:
    try:
        report = run_trial(
            args.plan,
            args.server,
            args.report,
            cycle=args.cycle,
            embed=args.embed,
            server_pid=args.server_pid,
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
    run.add_argument("--server", required=True, metavar="URL", help="the server, http://127.0.0.1:PORT")
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
