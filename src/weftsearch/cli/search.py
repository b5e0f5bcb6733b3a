r"""``weft-search search``: one query, or a batch of queries into a TREC run.

Examples::

    weft-search search "rank fusion" --index idx -k 5 --rank 'rrf(bm25, graph)' --explain
    weft-search search --index idx --queries queries.jsonl --qrels qrels/test.tsv \
        --rank 'rrf(bm25, vector, k=60)@100' --query-vectors queries.npy --run-out run.txt
    weft-search search "rank fusion" --index idx --profile hybrid

**One ranking language.** A search ranks with a spec of
:mod:`weftsearch.ranking.specs` (``--rank``) or a profile stored in the index
(``--profile``), built by :func:`weftsearch.ranking.build_arm`, the function the
server and ``eval --save-profile`` use: what eval measured is what the shell
runs, and the run file of ``search --rank SPEC`` is eval's for that arm. The
older flags ``--signals``, ``--fusion``, ``--weights``, ``--rrf-k``, ``--norm``,
``--k1``, ``--b``, ``--half-life``, ``--seed-n``, ``--graph-depth``,
``--keep-seeds``, ``--nprobe`` and ``--exact-vectors`` are sugar that compiles to
a spec (:func:`sugar_spec`): signal ``text`` is ``bm25``, and the others keep
their names; hits are labelled with the spec's scorer names.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any, TextIO

import numpy as np
from numpy.typing import NDArray
from tqdm.auto import tqdm

from weftsearch._argtypes import int_at_least, non_negative_float, positive_float, positive_int
from weftsearch.cli._common import (
    _SHOWN,
    EXIT_PROBLEM,
    PROG,
    _count,
    _filter,
    _json_dump,
    _open_readonly,
    _threads,
    _vector_dim,
    _warn,
)
from weftsearch.corpus import (
    PROGRESS_DELAY,
    NamedQuery,
    load_qrels,
    load_queries,
    load_query_vector,
    load_vectors,
    write_trec_run,
)
from weftsearch.distributed.sharded import ShardedIndex, ShardedResults
from weftsearch.embedders import Embedder
from weftsearch.engine.explanation import Explanation
from weftsearch.engine.facets import Facets
from weftsearch.engine.filters import Filter, parse_filter
from weftsearch.engine.index import Index
from weftsearch.engine.query import Query
from weftsearch.engine.search import Hit, SearchResults
from weftsearch.engine.stream import PlanValue
from weftsearch.errors import InvalidParameterError, QuerySyntaxError, UnknownSignalError
from weftsearch.fusion import FUSION_METHODS
from weftsearch.highlight import MAX_FRAGMENT_SIZE, HighlightOptions
from weftsearch.querylang import Node
from weftsearch.querylang import parse as parse_query
from weftsearch.ranking import Arm, Expr, ProfileStore, build_arm, parse_arm
from weftsearch.scorers.vector import DEFAULT_NPROBE

__all__ = [
    "SIGNALS",
    "JudgedMatch",
    "add_search_command",
    "format_results",
    "match_judged",
    "parse_signals",
    "sugar_spec",
]


#: Signal names ``--signals`` accepts, in the order the help lists them.
SIGNALS: tuple[str, ...] = ("text", "vector", "graph", "pagerank", "recency")

_TITLE_WIDTH = 60

#: Queries a batch search hands to ``Index.search_many`` at once (the progress bar moves per slice).
_BATCH_SLICE = 256

_KEY_WIDTH = 32


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


def _highlight_lines(hit: Hit) -> list[str]:
    """A hit's marked snippets, one indented line each (a field without one says why); none if not asked."""
    if hit.highlights is None:
        return []
    lines = []
    for name, found in hit.highlights.items():
        label = "" if len(hit.highlights) == 1 else f"{name}: "
        if not found.snippets:
            lines.append(f"{'':>6}{label}({found.reason})")
        lines.extend(f"{'':>6}{label}{' '.join(s.marked.split())}" for s in found.snippets)
    return lines


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
        lines.extend(_highlight_lines(hit))
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


# ---------------------------------------------------------------------- the ranking: one language

#: What each ``--signals`` name is in the spec language (``text`` is BM25).
_SPEC_NAMES = {
    "text": "bm25",
    "vector": "vector",
    "graph": "graph",
    "pagerank": "pagerank",
    "recency": "recency",
}

