"""``/v1/documents`` and ``/v1/commit``: reading, upserting and deleting documents, and committing."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from weftsearch.documents import Document
from weftsearch.engine.index import Index
from weftsearch.schema import Schema
from weftsearch.server.errors import ApiError, about_field, answers
from weftsearch.server.models import (
    CommitResponse,
    DeleteResponse,
    DocumentIn,
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
        "text_fields": dict(getattr(document, "text_fields", None) or {}),
    }


def served_schema(index: object) -> Schema:
    """The text fields of the served index: its schema, or the default one (``text`` only).

    ``Index.schema``, or ``ShardedIndex.schema`` (every shard's); an index
    without one holds only the default field.
    """
    schema = getattr(index, "schema", None)
    return schema if isinstance(schema, Schema) else Schema.default()


def check_text_fields(doc: DocumentIn, position: int, schema: Schema) -> None:
    """Every name in ``doc.text_fields`` (well formed: a :class:`Document` was made of it) is ``schema``'s.

    Checked here, for the whole batch before anything is written, so the
    answer names the request field (``documents.N.text_fields.NAME``) and a
    sharded index never writes part of a batch it then refuses.

    Raises:
        ApiError: 400 ``InvalidDocumentError`` naming the field and the known ones.

    """
    known = {field.name for field in schema.named_fields}
    for name in doc.text_fields:
        if name not in known:
            listed = ", ".join(field.name for field in schema.named_fields) or "none besides 'text'"
            raise ApiError(
                400,
                "InvalidDocumentError",
                f"document {doc.key!r}: text field {name!r} is not in the index's schema "
                f"(its named text fields: {listed})",
                f"documents.{position}.text_fields.{name}",
            )


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
    schema = served_schema(state.index)
    for i, doc in enumerate(body.documents):
        if doc.vector is not None and len(doc.vector) > limits.max_vector_dim:
            raise state.too_large(
                f"documents.{i}.vector", len(doc.vector), limits.max_vector_dim, "max_vector_dim"
            )
        with about_field(f"documents.{i}.text_fields" if doc.text_fields else f"documents.{i}"):
            made.append(
                Document(
                    key=doc.key,
                    text=doc.text,
                    vector=vector_of(doc.vector),
                    links=tuple(doc.links),
                    time=doc.time,
                    fields=dict(doc.fields),
                    text_fields=dict(doc.text_fields),
                )
            )
        check_text_fields(doc, i, schema)
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
