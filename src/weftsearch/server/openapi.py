"""The server's OpenAPI schema as text, for ``docs/openapi.json``.

Regenerate the checked-in copy after changing the API::

    PYTHONPATH=src python -m weftsearch.server.openapi docs/openapi.json

(``tests/server/test_openapi.py`` fails when the copy drifts from the code.)
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from weftsearch.engine.index import Index

__all__ = ["openapi_text"]


def openapi_text() -> str:
    """The schema of :func:`~weftsearch.server.app.create_app`, as sorted, indented JSON ending in a newline.

    The schema depends on the code only: it is read from an app over an empty
    index made for the purpose in a temporary directory.
    """
    from weftsearch.server.app import create_app

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "index"
        Index.create(path).close()
        app = create_app(path)
        schema = app.openapi()
        app.state.weft.index.close(discard=True)
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write the schema to the file named in ``argv`` (or print it)."""
    args = sys.argv[1:] if argv is None else argv
    text = openapi_text()
    if args:
        Path(args[0]).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