#: The sugar flags of ``search``, by ``args`` attribute, with their defaults: each compiles into
#: the ``--rank`` spec (:func:`sugar_spec`), so none may be given with ``--rank`` or ``--profile``.
_SUGAR: dict[str, object] = {
    "signals": "text",
    "fusion": "rrf",
    "weights": None,
    "rrf_k": 60.0,
    "norm": "minmax",
    "half_life": 365.0,
    "k1": 1.2,
    "b": 0.75,
    "seed_n": 5,
    "graph_depth": 3,
    "keep_seeds": False,
    "nprobe": DEFAULT_NPROBE,
    "exact_vectors": False,
}


@dataclass(frozen=True, slots=True)
class _Ranking:
    """The ranking a search runs: the arm built from ``spec``, the depth and filter to ask with."""

    spec: str
    arm: Arm
    depth: int | None
    filter: Filter | None
    reads_vectors: bool


def _number_text(value: float) -> str:
    return repr(float(value))


def _bm25_text(args: argparse.Namespace) -> str:
    if (args.k1, args.b) == (_SUGAR["k1"], _SUGAR["b"]):
        return "bm25"
    return f"bm25(k1={_number_text(args.k1)}, b={_number_text(args.b)})"


def _signal_text(name: str, args: argparse.Namespace) -> str:
    """The spec expression of ``--signals`` name ``name`` with the sugar flags' parameters."""
    if name == "text":
        return _bm25_text(args)
    if name == "vector":
        if args.exact_vectors:
            return "vector(exact=true)"
        return "vector" if args.nprobe == DEFAULT_NPROBE else f"vector(nprobe={args.nprobe})"
    if name == "recency":
        return f"recency(half_life={_number_text(args.half_life)})"
    keep = ", keep_seeds=true" if args.keep_seeds else ""
    if name == "graph":
        return f"graph(seed={_bm25_text(args)}, max_depth={args.graph_depth}, seed_n={args.seed_n}{keep})"
    return f"{_SPEC_NAMES[name]}(seed={_bm25_text(args)}, seed_n={args.seed_n}{keep})"


def sugar_spec(args: argparse.Namespace, names: Sequence[str], weights: Sequence[float] | None) -> str:
    """The ``--rank`` spec that ``--signals``, ``--fusion``, ``--weights`` and the signal flags stand for.

    The old flags are sugar: ``--signals text,vector --fusion rrf --rrf-k 60`` is
    ``rrf(bm25, vector, k=60.0)``, which the spec parser (:mod:`weftsearch.ranking.specs`)
    then builds, as it builds every ranking of eval, the server and profiles.
    One signal is not fused: its spec is the scorer alone.

    Raises:
        InvalidParameterError: weights missing for ``weighted``, given for
            ``rrf``, or not one per signal.

    """
    if weights is not None and len(weights) != len(names):
        raise InvalidParameterError(
            f"--weights has {len(weights)} value(s) but {len(names)} signal(s) are searched; give one each"
        )
    if args.fusion == "rrf" and weights is not None:
        raise InvalidParameterError("--weights needs --fusion weighted (or score); rrf weighs all alike")
    if args.fusion == "weighted" and weights is None:
        raise InvalidParameterError("--fusion weighted needs --weights, one per signal (e.g. 2,1)")
    scorers = ", ".join(_signal_text(name, args) for name in names)
    if len(names) == 1:
        expr = scorers
    else:
        shown = "" if weights is None else f", weights=[{', '.join(_number_text(w) for w in weights)}]"
        if args.fusion == "score":
            expr = f"score({scorers}{shown}, norm={args.norm})"
        else:
            expr = f"{args.fusion}({scorers}{shown}, k={_number_text(args.rrf_k)})"
    return expr if args.depth is None else f"{expr}@{args.depth}"


def _sugar(args: argparse.Namespace, has_vectors: bool, reason: str) -> str:
    """The spec of the sugar flags; drops ``vector`` with a warning when there is no query vector."""
    for flag, default in _SUGAR.items():
        if getattr(args, flag) is None:
            setattr(args, flag, default)
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
    return sugar_spec(args, names, weights)


def _scorer_names(expr: Expr) -> set[str]:
    """Every name called in ``expr`` (its scorers, their seeds, the fuser)."""
    found = {expr.name}
    for item in (*expr.args, *(value for _, value in expr.kwargs)):
        if isinstance(item, Expr):
            found |= _scorer_names(item)
        elif isinstance(item, str):
            found.add(item)
    return found


