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
            answer = client.get("/v1/stats")
        stats, model = answer.status_code, answer.json().get("query_model")
        calls.append({"stats": stats, "query_model": model, **kwargs})

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
        "import weftsearch.ranking.profiles, weftsearch.cli\n"  # profiles and the CLI need no extra
        "print('library ok')\n"
    )
    src = str(Path(__file__).resolve().parents[2] / "src")
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={"PYTHONPATH": src}, check=True
    ).stdout
    assert "pip install 'weft-search[server]'" in out and "fastapi" in out and "library ok" in out


def _record(path: Path, dims: int) -> Path:
    path.write_text(f'{{"vectors": "tiny", "model": {{"name": "acme/tiny"}}, "dims": {dims}}}')
    return path


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_vectors_record_that_does_not_fit_stops_serve_before_any_process(
    index_path: Path,
    tmp_path: Path,
    served: list[dict[str, Any]],
    capsys: pytest.CaptureFixture[str],
    workers: str,
) -> None:
    """With --workers N the check runs before the writer and the readers start: a reader that
    failed it would be restarted by uvicorn again and again."""
    record = _record(tmp_path / "wide.json", 384)
    argv = ["serve", "--index", str(index_path), "--workers", workers, "--vectors-record", str(record)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "384 dims" in err and "holds vectors of 8 dims" in err and str(record) in err
    assert served == []
    assert main([*argv[:-1], str(tmp_path / "missing.json")]) == 2
    assert "missing.json" in capsys.readouterr().err and served == []


def test_serve_passes_the_vectors_record_on(
    index_path: Path, tmp_path: Path, served: list[dict[str, Any]]
) -> None:
    record = _record(tmp_path / "tiny.json", 8)
    assert main(["serve", "--index", str(index_path), "--vectors-record", str(record)]) == 0
    assert served[0]["stats"] == 200 and served[0]["query_model"]["model"] == "acme/tiny"


@pytest.mark.parametrize(
    ("extra", "warned"),
    [([], True), (["--readonly"], False), (["--api-key-env", "MY_WEFT_KEY"], False)],
)
def test_serve_warns_when_anyone_may_write(
    index_path: Path,
    served: list[dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    warned: bool,
) -> None:
    """No key on a writable index: one warning line at start-up (issue 26, item 16f)."""
    monkeypatch.setenv("MY_WEFT_KEY", KEY)
    assert main(["serve", "--index", str(index_path), "--port", "9", *extra]) == 0
    err = capsys.readouterr().err
    line = "weft-search serve: WARNING: no API key (--api-key-env NAME): anyone who can reach 127.0.0.1:9"
    assert (line in err) is warned, err
    assert served


def test_the_limit_defaults_serve_shows_are_server_limits_own() -> None:
    import dataclasses

    from weftsearch.server.app import ServerLimits
    from weftsearch.server.run import LIMIT_DEFAULTS

    assert {f.name: f.default for f in dataclasses.fields(ServerLimits)} == LIMIT_DEFAULTS


def test_serve_options_set_every_limit_and_the_schema_states_them(
    index_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``serve --max-...`` changes what the server refuses and what its /openapi.json says."""
    answers: list[Any] = []
    import uvicorn

    def fake_run(app: Any, **kwargs: Any) -> None:
        from fastapi.testclient import TestClient

        with TestClient(app) as client:
            schema = client.get("/openapi.json").json()
            queries = {f"q{i}": {"text": "graph"} for i in range(4)}
            body = {"ranking": {"spec": "bm25"}, "queries": queries, "judgements": {"q0": {"d1": 1}}, "k": 5}
            answers.append((schema, client.post("/v1/rank_eval", json=body)))
            answers.append(client.post("/v1/search", json={"text": "graph " * 100, "spec": "bm25"}))

    monkeypatch.setattr(uvicorn, "run", fake_run)
    argv = ["serve", "--index", str(index_path), "--max-queries", "3", "--max-body-bytes", "400"]
    assert main([*argv, "--max-k", "7", "--search-threads", "2"]) == 0
    (schema, refused), too_big = answers
    assert refused.status_code == 422 and "at most 3 (weft-search serve --max-queries)" in refused.text
    assert too_big.status_code == 413 and "400 bytes" in too_big.text
    models = schema["components"]["schemas"]
    assert models["RankEvalRequest"]["properties"]["queries"]["maxProperties"] == 3
    assert models["SearchRequest"]["properties"]["k"]["maximum"] == 7
    assert "400 bytes" in schema["info"]["description"]


@pytest.mark.parametrize("value", ["0", "-3", "many"])
def test_a_limit_option_must_be_a_positive_integer(
    index_path: Path, served: list[dict[str, Any]], capsys: pytest.CaptureFixture[str], value: str
) -> None:
    assert main(["serve", "--index", str(index_path), "--max-queries", value]) == 2
    assert "--max-queries" in capsys.readouterr().err and served == []
