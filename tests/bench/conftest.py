"""Fixtures of the ``bench load`` tests: a quick command line, and its work recorded instead of done."""

from __future__ import annotations

from typing import Any

import pytest

from weftsearch.bench import loadgen

#: A bench load that would build indexes at once if nothing stopped it (the work is spied on below).
QUICK_LOAD = [
    "bench", "load", "--synthetic", "50", "--queries", "5", "--rungs", "1", "--rung-seconds", "0.1",
    "--min-requests", "1", "--sequential-seconds", "0.1", "--repetitions", "1", "--no-calibrate",
]  # fmt: skip


@pytest.fixture
def no_work(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every corpus drawn and index built by ``bench load``, recorded instead of done."""
    work: list[str] = []

    def record(name: str) -> Any:
        def step(*args: object, **kwargs: object) -> Any:
            work.append(name)
            raise AssertionError(f"{name} ran before the missing package was reported")

        return step

    for name in ("synthetic_corpus", "scifact_corpus", "build_weft_index", "build_peer", "_commit_run"):
        monkeypatch.setattr(loadgen, name, record(name))
    return work
