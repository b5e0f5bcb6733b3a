"""Smoke test of bench/index_size.py on a tiny synthetic corpus: every group printed, tantivy beside it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "index_size.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_index_size", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


size = _load()


def test_every_positions_section_is_counted_as_positions() -> None:
    sizes = size.measure(size.documents_synthetic(40), "simple", False, positions=True)
    assert sizes["positions"] > 0 and "other sections" in sizes
    assert sizes["total"] >= sum(v for k, v in sizes.items() if k != "total")


def test_the_script_prints_tantivy_beside_weft(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if importlib.util.find_spec("tantivy") is None:
        pytest.skip("tantivy is not installed (pip install -e '.[bench]')")
    monkeypatch.setattr(
        sys, "argv", ["index_size.py", "--synthetic", "40", "--positions", "--no-store-text", "--tantivy"]
    )
    assert size.main() == 0
    out = capsys.readouterr().out
    assert "positions=True" in out and "  positions " in out
    assert "text stored=False" in out and "(weft-search / tantivy " in out and ".pos" in out
