"""What happens around every request: the body limit, the API key, forwarding writes, metrics, logs.

The key check, the writer forwarding (``serve --workers N``'s readers) and the
request metrics and log line are one HTTP middleware (:func:`guard`); the body
limit is an ASGI middleware (:class:`BodyLimit`) in front of it, so an
oversized body is refused before it is read whole.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.routing import BaseRoute

from weftsearch.server.errors import error_body
from weftsearch.server.state import ServerState

__all__ = ["API_KEY_HEADER", "PAGE_FILES", "BodyLimit", "guard"]

LOG = logging.getLogger("weftsearch.server")

#: The header that carries the API key (``Authorization: Bearer KEY`` works too).
API_KEY_HEADER = "X-API-Key"


class BodyLimit:
    """ASGI middleware: answer 413 once a request body exceeds ``limit`` bytes (declared or streamed)."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        """Pass the request on with its body read whole, or refuse it."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = -1
                if declared > self.limit or declared < 0:
                    await self._refuse(send, declared)
                    return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await self._refuse(send, size)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)
        sent = False

        async def replay() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            following: dict[str, Any] = await receive()  # e.g. http.disconnect
            return following

        await self.app(scope, replay, send)

    async def _refuse(self, send: Any, size: int) -> None:
        message = (
            f"the request body is over this server's limit of {self.limit} bytes "
            "(weft-search serve --max-body-bytes)"
        )
        if size < 0:
            message = "the request's Content-Length is not a number"
        payload = json.dumps(error_body("PayloadTooLarge", message, None)).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413 if size >= 0 else 400,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(payload)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": payload})


def offered_key(request: Request) -> str | None:
    offered = request.headers.get(API_KEY_HEADER)
    if offered is None:
        authorization = request.headers.get("authorization", "")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() == "bearer" and token:
            offered = token.strip()
    return offered


def key_matches(offered: str, expected: bytes) -> bool:
    """Constant-time comparison of the SHA-256 digests (so not even the key's length shows in the time)."""
    digest = hashlib.sha256(offered.encode("utf-8", "surrogateescape")).digest()
    return hmac.compare_digest(digest, hashlib.sha256(expected).digest())


WRITE_PATHS = re.compile(r"^/v1/(documents|commit|profiles)(/|$)")


def is_write(method: str, path: str) -> bool:
    return method in ("POST", "PUT", "PATCH", "DELETE") and WRITE_PATHS.match(path) is not None


#: The explorer page's files (``static/``), by URL path: served to anyone, since they hold no
#: data; the page asks for the key itself when the API answers 401.
PAGE_FILES = {
    "/": ("explorer.html", "text/html; charset=utf-8"),
    "/explorer/explorer.js": ("explorer.js", "text/javascript; charset=utf-8"),
    "/explorer/explorer.css": ("explorer.css", "text/css; charset=utf-8"),
}


def needs_key(method: str, path: str, reads_too: bool) -> bool:
    if path == "/health" or (method in ("GET", "HEAD") and path in PAGE_FILES):
        return False
    if is_write(method, path):
        return True
    return reads_too and path != "/openapi.json"


def _routes(routes: Sequence[BaseRoute]) -> Iterator[BaseRoute]:
    """Every route of ``routes``, those of an included router in its place.

    FastAPI from 0.165 keeps an included router as one entry (``original_router``
    holds its routes); earlier versions copy its routes in.
    """
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            yield from _routes(included.routes)
        else:
            yield route


def endpoint_of(app: FastAPI, request: Request) -> str:
    """The route template a request reached (or would have, when refused before routing).

    Metrics label by template (``/v1/documents/{key}``), never by the raw path,
    so their number of series stays bounded.
    """
    route = request.scope.get("route")
    if route is None:
        from starlette.routing import Match

        for candidate in _routes(app.router.routes):
            if candidate.matches(request.scope)[0] == Match.FULL:
                route = candidate
                break
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else "unmatched"


async def forward_or_handle(
    state: ServerState, request: Request, call_next: Callable[[Request], Awaitable[Response]]
) -> Response:
    """503 while the index is unavailable; a write forwarded to the writer process; else the route."""
    if request.url.path.startswith("/v1/"):
        problem = state.unavailable()
        if problem is not None:
            return JSONResponse(error_body("IndexUnavailable", problem, None), status_code=503)
    writer_socket = state.writer_socket
    if writer_socket is None or not is_write(request.method, request.url.path):
        return await call_next(request)
    import httpx  # the multi-process server's readers only

    headers = {
        name: value
        for name, value in request.headers.items()
        if name.lower() in ("content-type", "authorization", API_KEY_HEADER.lower())
    }
    transport = httpx.AsyncHTTPTransport(uds=writer_socket)
    async with httpx.AsyncClient(transport=transport, base_url="http://writer", timeout=None) as client:
        answer = await client.request(
            request.method, request.url.path, content=await request.body(), headers=headers
        )
    return Response(
        answer.content, status_code=answer.status_code, media_type=answer.headers.get("content-type")
    )


async def guard(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
    """The key check, then :func:`forward_or_handle`; every answer counted, timed and logged."""
    state: ServerState = request.app.state.weft
    started = time.perf_counter()
    path = request.url.path
    response: Response
    expected = state.expected_key
    if expected is not None and needs_key(request.method, path, state.read_key_required):
        offered = offered_key(request)
        if offered is None:
            response = JSONResponse(
                error_body("Unauthorized", f"this request needs an API key ({API_KEY_HEADER} header)", None),
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
        elif not key_matches(offered, expected):
            response = JSONResponse(
                error_body("Forbidden", "the API key is not valid", None), status_code=403
            )
        else:
            response = await forward_or_handle(state, request, call_next)
    else:
        response = await forward_or_handle(state, request, call_next)
    endpoint = endpoint_of(request.app, request)
    seconds = time.perf_counter() - started
    state.metrics.observe(endpoint, request.method, response.status_code, seconds)
    # The log line names the route template, never headers or bodies (no key, no document).
    LOG.info("%s %s %d %.1f ms", request.method, endpoint, response.status_code, seconds * 1000)
    return response
