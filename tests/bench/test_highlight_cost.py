"""Smoke test of bench/highlight_cost.py: one pass on a tiny corpus; no timing is asserted."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "highlight_cost.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_highlight_cost", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


hc = _load()


def test_the_script_measures_highlighted_hits_on_a_tiny_corpus(capsys: pytest.CaptureFixture[str]) -> None:
    assert hc.main(["--synthetic", "60", "--queries", "4", "--passes", "1", "--k", "5"]) == 0
    out = capsys.readouterr().out
    assert "load average before" in out and "load average after" in out
    assert "µs per hit" in out and "synthetic 60, top-5, 4 queries" in out


def test_the_highlighted_pass_highlights_every_hit_it_counts() -> None:
    documents, queries = hc.load_synthetic(40, 3)
    result = hc.run(documents, queries, 5, 1, "tiny")
    # Every hit of a synthetic query matched one of its words, so every hit has a snippet:
    # the highlighted pass did the work whose cost it reports.
    assert result.queries == 3 and result.hits > 0 and result.highlighted == result.hits


def test_bad_arguments_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--synthetic", "10", "--passes", "0"], ["--synthetic", "10", "--scifact", "x"]):
        with pytest.raises(SystemExit) as raised:
            hc.main(argv)
        assert raised.value.code == 2
    assert "must be at least 1" in capsys.readouterr().err


def test_scifact_is_read_when_present() -> None:
    data = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "scifact"
    if not (data / "corpus.jsonl").is_file():
        pytest.skip(f"no SciFact corpus at {data}")
    documents, queries = hc.load_scifact(data, 3)
    assert len(documents) == 5183 and len(queries) == 3 and all(queries)