def _ranking(
    args: argparse.Namespace, index: Index | ShardedIndex, has_vectors: bool, reason: str
) -> _Ranking:
    """The ranking ``search`` runs: ``--rank SPEC``, ``--profile NAME``, or the sugar flags' spec.

    All three are built by :func:`weftsearch.ranking.build_arm`, the function the
    server and ``eval --save-profile`` build with. ``--filter`` replaces a
    profile's default filter; ``--depth`` replaces a profile's depth (as a
    request's ``depth`` does on the server) and must agree with a spec's ``@DEPTH``.
    """
    given = [f"--{flag.replace('_', '-')}" for flag in _SUGAR if getattr(args, flag) is not None]
    if args.rank is not None and args.profile is not None:
        raise InvalidParameterError("give --rank SPEC or --profile NAME, not both")
    chosen = "--rank" if args.rank is not None else "--profile" if args.profile is not None else None
    if chosen is not None and given:
        raise InvalidParameterError(
            f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} sugar for a --rank spec; "
            f"give {'it' if len(given) == 1 else 'them'} or {chosen}, not both"
        )
    filter_ = args.filter
    if args.profile is not None:
        store = (
            ProfileStore.at(index.path, index.index_id)
            if isinstance(index, ShardedIndex)
            else ProfileStore(args.index)
        )
        profile = store.get(args.profile)
        spec = profile.spec
        depth: int | None = profile.depth if args.depth is None else args.depth
        arm = build_arm(spec, depth, profile.filter, name=profile.name)
        if filter_ is None and profile.filter is not None:
            filter_ = parse_filter(profile.filter)
        # A saved spec may carry its depth already (eval --save-profile writes EXPR@DEPTH).
        written = spec if parse_arm(f"{profile.name}={spec}").depth is not None else f"{spec}@{depth}"
        shown = f"profile {profile.name} v{profile.version}: {written}"
    else:
        spec = args.rank if args.rank is not None else _sugar(args, has_vectors, reason)
        arm = build_arm(spec, args.depth)
        depth = args.depth if args.depth is not None else parse_arm(f"{arm.name}={spec}").depth
        shown = spec
    reads_vectors = "vector" in _scorer_names(parse_arm(f"{arm.name}={spec}").expr)
    if reads_vectors and not has_vectors and chosen is not None:
        raise InvalidParameterError(
            f"{chosen}: the ranking {spec!r} has a vector scorer, which needs {reason}"
        )
    return _Ranking(shown, arm, depth, filter_, reads_vectors)


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
    if args.offset or args.after is not None:
        raise InvalidParameterError("--offset and --after page one QUERY, not a --queries batch")
    if args.highlight:
        raise InvalidParameterError("--highlight is for one QUERY, not a batch (--queries)")
    if args.facets is not None and not (args.json and args.run_out is None):
        # A TREC run line has no place for counts; JSON lines carry each query's facets.
        raise InvalidParameterError("--facets with --queries needs --json (a TREC run holds no counts)")
    return _search_batch(args)


