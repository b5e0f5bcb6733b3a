"""The HTTP side of a trial (:mod:`weftsearch.eval.trial`): one ``httpx`` client to a running server.

``httpx`` is in the ``server`` extra; it is imported when a client is made,
and its absence raises :class:`~weftsearch.errors.MissingDependencyError`
naming the extra. Proxies from the environment are ignored (``trust_env``
off): a trial measures the server, not a proxy in front of it. Tests pass an
``httpx.MockTransport`` as ``transport`` to forge responses.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from weftsearch.errors import InvalidParameterError, MissingDependencyError, ServerUnreachableError

__all__ = ["Answer", "SearchClient"]


@dataclass(frozen=True, slots=True)
class Answer:
    """One request's outcome.

    Attributes:
        status: the HTTP status, or 0 when no response came (connection refused, timeout).
        body: the JSON object answered, or ``None`` (no response, not JSON, not an object).
        seconds: from just before sending to the body read (``time.perf_counter``).
        error: why there is no usable body, or ``None``.

    """

    status: int
    body: dict[str, Any] | None
    seconds: float
    error: str | None = None


class SearchClient:
    """A thread-safe client of one server's ``/health`` and ``POST /v1/search``.

    Args:
        base_url: ``http://HOST:PORT``.
        timeout: seconds per request (connect and read).
        transport: an ``httpx`` transport to use instead of the network (tests).
        api_key: sent as ``X-API-Key`` when given (a server started with
            ``--require-key-for-reads``).

    Raises:
        MissingDependencyError: ``httpx`` is not installed (the ``server`` extra).
        InvalidParameterError: the URL is not ``http://`` or ``https://``, or the timeout is not positive.

    """

    def __init__(
        self, base_url: str, *, timeout: float = 30.0, transport: Any = None, api_key: str | None = None
    ) -> None:
        try:
            import httpx
        except ImportError:
            raise MissingDependencyError(
                "a trial against a server needs httpx: pip install 'weft-search[server]'"
            ) from None
        if not base_url.startswith(("http://", "https://")):
            raise InvalidParameterError(f"a server URL starts with http:// or https://, got {base_url!r}")
        if not timeout > 0:
            raise InvalidParameterError(f"the request timeout must be > 0 seconds, got {timeout!r}")
        self.base_url = base_url.rstrip("/")
        self._httpx = httpx
        headers = {} if api_key is None else {"X-API-Key": api_key}
        self._client = httpx.Client(
            base_url=self.base_url, timeout=timeout, transport=transport, trust_env=False, headers=headers
        )

    def health(self) -> None:
        """Check that ``/health`` answers 200.

        Raises:
            ServerUnreachableError: no answer, or another status (the message says which).

        """
        try:
            answer = self._client.get("/health")
        except self._httpx.HTTPError as exc:
            raise ServerUnreachableError(f"the server at {self.base_url} does not answer: {exc}") from None
        if answer.status_code != 200:
            raise ServerUnreachableError(
                f"the server at {self.base_url} answers /health with {answer.status_code}: "
                f"{answer.text[:200]}"
            )

    def search(self, body: dict[str, Any]) -> Answer:
        """``POST /v1/search`` with ``body``; a network or HTTP failure is an :class:`Answer`."""
        start = time.perf_counter()
        try:
            answer = self._client.post("/v1/search", json=body)
            content = answer.content
        except self._httpx.HTTPError as exc:
            return Answer(0, None, time.perf_counter() - start, f"no response: {type(exc).__name__}: {exc}")
        seconds = time.perf_counter() - start
        try:
            parsed = json.loads(content)
        except ValueError:
            return Answer(answer.status_code, None, seconds, f"HTTP {answer.status_code}, not JSON")
        if not isinstance(parsed, dict):
            return Answer(answer.status_code, None, seconds, f"HTTP {answer.status_code}, not a JSON object")
        if answer.status_code != 200:
            error = parsed.get("error")
            detail = (
                json.dumps(error)[:300] if error is not None else content[:300].decode("utf-8", "replace")
            )
            return Answer(answer.status_code, parsed, seconds, f"HTTP {answer.status_code}: {detail}")
        return Answer(200, parsed, seconds)

    def close(self) -> None:
        """Close the connections."""
        self._client.close()
