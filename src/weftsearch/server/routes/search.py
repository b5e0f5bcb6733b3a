"""``/v1/search`` and ``/v1/search/batch``: :meth:`Index.search` and :meth:`Index.search_many` over HTTP."""

from __future__ import annotations

import math
from typing import Any, cast

from fastapi import APIRouter

from weftsearch.engine.facets import facets_to_json
from weftsearch.engine.index import Index
from weftsearch.engine.search import SearchResults
from weftsearch.highlight import HighlightOptions
from weftsearch.server.errors import ApiError, about_field, answers
from weftsearch.server.models import (
    BatchSearchRequest,
    BatchSearchResponse,
    HighlightIn,
    SearchRequest,
    SearchResponse,
)
from weftsearch.server.sharded import SupportsShardedServing
from weftsearch.server.state import Ranking, Served

__all__ = ["router"]

router = APIRouter()


def highlight_options(body: HighlightIn | None) -> HighlightOptions | None:
    """The :class:`HighlightOptions` a request's ``highlight`` asks for (``None``: none asked).

    Raises:
        ApiError: 400 naming ``highlight.fields`` for per-field options (not supported).

    """
    if body is None:
        return None
    if isinstance(body.fields, dict):
        for name, options in body.fields.items():
            if options:
                raise ApiError(
                    400,
                    "InvalidParameterError",
                    f"per-field highlight options are not supported (field {name!r}: {sorted(options)}); "
                    "give fragment_size, number_of_fragments, pre_tags, post_tags at the highlight level",
                    "highlight.fields",
                )
    with about_field("highlight"):
        return HighlightOptions(
            fields=tuple(body.fields),
            fragment_size=body.fragment_size,
            number_of_fragments=body.number_of_fragments,
            pre_tag=body.pre_tags[0],
            post_tag=body.post_tags[0],
            escape_html=body.encoder == "html",
        )


def hits_of(results: SearchResults, explain: bool) -> list[dict[str, Any]]:
    """The hits of ``results`` as JSON rows; with ``explain`` their signals, a non-finite score as null.

    A hit with highlights also gets ``highlight``: each field's marked snippets (Elasticsearch's form).
    """
    out = []
    for hit in results:
        row = hit.to_dict()
        if "highlights" in row:
            row["highlight"] = {
                name: [snippet["marked"] for snippet in found["snippets"]]
                for name, found in row["highlights"].items()
            }
        if not explain:
            del row["signals"]
        else:
            for signal in row["signals"]:
                if signal["score"] is not None and not math.isfinite(signal["score"]):
                    signal["score"] = None
        out.append(row)
    return out


def search_body(
    results: SearchResults, ranking: Ranking, explain: bool, source: dict[str, Any]
) -> dict[str, Any]:
    """The answer to one query."""
    return {
        "query_vector": source,
        "generation": results.generation,
        "ranking": ranking.label,
        "fuser": results.fuser,
        "signals": list(results.signals),
        "depth": results.depth,
        "cut_short": list(results.cut_short),
        **({"plans": results.plans} if explain else {}),
        "hits": hits_of(results, explain),
        **({} if results.facets is None else {"facets": facets_to_json(results.facets)}),
    }


@router.post(
    "/v1/search",
    tags=["search"],
    summary="Search with a profile, a spec or the default ranking",
    **answers(SearchResponse),
)
def search(body: SearchRequest, state: Served) -> dict[str, Any]:
    state.check_k(body.k)
    if body.offset + body.k > state.limits.max_k:
        error = state.too_large("offset + k", body.offset + body.k, state.limits.max_k, "max_k")
        raise ApiError(error.status, error.kind, error.message, "offset")
    # Hits are explained on the state they were found in (an index's snapshot, a sharded index's
    # cut), on offset pages: a cursor names a state the explanation would not read.
    if body.explain_terms and body.after is not None:
        raise ApiError(
            400,
            "InvalidParameterError",
            "explain_terms explains the hits of offset pages "
            "(not a cursor page: give offset instead of after)",
            "explain_terms",
        )
    highlight = highlight_options(body.highlight)
    ranking = state.ranking(body)
    state.adopt_commits()
    (query,), (source,) = state.queries([(body, "")], ranking)
    snapshot = state.index.snapshot() if body.explain_terms and isinstance(state.index, Index) else None
    try:
        with about_field("highlight" if highlight is not None else None):
            (results,) = state.run_search(
                ranking,
                [query],
                body.k,
                body.offset,
                body.after,
                facets=body.facets,
                facet_k=body.facet_k,
                highlight=highlight,
                snapshot=snapshot,
            )
    except ApiError as exc:
        if body.facets is not None and "to facet on" in exc.message:
            exc.field = "facets"  # an unknown facet field, not a filter's (same error type)
        raise
    answer = search_body(results, ranking, body.explain, source)
    if body.explain_terms and len(results):
        # One more search of the same snapshot (or cut: the results name it) explains the page's hits.
        index = state.index
        arm = ranking.arm
        with about_field("explain"):
            if isinstance(index, Index):
                explained = index.explain_many(
                    query, results.keys, arm.fuser, *arm.scorers, depth=results.depth, snapshot=snapshot
                )
            else:
                # create_app took it through check_sharded: a SupportsShardedServing.
                sharded = cast(SupportsShardedServing, index)
                explained = sharded.explain_many(
                    query, results.keys, arm.fuser, *arm.scorers, depth=results.depth, snapshot=results
                )
        for row, explanation in zip(answer["hits"], explained, strict=True):
            row["explanation"] = explanation.to_dict()
    return {
        **answer,
        "offset": results.offset,
        "next_cursor": results.next_cursor,
    }


@router.post(
    "/v1/search/batch",
    tags=["search"],
    summary="Many queries on one snapshot (Index.search_many)",
    **answers(BatchSearchResponse),
)
def search_batch(body: BatchSearchRequest, state: Served) -> dict[str, Any]:
    state.check_k(body.k)
    state.check_batch(len(body.queries), "queries")
    ranking = state.ranking(body)
    state.adopt_commits()
    queries, sources = state.queries([(q, f"queries.{i}.") for i, q in enumerate(body.queries)], ranking)
    try:
        with about_field("queries"):
            results = state.index.search_many(
                queries,
                body.k,
                ranking.arm.fuser,
                *ranking.arm.scorers,
                depth=max(ranking.arm.depth, body.k),
                threads=state.limits.search_threads,
                facets=body.facets,
                facet_k=body.facet_k,
            )
    except ApiError as exc:
        if body.facets is not None and "to facet on" in exc.message:
            exc.field = "facets"  # an unknown facet field, not a filter's (same error type)
        raise
    return {
        "results": [
            search_body(r, ranking, body.explain, source) for r, source in zip(results, sources, strict=True)
        ]
    }
