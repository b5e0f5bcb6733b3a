"""Smoke test of bench/gil_stalls.py (both modes, briefly, on SciFact): it runs and prints its
figures. No timing asserted: the figures are for a quiet machine, not for a test."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bench" / "gil_stalls.py"
SCIFACT = ROOT.parent / "shared" / "datasets" / "scifact"

pytestmark = [
    pytest.mark.data,
    pytest.mark.slow,
    pytest.mark.skipif(not SCIFACT.is_dir(), reason=f"SciFact is not at {SCIFACT}"),
]


def _run(*arguments: str) -> str:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--data", str(SCIFACT), *arguments],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_search_mode_reports_the_share_of_time_without_the_gil() -> None:
    out = _run("--mode", "search", "--seconds", "0.3")
    assert re.search(r"bm25: [\d,]+ q/s on one thread", out)
    share = re.search(r"GIL released\): ([\d.]+)% of the time", out)
    assert share is not None and 0.0 <= float(share.group(1)) <= 100.0
    assert "load average before" in out and "load average after" in out


def test_the_commit_mode_reports_waits_inside_and_outside_the_window() -> None:
    out = _run("--mode", "commit", "--commit-docs", "2500", "--before", "0.3")
    assert re.search(r"commit [\d.]+ s, merge [\d.]+ s, 2 reader threads", out)
    for where in ("outside", "inside"):
        assert re.search(rf"GIL wait \(ticker lateness\) {where}: +p50", out)
        assert re.search(rf"search time {where}: +(p50|-)", out)


def test_the_threads_mode_compares_the_three_paths_on_one_and_two_threads() -> None:
    out = _run("--mode", "threads", "--seconds", "0.2", "--rounds", "1")
    for mode in ("numpy", "compiled", "adaptive"):
        for threads in (1, 2):
            line = rf"round 0 bm25 {mode} {threads} thread\(s\): [\d,]+ q/s, [\d.]+ voluntary context"
            assert re.search(line, out)
