"""Smoke test of bench/filters.py: every selectivity row is produced, exact recall is 1 for the
exhaustive arms, and every arm returns what the exact filtered answer has. No timing asserted."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "filters.py"


def test_the_filter_sweep_runs_on_a_small_synthetic_corpus(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = importlib.util.spec_from_file_location("bench_filters", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    out = tmp_path / "rows.json"
    assert (
        module.main(
            ["--synthetic", "3000", "--queries", "5", "--passes", "1", "--no-peers", "--json", str(out)]
        )
        == 0
    )
    rows = json.loads(out.read_text(encoding="utf-8"))["rows"]
    assert {row["selectivity"] for row in rows} == {"none", "0.1%", "1.0%", "10.0%", "50.0%", "99.0%"}
    for row in rows:
        if row["arm"] == "weft BM25":
            assert row["recall@10"] == 1.0  # exhaustive under a filter: the exact answer
        assert row["full"] == 1.0, row
    assert "Filtered search" in capsys.readouterr().out
