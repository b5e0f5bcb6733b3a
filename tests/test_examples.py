"""The examples run against the public API and produce the rankings they claim."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_custom_scorer_changes_the_fused_ranking(capsys: pytest.CaptureFixture[str]) -> None:
    module = _load("custom_scorer")
    text_only, fused = module.main()
    # "faq" is BM25's last match; it is by far the most viewed, so fusing the
    # popularity stream lifts it above "rrf", which has no views at all.
    assert text_only[-1] == "faq"
    assert fused.index("faq") < fused.index("rrf")
    assert sorted(text_only) == sorted(fused)
    assert "popularity rank 1" in capsys.readouterr().out


def test_custom_scorer_ignores_keys_outside_the_index() -> None:
    module = _load("custom_scorer")
    from weftsearch import Document, Index, Query

    index = Index()
    index.add_many([Document("a", "x"), Document("b", "y")])
    scorer = module.PopularityScorer({"b": 5.0, "zzz": 100.0})
    stream = scorer.score(index.snapshot(), Query(), 10)
    assert index.snapshot().keys_of(stream.ids) == ["b"]
