"""Fixtures shared by the eval tests: a local HTTP server standing in for a collection's upstream."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    """Serves files quietly; ``/broken/...`` promises 100 bytes, sends 10 and hangs up."""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        if self.path.startswith("/broken/"):
            # Promise 100 bytes, send 10, hang up.
            self.send_response(200)
            self.send_header("Content-Length", "100")
            self.end_headers()
            self.wfile.write(b"0123456789")
            self.wfile.flush()
            self.close_connection = True
            return
        super().do_GET()


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A threaded HTTP server on 127.0.0.1 serving ``tmp_path/srv``: (that folder, its base URL)."""
    root = tmp_path / "srv"
    root.mkdir()

    def handler(*args: Any, **kwargs: Any) -> QuietHandler:
        return QuietHandler(*args, directory=str(root), **kwargs)

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield root, f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)
