"""The API's error answers: :class:`ApiError`, the status of each library error, the documented errors."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pydantic import BaseModel

from weftsearch.errors import (
    CursorExpiredError,
    IndexClosedError,
    IndexLockedError,
    IndexStorageError,
    InvalidCursorError,
    InvalidFilterError,
    InvalidVectorError,
    QuerySyntaxError,
    ShardUnavailableError,
    UnknownKeyError,
    UnknownMeasureError,
    WeftError,
)
from weftsearch.server.models import ErrorResponse


class ApiError(Exception):
    """An error answered as ``{"error": {"type", "field", "message"}}`` with ``status``."""

    def __init__(
        self, status: int, kind: str, message: str, field: str | None = None, position: int | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind
        self.message = message
        self.field = field
        self.position = position


def error_body(kind: str, message: str, field: str | None, position: int | None = None) -> dict[str, Any]:
    """The JSON body of an error answer (``position``: a query syntax error's character position)."""
    error: dict[str, Any] = {"type": kind, "field": field, "message": message}
    if position is not None:
        error["position"] = position
    return {"error": error}


def status_of(exc: WeftError) -> int:
    """The HTTP status a library error is answered with."""
    if isinstance(exc, UnknownKeyError):
        return 404
    if isinstance(exc, CursorExpiredError):
        return 410  # the page's snapshot is gone for good: start again from the first page
    if isinstance(exc, IndexLockedError):
        return 409
    if isinstance(exc, (IndexClosedError, ShardUnavailableError)):
        return 503  # the server cannot answer now (closed, or a shard is down), the request is fine
    if isinstance(exc, IndexStorageError):
        return 500  # the server's files (damaged, unreadable), not the request, are at fault
    # Everything else the library raises deliberately is about its input: a bad filter, query,
    # vector, document, spec, measure or parameter.
    return 400


def field_of(exc: WeftError, default: str | None) -> str | None:
    """The request field a library error is about, where its type says it."""
    prefix = "" if default is None or "." not in default else default.rsplit(".", 1)[0] + "."
    if isinstance(exc, InvalidFilterError):
        return prefix + "filter"
    if isinstance(exc, InvalidVectorError):
        return prefix + "vector"
    if isinstance(exc, UnknownMeasureError):
        return prefix + "measures"
    if isinstance(exc, InvalidCursorError):
        return prefix + "after"
    return default


@contextmanager
def about_field(name: str | None) -> Iterator[None]:
    """Turn a library error raised inside into an :class:`ApiError` naming request field ``name``."""
    try:
        yield
    except ApiError:
        raise
    except WeftError as exc:
        position = exc.position if isinstance(exc, QuerySyntaxError) else None
        raise ApiError(status_of(exc), type(exc).__name__, str(exc), field_of(exc, name), position) from None


#: The error answers every API route may give (documented in the schema).
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": description}
    for status, description in (
        (400, "a bad value (filter, spec, a vector of another width or model, ...)"),
        (401, "no API key where one is needed"),
        (403, "a wrong API key"),
        (404, "no such document or profile"),
        (409, "the index is read-only here, or locked"),
        (410, "a page cursor (after) names a snapshot the index no longer keeps: search from the first page"),
        (413, "the request body is over the limit"),
        (422, "the request does not validate, or is over a limit; error.field names the field"),
        (503, "the index is unavailable: closed, a shard down, or its directory deleted or replaced"),
    )
}

#: Names pydantic puts in an error's location for the branch of a union it tried: not fields.
BRANCHES = frozenset(
    {"str", "int", "float", "bool", "list[float]", "ProfileRef", "QueryIn", "RankingIn", "DocumentIn"}
)


def answers(model: type[BaseModel], *, errors: bool = True) -> dict[str, Any]:
    """A route's response model and documented error answers.

    The handlers return dicts; FastAPI validates each against ``model`` and
    drops nothing (the models keep undeclared keys, and keys a dict does not
    have are not added: ``response_model_exclude_unset``).
    """
    return {
        "response_model": model,
        "response_model_exclude_unset": True,
        "responses": dict(ERRORS) if errors else {},
    }
