"""``/v1/documents`` and ``/v1/commit``: reading, upserting and deleting documents, and committing."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from weftsearch.documents import Document
from weftsearch.engine.index import Index
from weftsearch.server.errors import ApiError, about_field, answers
from weftsearch.server.models import (
    CommitResponse,
    DeleteResponse,
    DocumentOut,
    UpsertRequest,
    UpsertResponse,
)
from weftsearch.server.state import Served, vector_of

__all__ = ["router"]

router = APIRouter()


def document_body(document: Document) -> dict[str, Any]:
    """A stored document as JSON."""
    return {
        "key": document.key,
        "text": document.text,
        "vector": None if document.vector is None else [float(x) for x in document.vector],
        "links": list(document.links),
        "time": document.timestamp,
        "fields": dict(document.fields),
    }


@router.get(
    "/v1/documents/{key:path}", tags=["documents"], summary="One stored document", **answers(DocumentOut)
)
def get_document(key: str, state: Served) -> dict[str, Any]:
    state.adopt_commits()
    with about_field("key"):
        return document_body(state.index.get(key))


@router.post(
    "/v1/documents",
    tags=["documents"],
    summary="Add or replace documents (upsert), all or nothing",
    **answers(UpsertResponse),
)
def upsert(body: UpsertRequest, state: Served) -> dict[str, Any]:
    state.check_writable()
    limits = state.limits
    if len(body.documents) > limits.max_documents:
        raise state.too_large("documents", len(body.documents), limits.max_documents, "max_documents")
    made = []
    for i, doc in enumerate(body.documents):
        if doc.vector is not None and len(doc.vector) > limits.max_vector_dim:
            raise state.too_large(
                f"documents.{i}.vector", len(doc.vector), limits.max_vector_dim, "max_vector_dim"
            )
        with about_field(f"documents.{i}"):
            made.append(
                Document(
                    key=doc.key,
                    text=doc.text,
                    vector=vector_of(doc.vector),
                    links=tuple(doc.links),
                    time=doc.time,
                    fields=dict(doc.fields),
                )
            )
    if isinstance(state.index, Index):
        with about_field("documents"):
            # Before the write lock: a slow model never holds up other writes or a commit.
            made = state.index.embed_documents(made, progress=False)
    with state.writes, about_field("documents"):
        state.index.add_many(made, progress=False)
        return {"upserted": len(made), **state.publish()}


@router.delete(
    "/v1/documents/{key:path}",
    tags=["documents"],
    summary="Delete a document by key",
    **answers(DeleteResponse),
)
def delete(key: str, state: Served) -> dict[str, Any]:
    state.check_writable()
    with state.writes, about_field("key"):
        if not state.index.delete(key):
            raise ApiError(404, "UnknownKeyError", f"no document with key {key!r}", "key")
        return {"deleted": key, **state.publish()}


@router.post(
    "/v1/commit",
    tags=["documents"],
    summary="Make every write so far durable",
    **answers(CommitResponse),
)
def commit(state: Served) -> dict[str, Any]:
    state.check_writable()
    with state.writes, about_field(None):
        committed = state.index.commit()
        state.index.refresh()
        return {"generation": committed}
