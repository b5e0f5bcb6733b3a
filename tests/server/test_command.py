"""``weft-search serve``: arguments, defaults (loopback), the key from the environment, the extra named."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import KEY
from weftsearch.cli import main


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    import uvicorn

    def fake_run(app: Any, **kwargs: Any) -> None:
        from fastapi.testclient import TestClient

        with TestClient(app) as client:  # its shutdown closes the index
            stats = client.get("/v1/stats").status_code
        calls.append({"stats": stats, **kwargs})

    monkeypatch.setattr(uvicorn, "run", fake_run)
    return calls


def test_serve_binds_loopback_by_default(index_path: Path, served: list[dict[str, Any]]) -> None:
    assert main(["serve", "--index", str(index_path)]) == 0
    assert (served[0]["host"], served[0]["port"], served[0]["stats"]) == ("127.0.0.1", 8080, 200)


def test_serve_reads_the_key_from_the_named_variable(
    index_path: Path, served: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_WEFT_KEY", KEY)
    argv = [
        "serve",
        "--index",
        str(index_path),
        "--api-key-env",
        "MY_WEFT_KEY",
        "--host",
        "0.0.0.0",
        "--port",
        "9",
    ]
    assert main([*argv, "--require-key-for-reads"]) == 0
    assert (served[0]["host"], served[0]["port"], served[0]["stats"]) == ("0.0.0.0", 9, 401)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--api-key-env", "WEFT_NOT_SET_ANYWHERE"], "WEFT_NOT_SET_ANYWHERE"),
        (["--require-key-for-reads"], "--api-key-env"),
        (["--workers", "2", "--readonly"], "--readonly"),
    ],
)
def test_serve_refuses_what_it_cannot_do(
    index_path: Path,
    served: list[dict[str, Any]],
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    message: str,
) -> None:
    assert main(["serve", "--index", str(index_path), *extra]) == 2
    assert message in capsys.readouterr().err and served == []


def test_serve_names_a_missing_index(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--index", str(tmp_path / "nothing")]) == 2
    assert "no index at" in capsys.readouterr().err


def test_without_the_extra_the_error_names_it() -> None:
    code = (
        "import sys\n"
        "sys.modules['fastapi'] = None\n"  # as if not installed
        "from weftsearch.errors import MissingDependencyError\n"
        "try:\n"
        "    import weftsearch.server.app\n"
        "except MissingDependencyError as exc:\n"
        "    print(exc)\n"
        "import weftsearch.server.profiles, weftsearch.cli\n"  # profiles and the CLI need no extra
        "print('library ok')\n"
    )
    src = str(Path(__file__).resolve().parents[2] / "src")
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={"PYTHONPATH": src}, check=True
    ).stdout
    assert "pip install 'weft-search[server]'" in out and "fastapi" in out and "library ok" in out
