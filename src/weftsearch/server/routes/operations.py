"""``/v1/stats``, ``/health``, ``/metrics`` and the explorer page's files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import prometheus_client
from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

from weftsearch.engine.index import Index
from weftsearch.server.errors import ERRORS, answers
from weftsearch.server.middleware import PAGE_FILES
from weftsearch.server.models import HealthResponse, StatsResponse
from weftsearch.server.state import Served

__all__ = ["router"]

router = APIRouter()

#: Where the explorer page's files are.
STATIC = Path(__file__).resolve().parent.parent / "static"


@router.get(
    "/v1/stats",
    tags=["index"],
    summary="Index.stats(): documents, segments, generation, bytes",
    **answers(StatsResponse),
)
def stats(state: Served) -> dict[str, Any]:
    state.adopt_commits()
    s = state.index.stats()
    embedder = state.embedder
    return {
        "documents": s.documents,
        "pending": s.pending,
        "generation": s.generation,
        "analyzer": s.analyzer,
        "vector_dim": s.vector_dim,
        "vector_dtype": s.vector_dtype,
        "segments": [
            {"name": g.name, "documents": g.documents, "deleted": g.deleted, "bytes": g.bytes}
            for g in s.segments
        ],
        "bytes_on_disk": s.bytes_on_disk,
        "readonly": state.index.readonly,
        "query_model": None
        if embedder is None
        else {
            "model": embedder.model.name,
            "vectors": embedder.model.vectors,
            "dims": embedder.model.dims,
            "embeds_queries": embedder.problem is None,
            "problem": embedder.problem,
        },
    }


@router.get(
    "/health",
    tags=["index"],
    summary="Liveness: the index is open, and its directory is the one opened",
    response_model=HealthResponse,
    response_model_exclude_unset=True,
    responses={503: {"model": HealthResponse, "description": "the index directory deleted or replaced"}},
)
def health(state: Served) -> Any:
    problem = state.unavailable()
    if problem is not None:
        return JSONResponse({"status": "unavailable", "reason": problem}, status_code=503)
    return {"status": "ok" if not state.index.closed else "closed"}


@router.get(
    "/metrics",
    tags=["index"],
    summary="Prometheus text format: requests, latency, index generation (every process of the server)",
    response_class=Response,
    responses={
        200: {
            "description": "Prometheus text exposition format",
            "content": {prometheus_client.CONTENT_TYPE_LATEST: {"schema": {"type": "string"}}},
        },
        **{status: ERRORS[status] for status in (401, 403)},
    },
)
def metrics(state: Served) -> Response:
    index = state.index
    if state.unavailable() is None:  # not the old index's numbers once its directory went
        state.adopt_commits()
        if not index.closed:
            # The state searches read: an index's published snapshot, a sharded index's cut.
            state.metrics.generation.set(
                float(index.snapshot().generation if isinstance(index, Index) else index.generation)
            )
            state.metrics.documents.set(float(index.stats().documents))
    return Response(state.metrics.render(), media_type=prometheus_client.CONTENT_TYPE_LATEST)


def page_file(name: str, media_type: str) -> Callable[[], Response]:
    """The route serving the explorer's file ``name``."""

    def serve() -> Response:
        body = (STATIC / name).read_bytes()
        # Everything the page loads comes from this server (no CDN; it works offline).
        headers = {"Content-Security-Policy": "default-src 'self'", "X-Content-Type-Options": "nosniff"}
        return Response(body, media_type=media_type, headers=headers)

    return serve


# The explorer page: not part of the API's schema.
for page_path, (file_name, media_type) in PAGE_FILES.items():
    router.add_api_route(
        page_path, page_file(file_name, media_type), methods=["GET"], include_in_schema=False
    )
