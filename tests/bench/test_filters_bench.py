"""Smoke test of bench/filters.py: every selectivity row is produced, exact recall is 1 for the
exhaustive arms, and every arm returns what the exact filtered answer has. No timing asserted."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "filters.py"


def _module() -> Any:
    spec = importlib.util.spec_from_file_location("bench_filters", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_filter_sweep_runs_on_a_small_synthetic_corpus(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = _module()
    out = tmp_path / "rows.json"
    assert (
        module.main(
            ["--synthetic", "3000", "--queries", "5", "--passes", "1", "--no-peers", "--json", str(out)]
        )
        == 0
    )
    payload = json.loads(out.read_text(encoding="utf-8"))
    rows = payload["rows"]
    # Every issue-15 target has its line; the peers were not run, so theirs are NOT MEASURED.
    lines = payload["targets"]
    assert sum("recall@10 vs exact filtered" in line for line in lines) == 3
    assert sum("q/s at 1%" in line for line in lines) == 3
    assert sum(line.startswith("- NOT MEASURED") and "ahead of" in line for line in lines) == 3
    assert any(line.startswith("- MET: never fewer than k results") for line in lines)
    assert {row["selectivity"] for row in rows} == {"none", "0.1%", "1.0%", "10.0%", "50.0%", "99.0%"}
    for row in rows:
        if row["arm"] == "weft BM25":
            assert row["recall@10"] == 1.0  # exhaustive under a filter: the exact answer
        assert row["full"] == 1.0, row
    assert "Issue 15 targets" in capsys.readouterr().out


def test_the_crossover_mode_times_both_paths_on_a_small_synthetic_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    module = _module()
    out = tmp_path / "crossover.json"
    argv = ["--crossover", "--synthetic-only", "--synthetic", "4000", "--dim", "8", "--queries", "4"]
    assert module.main([*argv, "--passes", "1", "--json", str(out)]) == 0
    (result,) = json.loads(out.read_text(encoding="utf-8"))["crossover"]
    assert [row["selectivity"] for row in result["rows"]] == [
        f"{s:.1%}" for s in module.CROSSOVER_SELECTIVITIES
    ]
    for row in result["rows"]:
        assert row["exact_us"] > 0 and row["probed_us"] > 0 and 0.0 <= row["probed_recall"] <= 1.0
    assert "unfiltered probe reads" in result["crossover"]
    assert "Exact scan vs probe" in capsys.readouterr().out
