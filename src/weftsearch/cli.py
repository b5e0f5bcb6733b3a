r"""The ``weft-search`` command line: ``index``, ``search`` and ``demo``.

Examples::

    weft-search index corpus.jsonl --index idx
    weft-search index ../shared/datasets/scifact --index idx \\
        --vectors ../shared/datasets/scifact/vectors/all-minilm-l6-v2-int8/corpus.npy
    weft-search search "rank fusion" --index idx -k 5 --signals text,graph --explain
    weft-search search --index idx --queries queries.jsonl --qrels qrels/test.tsv \\
        --signals text,vector --query-vectors queries.npy --run-out run.txt
    weft-search demo

Signal names: ``text`` (BM25), ``vector`` (cosine), ``graph`` (link hops from
the BM25 top results), ``pagerank`` (personalised PageRank from the same
seeds) and ``recency`` (exponential decay with age). User errors (a bad file,
an unknown signal, a missing index, ...) print one line,
``weft-search: error: <message>``, on stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from contextlib import ExitStack, suppress
from dataclasses import dataclass
from typing import Any, TextIO

import numpy as np
from numpy.typing import NDArray
from tqdm.auto import tqdm

from weftsearch import __version__
from weftsearch.analysis import analyzer_names
from weftsearch.corpus import (
    CORPUS_FORMATS,
    PROGRESS_DELAY,
    NamedQuery,
    load_documents,
    load_qrels,
    load_queries,
    load_query_vector,
    load_vectors,
    write_trec_run,
)
from weftsearch.demo import run_demo
from weftsearch.engine.index import Index
from weftsearch.engine.protocols import Fuser, Scorer
from weftsearch.engine.query import Query
from weftsearch.engine.search import Hit, SearchResults
from weftsearch.engine.stream import MAX_K
from weftsearch.errors import InvalidParameterError, UnknownSignalError, WeftError
from weftsearch.fusion import FUSION_METHODS, RRF, ScoreFusion, WeightedRRF
from weftsearch.scorers import BM25Scorer, GraphScorer, PageRankScorer, RecencyScorer, VectorScorer
from weftsearch.scorers.vector import DEFAULT_NPROBE

__all__ = [
    "main",
    "build_parser",
    "SIGNALS",
    "SignalOptions",
    "parse_signals",
    "make_scorer",
    "make_cli_fuser",
    "format_results",
]

PROG = "weft-search"
#: Signal names ``--signals`` accepts, in the order the help lists them.
SIGNALS: tuple[str, ...] = ("text", "vector", "graph", "pagerank", "recency")
_SECONDS_PER_DAY = 86400.0
_TITLE_WIDTH = 60
_KEY_WIDTH = 32


# ---------------------------------------------------------------------- signals and fusion


@dataclass(frozen=True, slots=True)
class SignalOptions:
    """Parameters of the signals the CLI builds.

    Attributes:
        k1: BM25 ``k1`` (text signal and graph seeds).
        b: BM25 ``b``.
        half_life_days: recency half-life in days.
        seed_n: how many BM25 results seed the graph and pagerank signals.
        graph_depth: hops the graph signal explores.
        keep_seeds: keep the seeds in the graph and pagerank streams (the
            control arm that shows whether a gain is just text counted twice).
        nprobe: IVF lists the vector signal reads per segment; ``None``: exact.

    """

    k1: float = 1.2
    b: float = 0.75
    half_life_days: float = 365.0
    seed_n: int = 5
    graph_depth: int = 3
    keep_seeds: bool = False
    nprobe: int | None = DEFAULT_NPROBE


def parse_signals(spec: str) -> list[str]:
    """Split a comma-separated signal list, e.g. ``"text,vector"``; names are case-insensitive.

    Raises:
        UnknownSignalError: a name not in :data:`SIGNALS`, or no name at all.

    """
    names = [part.strip().lower() for part in spec.split(",") if part.strip()]
    if not names:
        raise UnknownSignalError(f"no signal named in {spec!r}; choose from {', '.join(SIGNALS)}")
    for name in names:
        if name not in SIGNALS:
            raise UnknownSignalError(f"unknown signal {name!r}; choose from {', '.join(SIGNALS)}")
    return names


def make_scorer(name: str, options: SignalOptions) -> Scorer:
    """The scorer behind signal ``name``, labelled with that name in explanations.

    Raises:
        UnknownSignalError: ``name`` is not in :data:`SIGNALS`.

    """
    if name == "text":
        return BM25Scorer(options.k1, options.b, name="text")
    if name == "vector":
        return VectorScorer(nprobe=options.nprobe, name="vector")
    if name == "graph":
        return GraphScorer(
            BM25Scorer(options.k1, options.b),
            options.graph_depth,
            options.seed_n,
            keep_seeds=options.keep_seeds,
            name="graph",
        )
    if name == "pagerank":
        return PageRankScorer(
            BM25Scorer(options.k1, options.b),
            seed_n=options.seed_n,
            keep_seeds=options.keep_seeds,
            name="pagerank",
        )
    if name == "recency":
        return RecencyScorer(options.half_life_days * _SECONDS_PER_DAY, name="recency")
    raise UnknownSignalError(f"unknown signal {name!r}; choose from {', '.join(SIGNALS)}")


def make_cli_fuser(
    method: str, weights: Sequence[float] | None, rrf_k: float, norm: str, n_signals: int
) -> Fuser:
    """The fuser for ``--fusion``, ``--weights``, ``--rrf-k`` and ``--norm``.

    Raises:
        UnknownSignalError: an unknown fusion method.
        InvalidParameterError: weights missing for ``weighted``, given for
            ``rrf``, or not one per signal.

    """
    if weights is not None and len(weights) != n_signals:
        raise InvalidParameterError(
            f"--weights has {len(weights)} value(s) but {n_signals} signal(s) are searched; give one each"
        )
    if method == "rrf":
        if weights is not None:
            raise InvalidParameterError("--weights needs --fusion weighted (or score); rrf weighs all alike")
        return RRF(k=rrf_k)
    if method == "weighted":
        if weights is None:
            raise InvalidParameterError("--fusion weighted needs --weights, one per signal (e.g. 2,1)")
        return WeightedRRF(weights, k=rrf_k)
    if method == "score":
        if norm not in ("minmax", "zscore"):
            raise InvalidParameterError(f"--norm must be minmax or zscore, got {norm!r}")
        return ScoreFusion(weights, norm="zscore" if norm == "zscore" else "minmax")
    raise UnknownSignalError(f"unknown fusion method {method!r}; choose from {', '.join(FUSION_METHODS)}")


# ---------------------------------------------------------------------- output


def _warn(message: str) -> None:
    print(f"{PROG}: warning: {message}", file=sys.stderr)


def _clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "\u2026"


def _number(value: float) -> str:
    return f"{value:.6g}"


def _title(hit: Hit, index: Index | None) -> str:
    title = hit.fields.get("title")
    if isinstance(title, str) and title:
        return title
    if index is not None and hit.key in index:
        return index.get(hit.key).text
    return ""


def format_results(results: SearchResults, index: Index | None = None, *, explain: bool = False) -> str:
    """A readable table of ``results``; with ``explain``, each signal's rank, raw score and contribution.

    Args:
        results: what :meth:`Index.search` returned.
        index: used to show a text snippet for documents without a title.
        explain: add a rank column per signal and one line per signal under each hit.

    """
    if not results.hits:
        return "  (no results)\n"
    key_width = min(_KEY_WIDTH, max(3, *(len(hit.key) for hit in results)))
    header = f"{'rank':>4}  {'key':<{key_width}}  {'score':>10}"
    signal_widths = [max(4, len(label)) for label in results.signals]
    if explain:
        header += "".join(f"  {label:>{w}}" for label, w in zip(results.signals, signal_widths, strict=True))
    lines = [header + "  title"]
    for hit in results:
        row = f"{hit.rank:>4}  {_clip(hit.key, key_width):<{key_width}}  {_number(hit.score):>10}"
        if explain:
            row += "".join(
                f"  {('-' if s.rank is None else str(s.rank)):>{w}}"
                for s, w in zip(hit.signals, signal_widths, strict=True)
            )
        lines.append(row + "  " + _clip(_title(hit, index), _TITLE_WIDTH))
        if explain:
            label_width = max(len(label) for label in results.signals)
            for signal in hit.signals:
                if signal.rank is None:
                    detail = f"{'absent':<10}  {'':<17}"
                else:
                    detail = f"rank {signal.rank:<5}  score {_number(signal.score or 0.0):<11}"
                lines.append(
                    f"{'':>6}{signal.signal:<{label_width}}  {detail}  "
                    f"contribution {_number(signal.contribution)}"
                )
    return "\n".join(lines) + "\n"


def _json_dump(payload: dict[str, Any]) -> str:
    return json.dumps(payload, ensure_ascii=False, allow_nan=False)


# ---------------------------------------------------------------------- commands


def _cmd_index(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    vectors = None
    if args.vectors is not None:
        vectors = load_vectors(args.vectors, args.vector_ids)
    elif args.vector_ids is not None:
        raise InvalidParameterError("--vector-ids needs --vectors")
    documents = load_documents(args.corpus, args.format, vectors=vectors)
    index = Index.create(
        args.index,
        args.analyzer,
        vector_dim=None if vectors is None else vectors.dim,
        overwrite=args.overwrite,
    )
    index.add_many(documents)
    index.commit()
    index.close()
    with_vectors = sum(1 for document in documents if document.vector is not None)
    dim = "" if index.vector_dim is None else f", dim {index.vector_dim}"
    elapsed = time.perf_counter() - started
    print(
        f"indexed {len(index)} documents ({with_vectors} with vectors{dim}) into {args.index} "
        f"in {elapsed:.2f} s"
    )
    return 0


def _signals_for(
    args: argparse.Namespace, has_vectors: bool, reason: str
) -> tuple[list[str], list[float] | None]:
    """The signals (and their weights) to search; drops ``vector`` with a warning when unusable."""
    names = parse_signals(args.signals)
    weights: list[float] | None = args.weights
    if weights is not None and len(weights) != len(names):
        raise InvalidParameterError(
            f"--weights has {len(weights)} value(s) but --signals names {len(names)}; give one each"
        )
    if "vector" in names and not has_vectors:
        keep = [i for i, name in enumerate(names) if name != "vector"]
        if not keep:
            raise InvalidParameterError(f"the vector signal needs {reason}, and no other signal is left")
        _warn(f"the vector signal needs {reason}; searching without it")
        names = [names[i] for i in keep]
        if weights is not None:
            weights = [weights[i] for i in keep]
    return names, weights


def _cmd_search(args: argparse.Namespace) -> int:
    if args.queries is None and args.query is None:
        raise InvalidParameterError("give a QUERY to search for, or --queries FILE for a batch")
    if args.queries is not None and args.query is not None:
        raise InvalidParameterError("give either a QUERY or --queries FILE, not both")
    if args.queries is None:
        for option, value in (
            ("--query-vectors", args.query_vectors),
            ("--run-out", args.run_out),
            ("--qrels", args.qrels),
        ):
            if value is not None:
                raise InvalidParameterError(f"{option} needs --queries (batch mode)")
        return _search_one(args)
    if args.query_vector is not None:
        raise InvalidParameterError("--query-vector is for one QUERY; use --query-vectors with --queries")
    return _search_batch(args)


def _options(args: argparse.Namespace) -> SignalOptions:
    return SignalOptions(
        k1=args.k1,
        b=args.b,
        half_life_days=args.half_life,
        seed_n=args.seed_n,
        graph_depth=args.graph_depth,
        keep_seeds=args.keep_seeds,
        nprobe=None if args.exact_vectors else args.nprobe,
    )


def _search_one(args: argparse.Namespace) -> int:
    vector: NDArray[np.float32] | None = None
    if args.query_vector is not None:
        vector = load_query_vector(args.query_vector)
    names, weights = _signals_for(args, vector is not None, "a query vector (--query-vector FILE.npy)")
    if vector is not None and "vector" not in names:
        _warn("--query-vector is ignored: the vector signal is not in --signals")
    fuser = make_cli_fuser(args.fusion, weights, args.rrf_k, args.norm, len(names))
    index = Index.open(args.index, readonly=True)
    if "vector" in names and index.vector_dim is None:
        _warn(f"the index at {args.index} holds no vectors; the vector signal will be empty")
    options = _options(args)
    scorers = [make_scorer(name, options) for name in names]
    query = Query(text=args.query, vector=vector)
    results = index.search(query, args.k, fuser, *scorers, depth=args.depth)
    if args.json:
        print(_json_dump({"query": args.query, "k": args.k, **results.to_dict()}))
        return 0
    print(
        f"query {args.query!r}: {len(results)} hit(s); signals {', '.join(results.signals)}; fusion {fuser!r}"
    )
    sys.stdout.write(format_results(results, index, explain=args.explain))
    return 0


def _search_batch(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    only = None
    if args.qrels is not None:
        only = set(load_qrels(args.qrels))
    query_vectors = None
    if args.query_vectors is not None:
        query_vectors = load_vectors(args.query_vectors, args.query_vector_ids)
    elif args.query_vector_ids is not None:
        raise InvalidParameterError("--query-vector-ids needs --query-vectors")
    queries: list[NamedQuery] = load_queries(args.queries, vectors=query_vectors, only=only)
    if not queries:
        raise InvalidParameterError(f"no queries to run in {args.queries}")
    names, weights = _signals_for(args, query_vectors is not None, "query vectors (--query-vectors FILE.npy)")
    if "vector" in names:
        lacking = sum(1 for named in queries if named.query.vector is None)
        if lacking:
            _warn(f"{lacking} of {len(queries)} queries have no vector; their vector signal is empty")
    fuser = make_cli_fuser(args.fusion, weights, args.rrf_k, args.norm, len(names))
    index = Index.open(args.index, readonly=True)
    options = _options(args)
    scorers = [make_scorer(name, options) for name in names]
    to_file = args.run_out is not None and args.run_out != "-"
    lines = 0
    with ExitStack() as stack:
        out: TextIO = (
            stack.enter_context(open(args.run_out, "w", encoding="utf-8")) if to_file else sys.stdout
        )
        for named in tqdm(
            queries, desc="searching", unit="query", delay=PROGRESS_DELAY, leave=False, disable=None
        ):
            results = index.search(named.query, args.k, fuser, *scorers, depth=args.depth)
            if args.json and args.run_out is None:
                out.write(_json_dump({"qid": named.qid, "query": named.query.text, **results.to_dict()}))
                out.write("\n")
            else:
                lines += write_trec_run(out, named.qid, results, args.run_tag)
    if to_file:
        elapsed = time.perf_counter() - started
        print(
            f"wrote {lines} lines for {len(queries)} queries to {args.run_out} "
            f"(signals {', '.join(names)}; tag {args.run_tag}) in {elapsed:.2f} s",
            file=sys.stderr,
        )
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    def render(results: SearchResults, index: Index) -> str:
        return format_results(results, index, explain=True)

    run_demo(sys.stdout, render, k=args.k)
    return 0


def _cmd_scrub(args: argparse.Namespace) -> int:
    index = Index.open(args.index, readonly=True)
    report = index.scrub()
    for problem in report.problems:
        print(problem)
    verdict = "ok" if report.ok else f"{len(report.problems)} problem(s)"
    print(f"scrubbed {report.files} files, {report.bytes} bytes of {args.index}: {verdict}", file=sys.stderr)
    return 0 if report.ok else 1


def _cmd_merge(args: argparse.Namespace) -> int:
    with Index.open(args.index) as index:
        before = index.segment_count
        merged = index.merge(force=args.all)
        print(f"merged {merged} segments of {args.index}: {before} -> {index.segment_count} segments")
    return 0


# ---------------------------------------------------------------------- argument parsing


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _count(text: str) -> int:
    """A -k or --depth value: a positive integer up to MAX_K (the API's own bound)."""
    value = _positive_int(text)
    if value > MAX_K:
        raise argparse.ArgumentTypeError(
            f"expected at most {MAX_K:,} (the largest k the engine accepts), got {text!r}"
        )
    return value


def _non_negative_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not np.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text!r}")
    return value


