"""The API's exception handlers: every error answered in one shape, with the API key blotted out."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from weftsearch.errors import WeftError
from weftsearch.server.errors import BRANCHES, ApiError, error_body, status_of
from weftsearch.server.state import ServerState

__all__ = ["install_handlers"]


def _state(request: Request) -> ServerState:
    state: ServerState = request.app.state.weft
    return state


async def api_error(request: Request, exc: ApiError) -> JSONResponse:
    """An :class:`ApiError` as raised."""
    message = _state(request).unkeyed(exc.message)
    return JSONResponse(error_body(exc.kind, message, exc.field, exc.position), status_code=exc.status)


async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    """Routing's own answers (404 no such route, 405 wrong method) in the API's error shape."""
    kind = {404: "NotFound", 405: "MethodNotAllowed"}.get(exc.status_code, "HTTPError")
    return JSONResponse(
        error_body(kind, _state(request).unkeyed(str(exc.detail)), None),
        status_code=exc.status_code,
        headers=exc.headers,
    )


async def weft_error(request: Request, exc: WeftError) -> JSONResponse:
    """A library error that no route turned into an :class:`ApiError`: its type and status."""
    return JSONResponse(
        error_body(type(exc).__name__, _state(request).unkeyed(str(exc)), None), status_code=status_of(exc)
    )


async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
    """A request that does not validate: 422 naming the first field, and every problem."""
    unkeyed = _state(request).unkeyed
    problems = []
    for error in exc.errors():
        location = [str(part) for part in error.get("loc", ()) if part != "body" and part not in BRANCHES]
        problems.append(
            {"field": unkeyed(".".join(location)) or None, "message": unkeyed(str(error.get("msg", "")))}
        )
    first = problems[0] if problems else {"field": None, "message": "invalid request"}
    body = error_body("ValidationError", f"{first['field']}: {first['message']}", first["field"])
    body["error"]["problems"] = problems
    return JSONResponse(body, status_code=422)


def install_handlers(app: FastAPI) -> None:
    """Answer every error of ``app`` in the API's shape."""
    app.add_exception_handler(ApiError, api_error)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, http_error)  # type: ignore[arg-type]
    app.add_exception_handler(WeftError, weft_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, invalid)  # type: ignore[arg-type]