def _search_one(args: argparse.Namespace) -> int:
    vector: NDArray[np.float32] | None = None
    if args.query_vector is not None:
        vector = load_query_vector(args.query_vector)
    index = _open_readonly(args.index)
    # An index made with an embedder embeds the query's text itself (Index.search) when the
    # ranking needs a vector: no --query-vector file is needed.
    embeds = _embedder_of(index) is not None and bool(args.query.strip())
    ranking = _ranking(args, index, vector is not None or embeds, "a query vector (--query-vector FILE.npy)")
    if vector is not None and not ranking.reads_vectors:
        _warn("--query-vector is ignored: the ranking has no vector scorer")
    if ranking.reads_vectors and _vector_dim(index) is None:
        _warn(f"the index at {args.index} holds no vectors; the vector signal will be empty")
    if args.syntax == "lucene":
        query = Query.parse(args.query, vector=vector, filter=ranking.filter)
    else:
        query = Query(text=args.query, vector=vector, filter=ranking.filter)
    options = None
    if args.highlight_field and not args.highlight:
        raise InvalidParameterError("--highlight-field is for --highlight: add --highlight")
    if args.highlight:
        fields = tuple(args.highlight_field) if args.highlight_field else ("text",)
        options = HighlightOptions(fields=fields, fragment_size=args.fragment_size)
    arm = ranking.arm
    pages = {"depth": ranking.depth, "offset": args.offset, "after": args.after}
    results: SearchResults = index.search(
        query,
        args.k,
        arm.fuser,
        *arm.scorers,
        **pages,
        facets=args.facets,
        facet_k=args.facet_k,
        highlight=options,
    )
    source = _vector_source(args, index, ranking, vector is not None, embeds)
    explained = _explanations(args, index, query, results, ranking)
    if args.json:
        page = {"offset": results.offset, "next_cursor": results.next_cursor}
        answer = {
            "query": args.query,
            "k": args.k,
            "rank": ranking.spec,
            **results.to_dict(),
            **page,
            "query_vector": source,
        }
        for row, explanation in zip(answer["hits"], explained or [], strict=False):
            row["explanation"] = explanation.to_dict()
        print(_json_dump(answer))
        return 0
    fusion = repr(ranking.arm.fuser) if len(ranking.arm.scorers) > 1 else "none (one signal: its own scores)"
    print(
        f"query {args.query!r}: {len(results)} hit(s); rank {ranking.spec}; "
        f"signals {', '.join(results.signals)}; fusion {fusion}"
    )
    if source is not None:
        print(f"query vector: {_describe_source(source)}")
    sys.stdout.write(
        format_results(results, index if isinstance(index, Index) else None, explain=args.explain)
    )
    for hit, explanation in zip(results, explained or [], strict=False):
        print(f"why {hit.key!r}:")
        print("\n".join(explanation.lines()))
    if results.facets is not None:
        sys.stdout.write(format_facets(results.facets))
    if results.next_cursor is not None:
        print(f"next page: --after {results.next_cursor}")
    return 0


def _explanations(
    args: argparse.Namespace,
    index: Index | ShardedIndex,
    query: Query,
    results: SearchResults,
    ranking: _Ranking,
) -> list[Explanation] | None:
    """Each hit's :meth:`Index.explain_many` tree when ``--explain-terms`` asks (``None``: not asked).

    A sharded index explains at the cut its search read (``snapshot=results``),
    with the tree one index of the same documents gives.
    """
    if not args.explain_terms:
        return None
    arm = ranking.arm
    # The search's own depth, so each stream's part is the one the search gave.
    if isinstance(index, ShardedIndex):
        assert isinstance(results, ShardedResults)  # what a sharded index's search returns
        return index.explain_many(
            query, results.keys, arm.fuser, *arm.scorers, depth=results.depth, snapshot=results
        )
    return index.explain_many(query, results.keys, arm.fuser, *arm.scorers, depth=results.depth)


def _vector_source(
    args: argparse.Namespace, index: Index | ShardedIndex, ranking: _Ranking, given: bool, embeds: bool
) -> dict[str, str] | None:
    """Where one query's vector came from, for the output (``None``: the ranking reads no vector).

    ``{"source": "file", "path": ...}`` (``--query-vector``, which wins over an
    embedder) or ``{"source": "embedder", "name": ...}`` (the index's embedder
    embedded the query text).
    """
    if not ranking.reads_vectors:
        return None
    if given:
        return {"source": "file", "path": str(args.query_vector)}
    embedder = _embedder_of(index)
    # Neither: the ranking was refused or its vector signal dropped (_ranking) before this.
    return {"source": "embedder", "name": embedder.name} if embeds and embedder is not None else None


def _describe_source(source: Mapping[str, str]) -> str:
    """The text line of :func:`_vector_source`'s answer."""
    if source["source"] == "file":
        return f"from --query-vector {source['path']}"
    return f"the query text embedded by the index's embedder {source['name']}"


def _tree_of(named: NamedQuery, syntax: str) -> Node | None:
    """A batch query's parsed tree with ``--syntax lucene`` (a syntax error names the query's id)."""
    if syntax != "lucene":
        return None
    try:
        return parse_query(named.query.text)
    except QuerySyntaxError as exc:
        raise QuerySyntaxError(f"query {named.qid!r}: {exc.reason}", exc.position, exc.query) from None


def format_facets(facets: Facets) -> str:
    """Facet counts as text: one line per field, ``value (count)`` in order."""
    lines = ["facets (over every document the filter matches):"]
    for name, pairs in facets.items():
        shown = ", ".join(f"{json.dumps(value, ensure_ascii=False)} ({count})" for value, count in pairs)
        lines.append(f"  {name}: {shown or '(no values)'}")
    return "\n".join(lines) + "\n"


def _facet_fields(text: str) -> list[str]:
    """``--facets tags,year``: the comma-separated field names (no empty one)."""
    names = [name.strip() for name in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"--facets takes field names separated by commas, got {text!r}")
    return names


