r"""The ``weft-search`` command line: ``index``, ``search``, ``add``, ``delete``, ``stats``, ``demo``, ...

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
seeds) and ``recency`` (exponential decay with age). One signal is not fused:
its hits carry the signal's own scores (BM25 scores for ``text``).

Writes from the shell: ``add CORPUS --index DIR`` upserts documents,
``delete KEY... --index DIR`` deletes them, ``stats DIR`` shows what an index
holds. Each write is one atomic commit; a bad corpus line changes nothing.

Exit status: 0 on success; 1 when the command ran but found a problem it
reports (``search --qrels`` with judged queries that match no query, unless
``--allow-unmatched``; ``delete`` with keys that are not in the index, unless
``--missing-ok``; ``scrub`` finding damage); 2 on a user error (a bad file,
an unknown signal, a missing index, ...), printed as one line,
``weft-search: error: <message>``, on stderr; 130 when interrupted.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
import warnings
from collections.abc import Mapping, Sequence
from contextlib import ExitStack, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np
from numpy.typing import NDArray
from tqdm.auto import tqdm

from weftsearch import __version__
from weftsearch._argtypes import bounded_int, non_negative_float, positive_float, positive_int
from weftsearch.analysis import analyzer_names
from weftsearch.corpus import (
    CORPUS_FORMATS,
    PROGRESS_DELAY,
    FrozenVectors,
    NamedQuery,
    load_documents,
    load_qrels,
    load_queries,
    load_query_vector,
    load_vectors,
    write_trec_run,
)
from weftsearch.demo import run_demo
from weftsearch.distributed.sharded import ShardedIndex, is_sharded, scrub_sharded
from weftsearch.documents import Document
from weftsearch.engine.filters import Filter, parse_filter
from weftsearch.engine.index import Index
from weftsearch.engine.protocols import Fuser, Scorer
from weftsearch.engine.query import Query
from weftsearch.engine.search import MAX_THREADS, Hit, SearchResults
from weftsearch.engine.stats import IndexStats
from weftsearch.engine.stream import MAX_K, PlanValue
from weftsearch.errors import (
    CorpusFormatError,
    DiscardedWritesWarning,
    IndexExistsError,
    InvalidParameterError,
    UnknownSignalError,
    WeftError,
)
from weftsearch.fusion import FUSION_METHODS, RRF, ScoreFusion, WeightedRRF
from weftsearch.scorers import BM25Scorer, GraphScorer, PageRankScorer, RecencyScorer, VectorScorer
from weftsearch.scorers.vector import DEFAULT_NPROBE
from weftsearch.storage import scrub_directory
from weftsearch.storage.directory import MANIFEST

__all__ = [
    "main",
    "build_parser",
    "SIGNALS",
    "SignalOptions",
    "parse_signals",
    "make_scorer",
    "make_cli_fuser",
    "format_results",
    "format_stats",
    "match_judged",
    "JudgedMatch",
    "EXIT_PROBLEM",
]

PROG = "weft-search"
#: Exit status of a command that ran but found a problem it reported (see the module docstring).
EXIT_PROBLEM = 1
#: How many ids or keys a report names before it says "and N more".
_SHOWN = 5
#: Signal names ``--signals`` accepts, in the order the help lists them.
SIGNALS: tuple[str, ...] = ("text", "vector", "graph", "pagerank", "recency")
_SECONDS_PER_DAY = 86400.0
_TITLE_WIDTH = 60
#: Queries a batch search hands to ``Index.search_many`` at once (the progress bar moves per slice).
_BATCH_SLICE = 256
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
    if index is not None and not index.store_text:
        return "(text not stored)"
    if index is not None and hit.key in index:
        return index.get(hit.key).text
    return ""


def format_results(results: SearchResults, index: Index | None = None, *, explain: bool = False) -> str:
    """A readable table of ``results``; with ``explain``, each signal's rank, raw score and contribution.

    Args:
        results: what :meth:`Index.search` returned.
        index: used to show a text snippet for documents without a title.
        explain: add a rank column per signal, one line per signal under each
            hit, and one line per signal with the plan its scorer took
            (exact scan / lists probed / budget; "CUT SHORT by its budget" when
            a budget left it short).

    """
    plan_lines = _plan_lines(results) if explain else []
    if not results.hits:
        return "".join(line + "\n" for line in ["  (no results)", *plan_lines])
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
    return "\n".join(lines + plan_lines) + "\n"


def _plan_lines(results: SearchResults) -> list[str]:
    """One line per signal: the plan its scorer took (``plan LABEL: path, key value, ...``).

    A sharded stream's plan (``shards`` and ``NAME.key`` entries) gets a line
    per shard under its own (``plan LABEL: 2 shards``, then ``NAME: path, ...``).
    """
    lines = []
    for label, plan in results.plans.items():
        shards: dict[str, dict[str, PlanValue]] = {}
        if plan is None:
            text = "(not described by its scorer)"
        else:
            if isinstance(plan.get("shards"), int):
                whole: dict[str, PlanValue] = {}
                for key, value in plan.items():
                    name, dot, entry = key.partition(".")
                    if dot:
                        shards.setdefault(name, {})[entry] = value
                    elif key != "shards":
                        whole[key] = value
                count = plan["shards"]
                text = f"{count} shard{'' if count == 1 else 's'}" + (
                    f", {_plan_text(whole)}" if whole else ""
                )
            else:
                text = _plan_text(plan)
        if label in results.cut_short:
            text += "  CUT SHORT by its budget: fewer candidates than it could have found"
        lines.append(f"  plan {label}: {text}")
        lines.extend(f"    {name}: {_plan_text(entries)}" for name, entries in shards.items())
    return lines


def _plan_text(plan: Mapping[str, PlanValue]) -> str:
    """``path, key value, ...`` (the path first, when the plan names one)."""
    path = plan.get("path")
    rest = ", ".join(f"{key} {_plan_value(value)}" for key, value in plan.items() if key != "path")
    return f"{path}" + (f", {rest}" if rest else "") if path is not None else rest


def _plan_value(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return _number(value)
    return str(value)


def _json_dump(payload: dict[str, Any]) -> str:
    return json.dumps(payload, ensure_ascii=False, allow_nan=False)


# ---------------------------------------------------------------------- commands


def _read_corpus(args: argparse.Namespace) -> tuple[list[Document], FrozenVectors | None]:
    """The documents of ``args.corpus`` with their ``--vectors`` (read and checked whole)."""
    vectors = None
    if args.vectors is not None:
        vectors = load_vectors(args.vectors, args.vector_ids)
    elif args.vector_ids is not None:
        raise InvalidParameterError("--vector-ids needs --vectors")
    return load_documents(args.corpus, args.format, vectors=vectors), vectors


def _cmd_index(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    documents, vectors = _read_corpus(args)
    if not documents:
        # As `add` does: an index of nothing is almost always a wrong path or an unfinished
        # file, and nothing is created (an existing index at DIR is left as it is).
        raise InvalidParameterError(
            f"{args.corpus} holds no documents; nothing was indexed, no index created"
        )
    # With --overwrite the old index keeps serving until the commit below
    # replaces it in one rename (Index.create); any error before that leaves
    # it unchanged (the with block discards the new documents).
    try:
        # No search runs in this process: the commit's encoder child need not yield the
        # CPU (at "idle" it would wait behind every other process on a busy machine).
        index = Index.create(
            args.index,
            args.analyzer,
            vector_dim=None if vectors is None else vectors.dim,
            overwrite=args.overwrite,
            commit_priority="normal",
            store_text=not args.no_store_text,
        )
    except IndexExistsError:  # the library's message names the keyword; here the flag is the way
        raise IndexExistsError(f"{args.index} is not empty; pass --overwrite to replace it") from None
    with warnings.catch_warnings(), index:
        warnings.simplefilter("ignore", DiscardedWritesWarning)  # the error itself is reported
        index.add_many(documents, workers=args.workers)
        index.commit()
        count = len(index)
    with_vectors = sum(1 for document in documents if document.vector is not None)
    dim = "" if index.vector_dim is None else f", dim {index.vector_dim}"
    elapsed = time.perf_counter() - started
    print(
        f"indexed {count} documents ({with_vectors} with vectors{dim}) into {args.index} in {elapsed:.2f} s"
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
            ("--allow-unmatched", args.allow_unmatched or None),
            ("--threads", args.threads),
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
    index = _open_readonly(args.index)
    if "vector" in names and _vector_dim(index) is None:
        _warn(f"the index at {args.index} holds no vectors; the vector signal will be empty")
    options = _options(args)
    scorers = [make_scorer(name, options) for name in names]
    query = Query(text=args.query, vector=vector, filter=args.filter)
    results = index.search(query, args.k, fuser, *scorers, depth=args.depth)
    if args.json:
        print(_json_dump({"query": args.query, "k": args.k, **results.to_dict()}))
        return 0
    fusion = repr(fuser) if len(names) > 1 else "none (one signal: its own scores)"
    print(
        f"query {args.query!r}: {len(results)} hit(s); signals {', '.join(results.signals)}; fusion {fusion}"
    )
    sys.stdout.write(
        format_results(results, index if isinstance(index, Index) else None, explain=args.explain)
    )
    return 0


def _open_readonly(path: str) -> Index | ShardedIndex:
    """The index at ``path`` read-only: a sharded one (a ``SHARDS`` record, no manifest) or a single one."""
    if is_sharded(path) and not (Path(path) / MANIFEST).exists():
        return ShardedIndex.open(path, readonly=True)
    return Index.open(path, readonly=True)


def _vector_dim(index: Index | ShardedIndex) -> int | None:
    return index.vector_dim if isinstance(index, Index) else index.stats().vector_dim


def _search_batch(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    query_vectors = None
    if args.query_vectors is not None:
        query_vectors = load_vectors(args.query_vectors, args.query_vector_ids)
    elif args.query_vector_ids is not None:
        raise InvalidParameterError("--query-vector-ids needs --query-vectors")
    if args.allow_unmatched and args.qrels is None:
        raise InvalidParameterError("--allow-unmatched needs --qrels")
    queries: list[NamedQuery] = load_queries(args.queries, vectors=query_vectors)
    status = 0
    if args.qrels is not None:
        match = match_judged(list(load_qrels(args.qrels)), [named.qid for named in queries])
        status = _report_judged(match, args)
        if not match.run:
            raise InvalidParameterError(
                f"no query of {args.queries} is judged in {args.qrels}; nothing to run"
            )
        wanted = set(match.run)
        queries = [named for named in queries if named.qid in wanted]
    if not queries:
        raise InvalidParameterError(f"no queries to run in {args.queries}")
    names, weights = _signals_for(args, query_vectors is not None, "query vectors (--query-vectors FILE.npy)")
    if "vector" in names:
        lacking = sum(1 for named in queries if named.query.vector is None)
        if lacking:
            _warn(f"{lacking} of {len(queries)} queries have no vector; their vector signal is empty")
    fuser = make_cli_fuser(args.fusion, weights, args.rrf_k, args.norm, len(names))
    index = _open_readonly(args.index)
    if isinstance(index, ShardedIndex) and args.threads is not None:
        index.close()
        raise InvalidParameterError(
            f"--threads is for a single index; {args.index} is a sharded index (its shards answer each batch)"
        )
    options = _options(args)
    scorers = [make_scorer(name, options) for name in names]
    to_file = args.run_out is not None and args.run_out != "-"
    lines = 0
    with ExitStack() as stack:
        out: TextIO = (
            stack.enter_context(open(args.run_out, "w", encoding="utf-8")) if to_file else sys.stdout
        )
        progress = stack.enter_context(
            tqdm(
                total=len(queries),
                desc="searching",
                unit="query",
                delay=PROGRESS_DELAY,
                leave=False,
                disable=None,
            )
        )
        # Index.search_many in slices, so the progress bar moves and only a slice's
        # results are held at once; the index is read-only, so every slice reads
        # the same snapshot.
        for start in range(0, len(queries), _BATCH_SLICE):
            batch = queries[start : start + _BATCH_SLICE]
            asked = [dataclasses.replace(named.query, filter=args.filter) for named in batch]
            many: Sequence[SearchResults] = (
                index.search_many(asked, args.k, fuser, *scorers, depth=args.depth)
                if isinstance(index, ShardedIndex)
                else index.search_many(asked, args.k, fuser, *scorers, depth=args.depth, threads=args.threads)
            )
            for named, results in zip(batch, many, strict=True):
                if args.json and args.run_out is None:
                    out.write(_json_dump({"qid": named.qid, "query": named.query.text, **results.to_dict()}))
                    out.write("\n")
                else:
                    lines += write_trec_run(out, named.qid, results, args.run_tag)
            progress.update(len(batch))
    if to_file:
        elapsed = time.perf_counter() - started
        print(
            f"wrote {lines} lines for {len(queries)} queries to {args.run_out} "
            f"(signals {', '.join(names)}; tag {args.run_tag}) in {elapsed:.2f} s",
            file=sys.stderr,
        )
    return status


# ---------------------------------------------------------------------- judged query ids


def _unpadded(qid: str) -> str:
    """``qid`` without the zeros padding a numeric id (``"007"`` -> ``"7"``); other ids unchanged."""
    if qid.isascii() and qid.isdigit():
        return qid.lstrip("0") or "0"
    return qid


@dataclass(frozen=True, slots=True)
class JudgedMatch:
    """How the query ids of a qrels file meet the query ids of a queries file (exact string match).

    Attributes:
        run: ids both judged and in the queries file, in queries-file order.
        unmatched_judged: judged ids no query has, in qrels order.
        unjudged: query ids with no judgement, in queries-file order.
        judged_count: distinct judged ids.
        query_count: distinct query ids.
        near: for an unmatched id (either side), the id on the other side
            that differs from it only by zero-padding (``"01"`` -> ``"1"``).
            Such ids are reported, never matched silently.

    """

    run: tuple[str, ...]
    unmatched_judged: tuple[str, ...]
    unjudged: tuple[str, ...]
    judged_count: int
    query_count: int
    near: Mapping[str, str]


def match_judged(judged: Sequence[str], query_ids: Sequence[str]) -> JudgedMatch:
    """Match judged query ids to query ids exactly, and find near misses by zero-padding.

    O(judged + queries).
    """
    judged_set = set(judged)
    query_set = set(query_ids)
    unmatched = tuple(dict.fromkeys(qid for qid in judged if qid not in query_set))
    unjudged = tuple(dict.fromkeys(qid for qid in query_ids if qid not in judged_set))
    # Near misses are looked for only among the ids left unmatched on the other side.
    by_form_query: dict[str, str] = {}
    for qid in unjudged:
        by_form_query.setdefault(_unpadded(qid), qid)
    by_form_judged: dict[str, str] = {}
    for qid in unmatched:
        by_form_judged.setdefault(_unpadded(qid), qid)
    near: dict[str, str] = {}
    for qid in unmatched:
        if _unpadded(qid) in by_form_query:
            near[qid] = by_form_query[_unpadded(qid)]
    for qid in unjudged:
        if _unpadded(qid) in by_form_judged:
            near[qid] = by_form_judged[_unpadded(qid)]
    return JudgedMatch(
        run=tuple(dict.fromkeys(qid for qid in query_ids if qid in judged_set)),
        unmatched_judged=unmatched,
        unjudged=unjudged,
        judged_count=len(judged_set),
        query_count=len(query_set),
        near=near,
    )


def _more(total: int) -> list[str]:
    return [f"  ... and {total - _SHOWN} more"] if total > _SHOWN else []


def _report_judged(match: JudgedMatch, args: argparse.Namespace) -> int:
    """Print on stderr what did not match; return EXIT_PROBLEM for unmatched judged ids (unless allowed)."""
    status = 0
    if match.unmatched_judged:
        allowed = bool(args.allow_unmatched)
        status = 0 if allowed else EXIT_PROBLEM
        count = len(match.unmatched_judged)
        consequence = (
            "they are not run (--allow-unmatched)"
            if allowed
            else f"they are not run, and the exit status is {EXIT_PROBLEM} (--allow-unmatched accepts this)"
        )
        lines = [
            f"{PROG}: {'warning' if allowed else 'error'}: {count} of {match.judged_count} judged "
            f"query ids in {args.qrels} match no query id in {args.queries}; {consequence}:"
        ]
        for qid in match.unmatched_judged[:_SHOWN]:
            hint = f"; did you mean {match.near[qid]!r}?" if qid in match.near else ""
            lines.append(f"  judged query {qid!r} matches no query{hint}")
        lines += _more(count)
        if any(qid in match.near for qid in match.unmatched_judged):
            lines.append("  (ids are compared exactly: rewrite one file so its ids match the other's)")
        print("\n".join(lines), file=sys.stderr)
    if match.unjudged:
        count = len(match.unjudged)
        lines = [
            f"{PROG}: note: {count} of {match.query_count} queries in {args.queries} have no "
            f"judgement in {args.qrels}; they are not run:"
        ]
        for qid in match.unjudged[:_SHOWN]:
            hint = f"; did you mean judged query {match.near[qid]!r}?" if qid in match.near else ""
            lines.append(f"  query {qid!r} has no judgement{hint}")
        lines += _more(count)
        print("\n".join(lines), file=sys.stderr)
    return status


def _cmd_demo(args: argparse.Namespace) -> int:
    def render(results: SearchResults, index: Index) -> str:
        return format_results(results, index, explain=True)

    run_demo(sys.stdout, render, k=args.k)
    return 0


def _cmd_scrub(args: argparse.Namespace) -> int:
    # The storage-level scrub: no Index, no lock, so an index that cannot be opened is scrubbed too.
    path = Path(args.index)
    sharded = is_sharded(path) and not (path / MANIFEST).exists()
    report = scrub_sharded(path) if sharded else scrub_directory(path)
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


# ---------------------------------------------------------------------- add, delete, stats


def _cmd_add(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    # Every line is read and checked before the index is opened: a bad line changes nothing.
    documents, _ = _read_corpus(args)
    if not documents:
        raise InvalidParameterError(f"{args.corpus} holds no documents; nothing to add")
    with Index.open(args.index, commit_priority="normal") as index:  # no search here (see index)
        before = len(index)
        replaced = sum(1 for document in documents if document.key in index)
        # add_many checks the whole batch (vector widths) before applying any of it.
        index.add_many(documents, workers=args.workers)
        generation = index.commit()
        total = len(index)
    with_vectors = sum(1 for document in documents if document.vector is not None)
    elapsed = time.perf_counter() - started
    print(
        f"added {len(documents) - replaced} new and replaced {replaced} documents "
        f"({with_vectors} with vectors) from {args.corpus} into {args.index}: "
        f"{before} -> {total} documents, generation {generation}, in {elapsed:.2f} s"
    )
    return 0


def _read_keys_file(path: str) -> list[str]:
    """Keys of a ``--keys`` file: one a line (line ends stripped, blank lines skipped).

    Raises:
        CorpusFormatError: the file is not UTF-8 (the message names file and line).

    """
    keys = []
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise CorpusFormatError(f"{path}:{number}: not UTF-8 ({exc.reason})") from None
            key = line.rstrip("\r\n")
            if key.strip():
                keys.append(key)
    return keys


def _quoted(keys: Sequence[str]) -> str:
    shown = ", ".join(repr(key) for key in keys[:_SHOWN])
    return shown + (f" and {len(keys) - _SHOWN} more" if len(keys) > _SHOWN else "")


def _cmd_delete(args: argparse.Namespace) -> int:
    keys = list(args.keys)
    if args.keys_file is not None:
        keys += _read_keys_file(args.keys_file)
    if not keys:
        raise InvalidParameterError("name the keys to delete (KEY... or --keys FILE)")
    wanted = list(dict.fromkeys(keys))
    with Index.open(args.index) as index:
        missing = [key for key in wanted if key not in index]
        removed = index.delete_many(wanted)
        generation = index.commit() if removed else index.generation
        total = len(index)
    print(
        f"deleted {removed} of {len(wanted)} keys from {args.index}: {total} documents left, "
        f"generation {generation}"
    )
    if missing:
        level = "note" if args.missing_ok else "error"
        print(
            f"{PROG}: {level}: {len(missing)} of {len(wanted)} keys are not in {args.index}: "
            f"{_quoted(missing)}",
            file=sys.stderr,
        )
        return 0 if args.missing_ok else EXIT_PROBLEM
    return 0


def _size(count: int) -> str:
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{count} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def format_stats(stats: IndexStats) -> str:
    """A readable summary of ``stats`` and a table with one row per segment."""
    vectors = "none" if stats.vector_dim is None else f"dim {stats.vector_dim}, {stats.vector_dtype}"
    segments = f"{len(stats.segments)}"
    if stats.live_segments != len(stats.segments):
        segments += f" ({stats.live_segments} with live documents)"
    lines = [
        f"index:      {stats.path if stats.path is not None else '(in memory)'}",
        f"documents:  {stats.documents} ({stats.deleted} deleted, awaiting merge)",
        f"segments:   {segments}",
        f"generation: {stats.generation}",
        f"analyzer:   {stats.analyzer}",
        f"vectors:    {vectors}",
        f"on disk:    {_size(stats.bytes_on_disk)} ({stats.bytes_on_disk} bytes)",
    ]
    if stats.segments:
        width = max(7, *(len(segment.name or "(memory)") for segment in stats.segments))
        lines.append("")
        lines.append(f"{'segment':<{width}}  {'documents':>9}  {'deleted':>7}  {'bytes':>12}")
        for segment in stats.segments:
            lines.append(
                f"{segment.name or '(memory)':<{width}}  {segment.documents:>9}  {segment.deleted:>7}  "
                f"{segment.bytes:>12}"
            )
    return "\n".join(lines) + "\n"


def _cmd_stats(args: argparse.Namespace) -> int:
    with _open_readonly(args.index) as index:
        stats = index.stats()
    if args.json:
        print(_json_dump(stats.to_dict()))
    else:
        sys.stdout.write(format_stats(stats))
    return 0


# ---------------------------------------------------------------------- argument parsing


#: A -k or --depth value: a positive integer up to MAX_K (the API's own bound).
_count = bounded_int(MAX_K, "(the largest k the engine accepts)")
#: A --threads value: a positive integer up to MAX_THREADS.
_threads = bounded_int(MAX_THREADS, "threads")


def _weights(text: str) -> list[float]:
    return [non_negative_float(part.strip()) for part in text.split(",")]


def _run_tag(text: str) -> str:
    if not text or any(ch.isspace() for ch in text):
        raise argparse.ArgumentTypeError(f"a run tag must be non-empty without spaces, got {text!r}")
    return text


def _filter(text: str) -> Filter:
    try:
        return parse_filter(text)
    except WeftError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class _CommandParser(argparse.ArgumentParser):
    """An argparse parser that reports a refused option value as one line, not a usage error.

    argparse prints the whole usage block before an error; for a well-formed
    command with a bad value (``--filter``, ``-k``, ...) only the message
    helps (it names the option and, for a filter, the position in the
    expression), so that is all it prints, exiting 2 as argparse does.
    Subcommand parsers are made of the same class (argparse's default), so
    every command's options behave alike. Usage errors proper (an unknown
    option, a missing argument, a choice not offered) keep the usage block.
    """

    def _get_value(self, action: argparse.Action, arg_string: str) -> Any:
        try:
            return super()._get_value(action, arg_string)
        except argparse.ArgumentError as exc:
            raise SystemExit(_error(str(exc))) from None


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``weft-search`` (exposed for documentation and tests)."""
    parser: argparse.ArgumentParser = _CommandParser(
        prog=PROG,
        description="Hybrid retrieval: BM25, vectors, link graphs and recency, fused.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    index = commands.add_parser(
        "index",
        help="index a corpus into a directory",
        description="Index a corpus into DIR. Exit status: 0 when indexed, 2 on a user error, "
        "including a corpus that holds no documents (nothing is created then).",
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
    index.add_argument(
        "--no-store-text",
        action="store_true",
        help="index the text but do not store it (smaller index; hits show no text; docs/FORMAT.md)",
    )
    index.add_argument(
        "--workers",
        type=positive_int,
        default=None,
        metavar="N",
        help="processes that analyse the documents (default: from 2,000 documents, one more per "
        "idle CPU; the index is the same whatever the count)",
    )
    index.set_defaults(handler=_cmd_index)

    search = commands.add_parser(
        "search",
        help="search an index (one query, or a batch into a TREC run)",
        description=(
            "Search an index with one QUERY, or a batch of --queries. A batch writes a TREC run "
            "(qid Q0 docid rank score tag) to --run-out, or to stdout (JSON lines with --json). "
            "One signal is not fused: its hits carry the signal's own scores. Exit status: 0 on "
            "success, 1 when --qrels judges query ids that match no query (the matched ones are "
            "run; --allow-unmatched makes this 0), 2 on a user error."
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
    search.add_argument("--rrf-k", type=non_negative_float, default=60.0, help="RRF constant (60)")
    search.add_argument("--norm", choices=("minmax", "zscore"), default="minmax", help="score fusion norm")
    search.add_argument("--depth", type=_count, help="candidates per signal (max(k, 100); k with one signal)")
    search.add_argument(
        "--half-life",
        type=positive_float,
        default=365.0,
        metavar="DAYS",
        help="recency half-life in days (365); the age at which the recency score halves",
    )
    search.add_argument("--k1", type=non_negative_float, default=1.2, help="BM25 k1 (1.2)")
    search.add_argument("--b", type=non_negative_float, default=0.75, help="BM25 b (0.75)")
    search.add_argument("--seed-n", type=positive_int, default=5, help="BM25 hits seeding graph signals")
    search.add_argument("--graph-depth", type=positive_int, default=3, help="hops for the graph signal")
    search.add_argument(
        "--keep-seeds", action="store_true", help="keep the BM25 seeds in the graph/pagerank streams"
    )
    search.add_argument(
        "--nprobe",
        type=positive_int,
        default=DEFAULT_NPROBE,
        help="IVF lists the vector signal reads (%(default)s)",
    )
    search.add_argument("--exact-vectors", action="store_true", help="scan every vector (no IVF lists)")
    search.add_argument(
        "--filter",
        type=_filter,
        metavar="EXPR",
        help="only documents matching EXPR, applied inside every signal before its top k: "
        "e.g. \"year >= 1990 and source in ('pubmed', 'arxiv') and not exists(retracted)\" "
        "(grammar: docs/ARCHITECTURE.md, 'Filters')",
    )
    search.add_argument("--explain", action="store_true", help="show each signal's rank, score, share")
    search.add_argument("--json", action="store_true", help="print JSON")
    search.add_argument("--query-vector", metavar="FILE.npy", help="1-D vector for a single QUERY")
    search.add_argument("--queries", metavar="FILE", help="batch: queries.jsonl (BEIR) or a BEIR folder")
    search.add_argument(
        "--qrels",
        metavar="FILE",
        help="batch: only run the queries judged in this file; judged ids that match no query are "
        "reported and make the exit status 1",
    )
    search.add_argument(
        "--allow-unmatched",
        action="store_true",
        help="with --qrels: exit 0 even when judged query ids match no query (still reported)",
    )
    search.add_argument("--query-vectors", metavar="FILE.npy", help="batch: query vectors, one row per id")
    search.add_argument(
        "--query-vector-ids", metavar="FILE", help="row ids of --query-vectors (default: <stem>_ids.txt)"
    )
    search.add_argument("--run-out", metavar="FILE", help="batch: write the TREC run here ('-': stdout)")
    search.add_argument("--run-tag", type=_run_tag, default="weft", help="batch: run tag (weft)")
    search.add_argument(
        "--threads",
        type=_threads,
        default=None,
        help="batch: search on this many threads (default 1; the output is the same for any number)",
    )
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
        "list what is damaged (every damaged file, even when the index cannot be opened). "
        "Exit status 0 when clean, 1 when damage was found, 2 when DIR is not an index.",
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

    add = commands.add_parser(
        "add",
        help="add or replace (upsert) the documents of a corpus in an index",
        description="Add the documents of CORPUS to the index at DIR, replacing documents with the "
        "same key, in one atomic commit. The corpus is read as `index` reads it (same keys); every "
        "line is checked first, so a bad line changes nothing.",
    )
    add.add_argument("corpus", metavar="CORPUS", help="a .jsonl file, or a BEIR folder")
    add.add_argument("--index", required=True, metavar="DIR", help="index directory (must exist)")
    add.add_argument("--format", choices=CORPUS_FORMATS, default="auto", help="corpus layout (auto)")
    add.add_argument("--vectors", metavar="FILE.npy", help="frozen document vectors, one row per id")
    add.add_argument(
        "--vector-ids", metavar="FILE", help="row ids of --vectors, one a line (default: <stem>_ids.txt)"
    )
    add.add_argument(
        "--workers",
        type=positive_int,
        default=None,
        metavar="N",
        help="processes that analyse the documents (default: from 2,000 documents, one more per "
        "idle CPU; the index is the same whatever the count)",
    )
    add.set_defaults(handler=_cmd_add)

    delete = commands.add_parser(
        "delete",
        help="delete documents by key",
        description="Delete the documents with these keys from the index at DIR in one atomic commit. "
        "Exit status: 0 when every key was there, 1 when some were not (the others are deleted; "
        "--missing-ok makes this 0), 2 on a user error.",
    )
    delete.add_argument("keys", metavar="KEY", nargs="*", help="keys of the documents to delete")
    delete.add_argument("--index", required=True, metavar="DIR", help="index directory")
    delete.add_argument("--keys", dest="keys_file", metavar="FILE", help="more keys, one a line")
    delete.add_argument("--missing-ok", action="store_true", help="exit 0 when some keys are not there")
    delete.set_defaults(handler=_cmd_delete)

    stats = commands.add_parser(
        "stats",
        help="show what an index holds: documents, segments, vectors, size",
        description="Show the documents, segments, generation, vector width and dtype, analyzer, "
        "size on disk and a per-segment table of the index at DIR.",
    )
    stats.add_argument("index", metavar="DIR", help="index directory")
    stats.add_argument("--json", action="store_true", help="print one JSON object")
    stats.set_defaults(handler=_cmd_stats)

    # The evaluation harness and the encoder bring their own subcommands.
    from weftsearch.embed import add_subcommand as add_embed_command
    from weftsearch.eval.command import add_subcommands as add_eval_commands

    add_eval_commands(commands)
    add_embed_command(commands)
    from weftsearch.bench.recall import add_subcommand as add_recall_command

    add_recall_command(commands)
    from weftsearch.server.command import add_subcommand as add_serve_command

    add_serve_command(commands)
    from weftsearch.bench.loadgen import add_subcommand as add_bench_command

    add_bench_command(commands)
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

    0 on success, 1 when a command ran but found a problem it reported
    (:data:`EXIT_PROBLEM`; see the module docstring), 2 on a usage or user
    error (printed as one line on stderr), 130 when interrupted.
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
