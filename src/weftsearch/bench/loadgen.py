r"""``weft-search bench load`` and ``bench plot``: the command that runs the open-loop load ladder.

The pieces live in modules of their own:

* :mod:`weftsearch.bench.driver`: one rung of Poisson arrivals, latency from
  each scheduled arrival, the in-flight cap, HDR histograms.
* :mod:`weftsearch.bench.targets`: threads:N, processes:N[xT], an HTTP server,
  serve:N (``weft-search serve`` started for the run).
* :mod:`weftsearch.bench.workloads`: the queries, weft-search's searcher, the corpora.
* :mod:`weftsearch.bench.ladder`: the rungs at fractions of the sequential
  throughput, and a commit dropped into a rung.
* :mod:`weftsearch.bench.report`: the tables, the JSON read back, the plot.
* :mod:`weftsearch.bench.peers`: the peers (tantivy for bm25, LanceDB for
  hybrid), whose adapters live in the repository's ``bench/peers`` folder, not
  in the installed package (``--peers-dir``).

This module reads the options, refuses what it cannot run before any work (the
arms, the targets, every package they need, the peer adapters), builds the
indexes in a temporary directory and runs each target's ladder, its peer
beside it.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np
from numpy.typing import NDArray

from weftsearch._argtypes import positive_float, positive_int, positive_list
from weftsearch.bench.driver import (
    DEFAULT_CAP,
    MAX_PROGRESS_SECONDS,
    RungResult,
    Target,
    poisson_schedule,
    run_rung,
    sequential_throughput,
)
from weftsearch.bench.ladder import (
    DEFAULT_RUNGS,
    CommitResult,
    LadderResult,
    calibrate,
    commit_under_load,
    run_ladder,
    rung_seconds_for,
)
from weftsearch.bench.peers import PEERS, PeerSearcher, build_peer, find_peer_files
from weftsearch.bench.report import (
    PLOT_INSTALL_HINT,
    calibration_line,
    commit_summary,
    format_ladder,
    ladders_from_json,
    machine_state,
    plot_ladder,
)
from weftsearch.bench.targets import (
    HTTP_APIS,
    HttpTarget,
    ServeTarget,
    ThreadTarget,
    direct_search,
    is_served,
    make_target,
    served_workers,
)
from weftsearch.bench.workloads import (
    Corpus,
    Searcher,
    SleepSearcher,
    WeftSearcher,
    Workload,
    build_weft_index,
    scifact_corpus,
    synthetic_corpus,
    weft_search_function,
)
from weftsearch.errors import InvalidParameterError, MissingDependencyError

__all__ = [
    "BENCH_INSTALL_HINT",
    "SERVER_INSTALL_HINT",
    "add_subcommand",
    "check_load_dependencies",
    "load_command",
    "needed_modules",
]

#: The known arms: BM25 alone, and BM25 + vector fused by RRF.
ARMS = ("bm25", "hybrid")
#: The install line of the ``bench`` extra (the histograms and the peers).
BENCH_INSTALL_HINT = "pip install 'weft-search[bench]'"
#: The install line of the ``server`` extra (``serve:N`` runs ``weft-search serve``; httpx drives it).
SERVER_INSTALL_HINT = "pip install 'weft-search[server]'"


def _module_missing(module: str) -> bool:
    """Whether ``module`` (a top-level name) cannot be imported, found without importing it. O(1)."""
    try:
        return importlib.util.find_spec(module) is None  # None too for a sys.modules entry of None
    except (ImportError, ValueError):
        return True


def needed_modules(
    arms: Sequence[str], targets: Sequence[str], *, peer: bool, plot: bool
) -> list[tuple[str, str, str]]:
    """What ``bench load`` with these options imports: ``(module, what needs it, install line)`` each.

    The histograms always; a peer's engine where a peer runs (``peer`` and some
    target in-process or multi-process): tantivy for the bm25 arm, LanceDB and
    pyarrow for the hybrid arm (:data:`weftsearch.bench.peers.PEERS`); httpx
    for a server target, and the server's own packages for ``serve:N``;
    matplotlib for ``--plot``.
    """
    needed = [("hdrh", "the latency histograms", BENCH_INSTALL_HINT)]
    if peer and any(not is_served(kind) for kind in targets):
        for arm in (a for a in ARMS if a in arms):
            what = f"the {arm} arm's peer (or --no-peer)"
            needed.extend((module, what, BENCH_INSTALL_HINT) for module in PEERS[arm].modules)
    if any(is_served(kind) for kind in targets):
        needed.append(("httpx", "a server target", SERVER_INSTALL_HINT))
    if any(kind.startswith("serve:") for kind in targets):
        needed.extend((module, "a serve:N target", SERVER_INSTALL_HINT) for module in ("fastapi", "uvicorn"))
    if plot:
        needed.append(("matplotlib", "--plot", PLOT_INSTALL_HINT))
    return needed


def check_load_dependencies(arms: Sequence[str], targets: Sequence[str], *, peer: bool, plot: bool) -> None:
    """Refuse at once, before any index is built, a ``bench load`` whose packages are not all installed.

    Raises:
        MissingDependencyError: naming every missing module, what needs it and
            the extra that installs it (``pip install 'weft-search[bench]'``, ...).

    """
    missing = [
        item for item in needed_modules(arms, targets, peer=peer, plot=plot) if _module_missing(item[0])
    ]
    if missing:
        parts = "; ".join(f"{module} (for {what})" for module, what, _ in missing)
        hints = " and ".join(dict.fromkeys(hint for _, _, hint in missing))
        raise MissingDependencyError(f"bench load needs packages that are not installed: {parts}: {hints}")


def _check_targets(targets: Sequence[str]) -> None:
    """Refuse an unknown ``--target`` before any work (the ladder would meet it after the builds)."""
    for kind in targets:
        if kind.startswith("serve:"):
            served_workers(kind)
        elif not kind.startswith(("http://", "https://")):
            make_target(kind, SleepSearcher(0.0), "check")  # builds the object only: nothing starts


@dataclass
class _Run:
    """What one ``bench load`` produced so far (the JSON's parts)."""

    ladders: list[LadderResult] = field(default_factory=list)
    calibration: RungResult | None = None
    handoffs: list[RungResult] = field(default_factory=list)
    commit: CommitResult | None = None
    #: The highest rate any rung offered: the calibration runs at it.
    highest: float = 0.0


def _arms(text: str) -> list[str]:
    """The ``--arms`` list; an unknown arm is refused."""
    arms = [a.strip() for a in text.split(",") if a.strip()]
    for arm in arms:
        if arm not in ARMS:
            raise InvalidParameterError(f"unknown arm {arm!r} (known: {', '.join(ARMS)})")
    return arms


def _peers_run(args: argparse.Namespace) -> bool:
    """Whether peers run: asked for, and some target in-process or multi-process.

    A server's peer is run by whoever runs the peer's server, so a served target has none.
    """
    return bool(args.peer) and any(not is_served(kind) for kind in args.target)


def _corpus(args: argparse.Namespace, hybrid: bool, out: TextIO) -> tuple[str, Corpus]:
    """The corpus's name and the corpus (``--synthetic N`` or the SciFact folder of ``--data``)."""
    if args.synthetic:
        name = f"synthetic {args.synthetic:,}"
        print(f"[load] drawing the {name} corpus", file=out, flush=True)
        return name, synthetic_corpus(args.synthetic, args.queries, hybrid)
    return "SciFact", scifact_corpus(args.data, hybrid)


def _ladder_options(args: argparse.Namespace, out: TextIO) -> dict[str, Any]:
    """:func:`run_ladder`'s keyword arguments shared by every target and peer."""
    return dict(
        fractions=args.rungs, rung_seconds=args.rung_seconds, min_requests=args.min_requests,
        max_rung_seconds=args.max_rung_seconds,
        sequential_seconds=args.sequential_seconds, repetitions=args.repetitions, headline=args.headline,
        sequential_from=args.denominator,
        cap=args.cap, seed=args.seed, progress=out, progress_seconds=args.progress_seconds,
    )  # fmt: skip


def _weft_target(
    args: argparse.Namespace, kind: str, root: Path, workload: Workload, arm: str, searcher: WeftSearcher
) -> Target:
    """The target ``kind`` over weft-search's index of the run (served, remote or in this machine)."""
    if kind.startswith("serve:"):
        return ServeTarget(
            root / "weft", served_workers(kind), workload, k=args.k, hybrid=arm == "hybrid",
            cap=args.cap, depth=args.depth,
        )  # fmt: skip
    if kind.startswith(("http://", "https://")):
        return HttpTarget(
            kind, workload, k=args.k, hybrid=arm == "hybrid", path=args.http_path, cap=args.cap,
            server_pids=args.server_pid or (), api=args.http_api, depth=args.depth,
        )  # fmt: skip
    return make_target(kind, searcher, "weft")


def _ladder(
    target: Target, searcher: Searcher, n_items: int, arm: str, engine: str, **options: Any
) -> LadderResult:
    """Start ``target``, run its ladder, close it; print the ladder's table on stdout."""
    target.start()
    try:
        direct = direct_search(target, searcher)
        result = run_ladder(target, n_items, arm=arm, engine=engine, direct=direct, **options)
    finally:
        target.close()
    sys.stdout.write(format_ladder(result) + "\n")
    sys.stdout.flush()
    return result


def _run_ladders(
    args: argparse.Namespace,
    root: Path,
    arms: Sequence[str],
    workload: Workload,
    adapters: dict[str, Path],
    run: _Run,
    out: TextIO,
) -> None:
    """Each arm on each target: weft-search's ladder, then its peer's at weft-search's rates."""
    options = _ladder_options(args, out)
    for arm in arms:
        for kind in args.target:
            searcher = WeftSearcher(str(root / "weft"), workload, arm, args.k, args.depth)
            target = _weft_target(args, kind, root, workload, arm, searcher)
            mine = _ladder(target, searcher, len(workload), arm, "weft-search", **options)
            run.ladders.append(mine)
            run.highest = max(run.highest, max(r.offered for r in mine.rungs))
            if arm not in adapters or is_served(kind):
                continue  # a server's peer is run by whoever runs the peer's server
            peer = PeerSearcher(str(adapters[arm]), str(root / f"peer-{arm}"), workload, args.k, args.depth)
            engine = PEERS[arm].engine
            theirs = _ladder(
                make_target(kind, peer, engine), peer, len(workload), arm, engine,
                absolute_rates=[r.offered for r in mine.rungs], **options,
            )  # fmt: skip
            run.ladders.append(theirs)
            run.highest = max(run.highest, *(r.offered for r in (*theirs.rungs, *theirs.absolute)))


def _calibrate(args: argparse.Namespace, run: _Run, out: TextIO) -> None:
    """The driver alone, then each in-machine target with a no-op search, at the highest rate offered."""
    seconds = min(args.rung_seconds, 10.0)
    print(f"[load] dispatcher overhead: no-op targets at {run.highest:,.1f} q/s", file=out, flush=True)
    run.calibration = calibrate(run.highest, seconds, seed=args.seed, progress=out)
    print(calibration_line("driver alone (no-op on its own thread)", run.calibration))
    for kind in args.target:
        if is_served(kind):
            continue
        # The same pool or workers with a search that does nothing: the ceiling of the
        # driver plus the handoff (queue, pipes), which no engine behind it can beat.
        noop = make_target(kind, SleepSearcher(0.0), "no-op")
        noop.start()
        try:
            schedule = poisson_schedule(run.highest, seconds, args.seed, 1)
            result = run_rung(noop, schedule, cap=args.cap, label=f"{noop.name} (no-op search)", progress=out)
        finally:
            noop.close()
        run.handoffs.append(result)
        print(calibration_line(f"driver + {noop.name} with a no-op search", result))


def _write_outputs(
    args: argparse.Namespace, run: _Run, state: dict[str, Any], corpus_name: str, out: TextIO
) -> None:
    """The JSON of every measurement (``--json``) and the plot (``--plot``)."""
    payload = {
        "machine": state,
        "machine_after": machine_state(),
        "command": "weft-search " + " ".join(getattr(args, "argv", [])),
        "latency": "from each request's scheduled (Poisson) arrival; service time beside it",
        "unloaded_denominator": "the lowest open-loop rung",
        "ladders": [r.to_dict() for r in run.ladders],
        "driver_overhead": None if run.calibration is None else run.calibration.to_dict(),
        "driver_and_handoff_overhead": [r.to_dict() for r in run.handoffs],
        "commit_under_load": None if run.commit is None else run.commit.to_dict(),
    }
    if args.json is not None:
        Path(args.json).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {args.json}", file=out)
    if args.plot is not None and run.ladders:
        plot_ladder(run.ladders, args.plot, title=f"{corpus_name}, {state['date_utc']}")
        print(f"wrote {args.plot}", file=out)


def load_command(args: argparse.Namespace) -> int:
    """Handler of ``weft-search bench load`` (errors propagate as :class:`WeftError`/``OSError``).

    Everything that can be refused is refused before any work: the arms, the
    targets, every package they need (:func:`check_load_dependencies`) and,
    where peers run, their adapters (:func:`~weftsearch.bench.peers.find_peer_files`).
    """
    arms = _arms(args.arms)
    _check_targets(args.target)
    check_load_dependencies(arms, args.target, peer=args.peer, plot=args.plot is not None)
    adapters = find_peer_files(getattr(args, "peers_dir", None), arms) if _peers_run(args) else {}
    out = sys.stderr
    state = machine_state()
    print(f"[load] machine: {state}", file=out, flush=True)
    run = _Run()
    corpus_name, (keys, texts, workload, doc_vectors) = _corpus(args, "hybrid" in arms, out)
    with tempfile.TemporaryDirectory(prefix="weft-load-", dir=args.workdir) as tmp:
        root = Path(tmp)
        print(f"[load] building the indexes in {root}", file=out, flush=True)
        build_weft_index(root / "weft", keys, texts, doc_vectors)
        if args.commit_under_load:
            # First, before a peer is imported into this process: the commit forks its encoder.
            run.commit = _commit_run(args, root, keys, texts, workload, doc_vectors, arms[0], out)
        for arm, adapter in adapters.items():
            build_peer(adapter, root / f"peer-{arm}", keys, texts, doc_vectors)
        _run_ladders(args, root, arms, workload, adapters, run, out)
        if args.calibrate and run.highest > 0:
            _calibrate(args, run, out)
    _write_outputs(args, run, state, corpus_name, out)
    return 0


def _commit_run(
    args: argparse.Namespace,
    root: Path,
    keys: Sequence[str],
    texts: Sequence[str],
    workload: Workload,
    doc_vectors: NDArray[np.float32] | None,
    arm: str,
    out: TextIO,
) -> CommitResult:
    """The 50% rung of an in-process target, with one commit of ``--commit-docs`` and a merge.

    The commit grows the index (20,000 documents on SciFact's 5,183: each
    query's lists about five times longer), so a search after it costs more
    than before it. The rate is half the **smaller** of two sequential
    throughputs through the target: the writer's index before the documents
    are added, and a copy built with them (the index the commit and merge
    leave). So the rung is at most 50% on both sides of the window, and a rise
    inside it is the commit's and the merge's own work, not an index that
    outgrew the rate; ``after`` (the same documents as inside the window, once
    merged) is printed beside ``outside``.
    """
    from weftsearch.documents import Document
    from weftsearch.engine.index import Index

    n = args.commit_docs
    vectors = doc_vectors if arm == "hybrid" else None
    added_keys = [f"load-{i:07d}" for i in range(n)]
    added_texts = [texts[i % len(texts)] for i in range(n)]
    added_vectors = None if vectors is None else vectors[np.arange(n) % len(texts)]
    threads = next((int(k.split(":")[1]) for k in args.target if k.startswith("threads:")), 2)
    grown_vectors = None if vectors is None else np.concatenate([vectors, added_vectors])
    sequential_after = _grown_throughput(
        args, root / "commit-grown", ([*keys, *added_keys], [*texts, *added_texts], workload, grown_vectors),
        arm, threads,
    )  # fmt: skip

    path = root / "commit"
    build_weft_index(path, keys, texts, vectors)
    index = Index.open(path)
    try:
        target = ThreadTarget(weft_search_function(index, workload, arm, args.k, args.depth), threads, "weft")
        target.start()
        try:
            sequential_before = sequential_throughput(target, len(workload), seconds=args.sequential_seconds)
            rate = min(sequential_before, sequential_after) * 0.5
            print(
                f"[load] commit under load: sequential {sequential_before:,.1f} q/s before the commit, "
                f"{sequential_after:,.1f} q/s on the index it leaves; the rung is half the smaller",
                file=out,
                flush=True,
            )
            print(f"[load] adding {n:,} documents to commit under load", file=out, flush=True)
            index.add_many(
                (
                    Document(key, text, vector=None if added_vectors is None else added_vectors[i])
                    for i, (key, text) in enumerate(zip(added_keys, added_texts, strict=True))
                ),
                progress=False,
            )
            seconds = args.commit_seconds or rung_seconds_for(
                rate, args.rung_seconds, args.min_requests, args.max_rung_seconds
            )
            result = commit_under_load(
                target, index, len(workload), rate, seconds, cap=args.cap, seed=args.seed, progress=out
            )
        finally:
            target.close()
    finally:
        index.close(discard=True)
    result.sequential = {"before": sequential_before, "after": sequential_after}
    print(commit_summary(result, target.name, arm, rate, args.commit_docs))
    return result


def _grown_throughput(args: argparse.Namespace, path: Path, corpus: Corpus, arm: str, threads: int) -> float:
    """Sequential throughput on an index of ``corpus`` (the one a commit under load leaves)."""
    from weftsearch.engine.index import Index

    keys, texts, workload, vectors = corpus
    build_weft_index(path, keys, texts, vectors)
    grown = Index.open(path, readonly=True)
    try:
        probe = ThreadTarget(weft_search_function(grown, workload, arm, args.k, args.depth), threads, "weft")
        probe.start()
        try:
            return sequential_throughput(probe, len(workload), seconds=args.sequential_seconds)
        finally:
            probe.close()
    finally:
        grown.close()


def add_subcommand(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``bench`` (``bench load``, ``bench plot``) to the subcommands of a ``weft-search`` parser."""
    bench = commands.add_parser("bench", help="benchmarks that ship with the library (bench load)")
    sub = bench.add_subparsers(dest="bench_command", metavar="BENCH", required=True)
    load = sub.add_parser(
        "load",
        help="an open-loop load ladder (Poisson arrivals, latency from the scheduled time), peer beside",
        description=(
            "Build weft-search (and peer) indexes of a SciFact folder (or of the synthetic corpus) in a "
            "temporary directory, measure each "
            "target's sequential throughput, then drive it with Poisson arrivals at each fraction of it "
            "(--rungs), latency measured from each request's scheduled arrival, an in-flight cap with shed "
            "requests counted; print a table per target and arm. The unloaded denominator is the lowest "
            "open-loop rung."
        ),
    )
    corpus = load.add_mutually_exclusive_group(required=True)
    corpus.add_argument("--data", metavar="DIR", help="SciFact folder (BEIR layout, frozen vectors)")
    corpus.add_argument(
        "--synthetic", type=positive_int, metavar="N",
        help="the shared synthetic corpus of N documents instead (Zipfian tokens, seed 20261203; the hybrid "
        "arm gets random unit vectors of width 384: cost, not quality)",
    )  # fmt: skip
    load.add_argument(
        "--queries", type=positive_int, default=1_000, metavar="N", help="queries of --synthetic (1,000)"
    )
    load.add_argument(
        "--target", action="append", default=None, metavar="KIND",
        help="threads:N, processes:N, processes:NxT, serve:N (weft-search serve --workers N on the built "
        "index, started on a free 127.0.0.1 port and stopped after) or a running server's base URL "
        "http://HOST:PORT (repeatable; default threads:2)",
    )  # fmt: skip
    load.add_argument(
        "--http-path",
        help="the search path of an HTTP target (default: /search, or /v1/search with --http-api weft)",
    )
    load.add_argument(
        "--http-api", choices=tuple(HTTP_APIS), default="generic",
        help="an HTTP target's request body: generic {query, k[, vector]}, or weft (weft-search serve: "
        "{text, k, spec[, vector]})",
    )  # fmt: skip
    load.add_argument(
        "--server-pid", type=positive_int, action="append", metavar="PID",
        help="a process of the HTTP server, whose memory, CPU and faults to measure (repeatable)",
    )  # fmt: skip
    load.add_argument("--arms", default="bm25", help="bm25, hybrid or bm25,hybrid (default bm25)")
    load.add_argument("--no-peer", dest="peer", action="store_false", help="leave out tantivy / LanceDB")
    load.add_argument(
        "--peers-dir", metavar="DIR",
        help="the folder of the peer adapters (tantivy_peer.py, lancedb_peer.py); default: the bench/peers "
        "folder of the weft-search checkout this package runs from (an installed wheel has none)",
    )  # fmt: skip
    load.add_argument(
        "--rungs", type=positive_list(float, "0.125,0.5,1"), default=list(DEFAULT_RUNGS), metavar="F,F,..."
    )
    load.add_argument("--rung-seconds", type=positive_float, default=60.0, metavar="S")
    load.add_argument("--min-requests", type=positive_int, default=5_000, metavar="N")
    load.add_argument(
        "--max-rung-seconds", type=positive_float, default=None, metavar="S",
        help="lengthen a rung for --min-requests up to S seconds at most (default: no bound)",
    )  # fmt: skip
    load.add_argument("--sequential-seconds", type=positive_float, default=10.0, metavar="S")
    load.add_argument(
        "--denominator", choices=("max", "target", "direct"), default="max",
        help="the sequential throughput the rungs are fractions of: the larger of one at a time through "
        "the target and the bare search in a tight loop (max, the default), or either alone",
    )  # fmt: skip
    load.add_argument("--repetitions", type=positive_int, default=3, metavar="N", help="of the headline rung")
    load.add_argument("--headline", type=positive_float, default=1.0, metavar="F", help="default 1.0 (100%%)")
    load.add_argument("--cap", type=positive_int, default=DEFAULT_CAP, metavar="N", help="in-flight cap (32)")
    load.add_argument("--seed", type=int, default=20261203)
    load.add_argument("--k", type=positive_int, default=10)
    load.add_argument("--depth", type=positive_int, default=100, help="per-stream depth of the hybrid arm")
    load.add_argument("--progress-seconds", type=positive_float, default=5.0, metavar="S")
    load.add_argument(
        "--no-calibrate", dest="calibrate", action="store_false", help="skip the no-op driver run"
    )
    load.add_argument("--commit-under-load", action="store_true", help="one commit + merge at the 50%% rung")
    load.add_argument("--commit-docs", type=positive_int, default=20_000, metavar="N")
    load.add_argument(
        "--commit-seconds", type=positive_float, metavar="S",
        help="length of the commit-under-load rung (default: as the other rungs); the commit starts "
        "a third of the way in",
    )  # fmt: skip
    load.add_argument(
        "--workdir", metavar="DIR", help="where the temporary indexes go (default: the system's)"
    )
    load.add_argument("--json", metavar="FILE", help="write every measurement as JSON")
    load.add_argument(
        "--plot", metavar="FILE.png", help=f"latency against offered load (needs {PLOT_INSTALL_HINT})"
    )
    load.set_defaults(handler=_load_handler)
    plot = sub.add_parser(
        "plot",
        help="draw the load ladder's plot again from the JSON of bench load --json",
        description="Draw latency against offered load (bench load --plot's figure) from one or more JSON "
        f"files bench load --json wrote, their ladders together (needs {PLOT_INSTALL_HINT}).",
    )
    plot.add_argument("json", nargs="+", metavar="FILE.json", help="bench load --json output")
    plot.add_argument("--out", required=True, metavar="FILE.png", help="the PNG to write")
    plot.add_argument("--title", default="", help="added to each panel's title")
    plot.set_defaults(handler=_plot_handler)


def _plot_handler(args: argparse.Namespace) -> int:
    results = [ladder for path in args.json for ladder in ladders_from_json(path)]
    if not results:
        raise InvalidParameterError(f"no ladders in {', '.join(args.json)}")
    plot_ladder(results, args.out, title=args.title)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


def _load_handler(args: argparse.Namespace) -> int:
    if args.target is None:
        args.target = ["threads:2"]
    if args.progress_seconds > MAX_PROGRESS_SECONDS:
        raise InvalidParameterError(
            f"--progress-seconds {args.progress_seconds:g}: a progress line comes at least every "
            f"{MAX_PROGRESS_SECONDS:g} s"
        )
    if args.headline not in args.rungs:
        raise InvalidParameterError(f"--headline {args.headline} is not one of --rungs {args.rungs}")
    return load_command(args)