def _embedder_of(index: Index | ShardedIndex) -> Embedder | None:
    """The embedder the index (single or sharded) was made with, or ``None``."""
    return index.embedder


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
    if args.syntax == "lucene":  # every query parsed before the first is searched
        queries = [
            NamedQuery(n.qid, dataclasses.replace(n.query, tree=_tree_of(n, args.syntax))) for n in queries
        ]
    index = _open_readonly(args.index)
    embeds = _embedder_of(index) is not None  # it embeds each query's text (Index.search_many)
    try:
        ranking = _ranking(
            args, index, query_vectors is not None or embeds, "query vectors (--query-vectors FILE.npy)"
        )
    except BaseException:
        index.close()
        raise
    if ranking.reads_vectors:
        lacking = sum(
            1 for named in queries if named.query.vector is None and not (embeds and named.query.text.strip())
        )
        if lacking:
            _warn(f"{lacking} of {len(queries)} queries have no vector; their vector signal is empty")
    fuser, scorers, depth = ranking.arm.fuser, ranking.arm.scorers, ranking.depth
    if isinstance(index, ShardedIndex) and args.threads is not None:
        index.close()
        raise InvalidParameterError(
            f"--threads is for a single index; {args.index} is a sharded index (its shards answer each batch)"
        )
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
            asked = [dataclasses.replace(named.query, filter=ranking.filter) for named in batch]
            faceted = {"facets": args.facets, "facet_k": args.facet_k}
            many: Sequence[SearchResults] = (
                index.search_many(asked, args.k, fuser, *scorers, depth=depth, **faceted)
                if isinstance(index, ShardedIndex)
                else index.search_many(
                    asked, args.k, fuser, *scorers, depth=depth, threads=args.threads, **faceted
                )
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
            f"(rank {ranking.spec}; tag {args.run_tag}) in {elapsed:.2f} s",
            file=sys.stderr,
        )
    return status


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


def _fragment_size(text: str) -> int:
    size = positive_int(text)
    if size > MAX_FRAGMENT_SIZE:
        raise argparse.ArgumentTypeError(f"at most {MAX_FRAGMENT_SIZE}, got {size}")
    return size


def _weights(text: str) -> list[float]:
    return [non_negative_float(part.strip()) for part in text.split(",")]


def _run_tag(text: str) -> str:
    if not text or any(ch.isspace() for ch in text):
        raise argparse.ArgumentTypeError(f"a run tag must be non-empty without spaces, got {text!r}")
    return text