def _positive_float(text: str) -> float:
    value = _non_negative_float(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}")
    return value


def _weights(text: str) -> list[float]:
    return [_non_negative_float(part.strip()) for part in text.split(",")]


def _run_tag(text: str) -> str:
    if not text or any(ch.isspace() for ch in text):
        raise argparse.ArgumentTypeError(f"a run tag must be non-empty without spaces, got {text!r}")
    return text


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``weft-search`` (exposed for documentation and tests)."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Hybrid retrieval: BM25, vectors, link graphs and recency, fused.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    index = commands.add_parser(
        "index", help="index a corpus into a directory", description="Index a corpus into DIR."
    )
    index.add_argument("corpus", metavar="CORPUS", help="a .jsonl file, or a BEIR folder")
    index.add_argument("--index", required=True, metavar="DIR", help="index directory to create")
    index.add_argument("--format", choices=CORPUS_FORMATS, default="auto", help="corpus layout (auto)")
    index.add_argument("--vectors", metavar="FILE.npy", help="frozen document vectors, one row per id")
    index.add_argument(
        "--vector-ids", metavar="FILE", help="row ids of --vectors, one a line (default: <stem>_ids.txt)"
    )
    index.add_argument("--analyzer", choices=analyzer_names(), default="english", help="analyzer (english)")
    index.add_argument("--overwrite", action="store_true", help="replace an existing index at DIR")
    index.set_defaults(handler=_cmd_index)

    search = commands.add_parser(
        "search",
        help="search an index (one query, or a batch into a TREC run)",
        description=(
            "Search an index with one QUERY, or a batch of --queries. A batch writes a TREC run "
            "(qid Q0 docid rank score tag) to --run-out, or to stdout (JSON lines with --json)."
        ),
    )
    search.add_argument("query", metavar="QUERY", nargs="?", help="the query text")
    search.add_argument("--index", required=True, metavar="DIR", help="index directory")
    search.add_argument("-k", type=_count, default=10, help="hits per query (10)")
    search.add_argument(
        "--signals", default="text", help=f"comma-separated signals from {', '.join(SIGNALS)} (text)"
    )
    search.add_argument("--fusion", choices=FUSION_METHODS, default="rrf", help="fusion method (rrf)")
    search.add_argument(
        "--weights", type=_weights, metavar="W,W", help="one weight per signal (weighted, score)"
    )
    search.add_argument("--rrf-k", type=_non_negative_float, default=60.0, help="RRF constant (60)")
    search.add_argument("--norm", choices=("minmax", "zscore"), default="minmax", help="score fusion norm")
    search.add_argument("--depth", type=_count, help="candidates per signal (max(k, 100))")
    search.add_argument("--half-life", type=_positive_float, default=365.0, help="recency half-life, days")
    search.add_argument("--k1", type=_non_negative_float, default=1.2, help="BM25 k1 (1.2)")
    search.add_argument("--b", type=_non_negative_float, default=0.75, help="BM25 b (0.75)")
    search.add_argument("--seed-n", type=_positive_int, default=5, help="BM25 hits seeding graph signals")
    search.add_argument("--graph-depth", type=_positive_int, default=3, help="hops for the graph signal")
    search.add_argument(
        "--keep-seeds", action="store_true", help="keep the BM25 seeds in the graph/pagerank streams"
    )
    search.add_argument(
        "--nprobe",
        type=_positive_int,
        default=DEFAULT_NPROBE,
        help="IVF lists the vector signal reads (%(default)s)",
    )
    search.add_argument("--exact-vectors", action="store_true", help="scan every vector (no IVF lists)")
    search.add_argument("--explain", action="store_true", help="show each signal's rank, score, share")
    search.add_argument("--json", action="store_true", help="print JSON")
    search.add_argument("--query-vector", metavar="FILE.npy", help="1-D vector for a single QUERY")
    search.add_argument("--queries", metavar="FILE", help="batch: queries.jsonl (BEIR) or a BEIR folder")
    search.add_argument("--qrels", metavar="FILE", help="batch: only run the queries judged in this file")
    search.add_argument("--query-vectors", metavar="FILE.npy", help="batch: query vectors, one row per id")
    search.add_argument(
        "--query-vector-ids", metavar="FILE", help="row ids of --query-vectors (default: <stem>_ids.txt)"
    )
    search.add_argument("--run-out", metavar="FILE", help="batch: write the TREC run here ('-': stdout)")
    search.add_argument("--run-tag", type=_run_tag, default="weft", help="batch: run tag (weft)")
    search.set_defaults(handler=_cmd_search)

    demo = commands.add_parser(
        "demo",
        help="index the bundled demo corpus and run explained hybrid queries",
        description="Index the bundled demo corpus in a temporary directory and run a few hybrid queries.",
    )
    demo.add_argument("-k", type=_count, default=5, help="hits per query (5)")
    demo.set_defaults(handler=_cmd_demo)

    scrub = commands.add_parser(
        "scrub",
        help="verify every byte of an index and name what is damaged",
        description="Read every committed file of DIR, check every checksum and structure rule, and "
        "list what is damaged. Exit status 0 when clean, 1 when damage was found.",
    )
    scrub.add_argument("index", metavar="DIR", help="index directory")
    scrub.set_defaults(handler=_cmd_scrub)

    merge = commands.add_parser(
        "merge",
        help="merge segments by the size-tiered policy (or all of them)",
        description="Merge the segments of DIR as the size-tiered policy says, and commit.",
    )
    merge.add_argument("index", metavar="DIR", help="index directory")
    merge.add_argument("--all", action="store_true", help="merge every segment into one")
    merge.set_defaults(handler=_cmd_merge)

    # The evaluation harness and the encoder bring their own subcommands.
    from weftsearch.embed import add_subcommand as add_embed_command
    from weftsearch.eval.command import add_subcommands as add_eval_commands

    add_eval_commands(commands)
    add_embed_command(commands)
    from weftsearch.bench.recall import add_subcommand as add_recall_command

    add_recall_command(commands)
    return parser


def _error(message: str) -> int:
    print(f"{PROG}: error: {' '.join(message.split())}", file=sys.stderr)
    return 2


def _os_message(exc: OSError) -> str:
    if exc.filename is not None and exc.strerror:
        return f"{exc.strerror}: {exc.filename}"
    return str(exc)


def main(argv: list[str] | None = None) -> int:
    """Run ``weft-search`` with ``argv`` (default ``sys.argv[1:]``); return the exit status.

    0 on success, 2 on a usage or user error (printed as one line on stderr),
    130 when interrupted.
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits on --help, --version and usage errors
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # reports record the command
    try:
        return int(args.handler(args))
    except BrokenPipeError:
        # The reader went away (e.g. `| head`); silence the flush at exit.
        with suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115
        return 1
    except WeftError as exc:
        return _error(str(exc))
    except OSError as exc:
        return _error(_os_message(exc))
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
