"""The server's log output without secrets: no query string, and never the API key.

uvicorn's access log prints each request line in full, query string
included, so ``GET /v1/stats?api_key=KEY`` put a key in the log (the
request itself was refused, since the server reads keys from headers
only). :func:`log_config` is uvicorn's logging configuration with
:class:`SecretFilter` on every handler: an access line shows the path
without its query string, and any line (access, error, a traceback) has
the server's key replaced by ``[redacted]``, however it was spelt.

It imports no web framework.
"""

from __future__ import annotations

import copy
import logging
import os
from typing import Any
from urllib.parse import quote, quote_plus

__all__ = ["REDACTED", "SecretFilter", "log_config", "redact"]

#: What replaces a secret in a log line.
REDACTED = "[redacted]"


def _spellings(secret: str) -> list[str]:
    """The ways ``secret`` can appear in a logged path: as is, percent-encoded (both ways)."""
    forms = {secret, quote(secret), quote(secret, safe=""), quote_plus(secret)}
    return sorted((form for form in forms if form), key=len, reverse=True)


def redact(text: str, secrets: list[str]) -> str:
    """``text`` with every spelling of every secret in ``secrets`` replaced by :data:`REDACTED`."""
    for secret in secrets:
        for form in _spellings(secret):
            if form in text:
                text = text.replace(form, REDACTED)
    return text


def _without_query(path: str) -> str:
    return path.partition("?")[0]


class SecretFilter(logging.Filter):
    """A logging filter (it keeps every record) that takes secrets out of each one.

    On uvicorn's access records (their arguments are the client, method,
    path with query, HTTP version and status) the query string is dropped:
    a query string is where keys, tokens and passwords end up by mistake,
    and no route of this server reads one. On every record the key held in
    the environment variable ``key_env`` (when set) is replaced by
    :data:`REDACTED` in the message, its arguments and its traceback.

    Args:
        key_env: the name of the variable holding the API key (``serve
            --api-key-env``), read here so the key is never written into a
            configuration; ``None`` or ``""``: no key to look for.

    """

    def __init__(self, key_env: str | None = None) -> None:
        super().__init__()
        key = os.environ.get(key_env) if key_env else None
        self._secrets = [key] if key else []

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite ``record`` in place without its secrets; always keep it."""
        args = record.args
        if record.name == "uvicorn.access" and isinstance(args, tuple) and len(args) == 5:
            client, method, path, version, status = args
            record.args = (client, method, redact(_without_query(str(path)), self._secrets), version, status)
        elif self._secrets:
            message = record.getMessage()
            cleaned = redact(message, self._secrets)
            if cleaned != message:
                record.msg, record.args = cleaned, None
        if self._secrets and record.exc_info and not record.exc_text:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info), self._secrets)
        if self._secrets and record.exc_text:
            record.exc_text = redact(record.exc_text, self._secrets)
        return True


def log_config(base: dict[str, Any], key_env: str | None) -> dict[str, Any]:
    """A copy of a :func:`logging.config.dictConfig` configuration, a :class:`SecretFilter` on each handler.

    Args:
        base: the configuration (``uvicorn.config.LOGGING_CONFIG``; passed in, so this
            module imports no web framework).
        key_env: the name of the variable holding the API key, or ``None``.

    """
    config: dict[str, Any] = copy.deepcopy(base)
    config.setdefault("filters", {})["secrets"] = {"()": f"{__name__}.SecretFilter", "key_env": key_env or ""}
    for handler in config["handlers"].values():
        handler.setdefault("filters", []).append("secrets")
    return config
