"""``weft-search trial run --serve INDEX_DIR``: the command starts its own loopback server for the run
and never leaves it running (issue 28): not after a valid run, a run that broke the plan, an error
at start, or an interrupt."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.eval.trialdata import QUERIES, make_trial_data
from weftsearch.cli import main
from weftsearch.eval.trial import parse_method, write_plan

pytest.importorskip("httpx", reason="a trial needs the 'server' extra")
pytest.importorskip("uvicorn", reason="a real server needs the 'server' extra")

SRC = str(Path(__file__).resolve().parents[2] / "src")


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_trial_data(tmp_path_factory.mktemp("serve-trial"))


def _plan(data: Path, path: Path, *methods: str) -> Path:
    write_plan(
        path,
        methods=[parse_method(m) for m in methods or ("lex:1", "hyb:1")],
        queries=data / "queries.jsonl",
        qrels=data / "qrels.tsv",
        query_vectors=data / "qv.npy",
        seed=1,
        concurrency=2,
        resamples=200,
    )
    return path


def _gone(pid: int) -> bool:
    """Whether no process ``pid`` exists (a child the launcher waited for is reaped, so its pid is free)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/stat").is_file() and Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"


def test_serve_starts_a_loopback_server_runs_the_plan_and_stops_it(data: Path, tmp_path: Path) -> None:
    plan, report = _plan(data, tmp_path / "p.json"), tmp_path / "r.json"
    log = tmp_path / "serve.log"
    assert main(["trial", "run", str(plan), "--serve", str(data / "idx"), "--report", str(report),
                 "--serve-log", str(log)]) == 0  # fmt: skip
    written = json.loads(report.read_text())
    assert written["valid"] and written["server"].startswith("http://127.0.0.1:")
    assert len(written["requests"]) == 2 * len(QUERIES)
    pid = written["server_process"]["pid"]
    assert written["server_process"]["rss_bytes_peak_sampled"] > 0  # the started server's own figures
    assert _gone(pid)
    assert "127.0.0.1" in log.read_text()  # its output went to --serve-log


def test_a_run_that_breaks_the_plan_still_stops_the_server(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan, report = _plan(data, tmp_path / "p.json", "lex:1", "hyb:7"), tmp_path / "r.json"
    assert main(["trial", "run", str(plan), "--serve", str(data / "idx"), "--report", str(report)]) == 1
    assert "HTTP 404" in capsys.readouterr().err
    assert _gone(json.loads(report.read_text())["server_process"]["pid"])


def test_an_interrupt_during_the_run_stops_the_server(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: dict[str, Any] = {}

    def interrupted(plan: Any, server: str, report: Any, **options: Any) -> dict[str, Any]:
        seen["url"], seen["pid"] = server, options["server_pid"]
        assert not _gone(options["server_pid"])  # running while the trial runs
        raise KeyboardInterrupt

    monkeypatch.setattr("weftsearch.cli.trial.run_trial", interrupted)
    plan = _plan(data, tmp_path / "p.json")
    assert (
        main(["trial", "run", str(plan), "--serve", str(data / "idx"), "--report", str(tmp_path / "r")])
        == 130
    )
    assert seen["url"].startswith("http://127.0.0.1:") and _gone(seen["pid"])
    assert "interrupted" in capsys.readouterr().err


def test_a_server_that_cannot_start_is_a_clear_error(
    tmp_path: Path, data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = _plan(data, tmp_path / "p.json")
    missing = tmp_path / "no-index"
    assert (
        main(["trial", "run", str(plan), "--serve", str(missing), "--report", str(tmp_path / "r.json")]) == 2
    )
    err = capsys.readouterr().err
    assert "weft-search serve stopped at start" in err and "no-index" in err
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--server", "http://127.0.0.1:9", "--vectors-record", "rec.json"],
            "--vectors-record goes with --serve",
        ),
        (["--server", "http://127.0.0.1:9", "--serve-log", "x.log"], "--serve-log goes with --serve"),
        (["--server", "http://127.0.0.1:9", "--serve", "idx"], "not allowed with argument"),
        ([], "one of the arguments --server --serve is required"),
    ],
)
def test_serve_options_without_serve_are_refused(
    tmp_path: Path, extra: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["trial", "run", "plan.json", "--report", str(tmp_path / "r.json"), *extra]) == 2
    assert message in capsys.readouterr().err


def test_sigterm_to_the_command_stops_its_server(data: Path, tmp_path: Path) -> None:
    """A SIGTERM (what a job runner sends) while the plan runs: the command exits 143 and its server
    is gone. Python's default SIGTERM would end the command without stopping the child."""
    plan = _plan(data, tmp_path / "p.json")
    # The command runs in a child process whose run_trial prints the server's pid and sleeps.
    driver = (
        "import sys, time, weftsearch.cli.trial as t\n"
        "def slow(plan, server, report, **o):\n"
        "    print(o['server_pid'], flush=True)\n"
        "    time.sleep(60)\n"
        "t.run_trial = slow\n"
        "from weftsearch.cli import main\n"
        "raise SystemExit(main(sys.argv[1:]))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (SRC, os.environ.get("PYTHONPATH")) if p)}
    child = subprocess.Popen(
        [sys.executable, "-c", driver, "trial", "run", str(plan), "--serve", str(data / "idx"),
         "--report", str(tmp_path / "r.json")],
        stdout=subprocess.PIPE, env=env, text=True,
    )  # fmt: skip
    server_pid = 0
    try:
        assert child.stdout is not None
        server_pid = int(child.stdout.readline())
        assert not _gone(server_pid)
        child.send_signal(signal.SIGTERM)
        assert child.wait(60) == 128 + signal.SIGTERM
        deadline = time.monotonic() + 10
        while not _gone(server_pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gone(server_pid)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if server_pid and not _gone(server_pid):  # a failed test leaves no server behind either
            os.kill(server_pid, signal.SIGKILL)