def add_search_command(commands: Any) -> None:
    """Add ``search`` to the subcommands of a ``weft-search`` parser."""
    search = commands.add_parser(
        "search",
        help="search an index (one query, or a batch into a TREC run)",
        description=(
            "Search an index with one QUERY, or a batch of --queries. A batch writes a TREC run "
            "(qid Q0 docid rank score tag) to --run-out, or to stdout (JSON lines with --json). "
            "The ranking is --rank SPEC (the spec language of eval, serve and profiles, e.g. "
            "'rrf(bm25, vector, k=60)@100'), --profile NAME (a profile stored in the index: "
            "eval --save-profile, the server's POST /v1/profiles), or the sugar flags --signals, "
            "--fusion, --weights, ..., which compile to a spec (default: bm25). "
            "One scorer is not fused: its hits carry the scorer's own scores. Exit status: 0 on "
            "success, 1 when --qrels judges query ids that match no query (the matched ones are "
            "run; --allow-unmatched makes this 0), 2 on a user error."
        ),
    )
    search.add_argument("query", metavar="QUERY", nargs="?", help="the query text")
    search.add_argument("--index", required=True, metavar="DIR", help="index directory")
    search.add_argument("-k", type=_count, default=10, help="hits per query (10)")
    search.add_argument(
        "--offset",
        type=int_at_least(0),
        default=0,
        metavar="N",
        help="skip the first N hits (one QUERY): hits N+1 .. N+k of the search with k = N + k",
    )
    search.add_argument(
        "--after",
        metavar="CURSOR",
        help="the page after the one that printed 'next page: --after CURSOR' (same query and ranking, "
        "same commit of the index)",
    )
    search.add_argument(
        "--rank",
        metavar="SPEC",
        help="the ranking, in the spec language of eval and serve: EXPR[@DEPTH], e.g. "
        "'rrf(bm25, vector, k=60)@100' (scorers bm25, vector, graph, pagerank, recency, propagate)",
    )
    search.add_argument(
        "--profile",
        metavar="NAME",
        help="run the newest version of the ranking profile NAME stored in the index",
    )
    _add_ranking_sugar(search)
    search.add_argument(
        "--filter",
        type=_filter,
        metavar="EXPR",
        help="only documents matching EXPR, applied inside every signal before its top k: "
        "e.g. \"year >= 1990 and source in ('pubmed', 'arxiv') and not exists(retracted)\" "
        "(grammar: docs/ARCHITECTURE.md, 'Filters')",
    )
    search.add_argument(
        "--syntax",
        choices=("plain", "lucene"),
        default="plain",
        help="how query texts are read: plain (a bag of words, the default) or lucene (+must -not "
        "\"phrase\"~N field:term term^2 prefix* AND OR NOT (...); docs/ARCHITECTURE.md, 'Query language')",
    )
    search.add_argument(
        "--facets",
        type=_facet_fields,
        metavar="FIELDS",
        help="also count the values of these fields (comma-separated: tags,year) over every document "
        "the filter matches: keyword, boolean, number and list fields",
    )
    search.add_argument(
        "--facet-k",
        type=positive_int,
        default=10,
        metavar="N",
        help="values shown per facet field, most frequent first (10; at most 10,000)",
    )
    search.add_argument("--explain", action="store_true", help="show each signal's rank, score, share")
    search.add_argument(
        "--explain-terms",
        action="store_true",
        help="print each hit's score broken into streams, query terms and fields (idf, tf, lengths), "
        "as Elasticsearch's _explain (one index or a sharded one)",
    )
    search.add_argument(
        "--highlight",
        action="store_true",
        help="show each hit's best snippets with the query's terms marked <em>...</em> "
        "(in --json: each hit's 'highlights')",
    )
    search.add_argument(
        "--highlight-field",
        action="append",
        metavar="NAME",
        help="with --highlight: a text field to highlight (repeat for several; 'text' by default)",
    )
    search.add_argument(
        "--fragment-size",
        type=_fragment_size,
        default=150,
        metavar="N",
        help="with --highlight: characters per snippet (150)",
    )
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


def _add_ranking_sugar(search: Any) -> None:
    """The flags that compile to a ranking spec (--signals, --fusion, ...) and --depth."""
    sugar = search.add_argument_group(
        "ranking sugar",
        "shorthand that compiles to a --rank spec (--signals text,vector is rrf(bm25, vector))",
    )
    sugar.add_argument(
        "--signals", default=None, help=f"comma-separated signals from {', '.join(SIGNALS)} (text = bm25)"
    )
    sugar.add_argument("--fusion", choices=FUSION_METHODS, default=None, help="fusion method (rrf)")
    sugar.add_argument(
        "--weights", type=_weights, metavar="W,W", help="one weight per signal (weighted, score)"
    )
    sugar.add_argument("--rrf-k", type=non_negative_float, default=None, help="RRF constant (60)")
    sugar.add_argument(
        "--norm", choices=("minmax", "zscore"), default=None, help="score fusion norm (minmax)"
    )
    search.add_argument(
        "--depth",
        type=_count,
        help="candidates per signal (default: a --rank spec's @DEPTH or a profile's depth; "
        "else max(k, 100), k with one signal)",
    )
    sugar.add_argument(
        "--half-life",
        type=positive_float,
        default=None,
        metavar="DAYS",
        help="recency half-life in days (365); the age at which the recency score halves",
    )
    sugar.add_argument("--k1", type=non_negative_float, default=None, help="BM25 k1 (1.2)")
    sugar.add_argument("--b", type=non_negative_float, default=None, help="BM25 b (0.75)")
    sugar.add_argument(
        "--seed-n", type=positive_int, default=None, help="BM25 hits seeding graph signals (5)"
    )
    sugar.add_argument("--graph-depth", type=positive_int, default=None, help="hops for the graph signal (3)")
    sugar.add_argument(
        "--keep-seeds",
        action="store_const",
        const=True,
        default=None,
        help="keep the BM25 seeds in the graph/pagerank streams",
    )
    sugar.add_argument(
        "--nprobe",
        type=positive_int,
        default=None,
        help=f"IVF lists the vector signal reads ({DEFAULT_NPROBE})",
    )
    sugar.add_argument(
        "--exact-vectors",
        action="store_const",
        const=True,
        default=None,
        help="scan every vector (no IVF lists)",
    )
