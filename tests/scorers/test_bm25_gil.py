"""Which kernel binding a kept BM25 search calls: one that keeps the GIL for a short query on a
small index, one that releases it otherwise (``native.bm25.HELD_QUERY_POSTINGS``).

Releasing the GIL hands it to a waiting thread and back: for a query of a few microseconds
that costs more than it lets run beside it. Both bindings are the same C function, so the
results are the same; what is pinned here is the choice.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np
import pytest

from weftsearch import RRF, BM25Scorer, Document, Index, Query
from weftsearch.native import bm25 as kernel

WORDS = ("graph", "sparse", "dense", "retrieval")


def _index() -> Index:
    rng = np.random.default_rng(7)
    index = Index(analyzer="simple")
    index.add_many(Document(f"d{i:04d}", " ".join(rng.choice(WORDS, size=4).tolist())) for i in range(3000))
    return index


def _chosen(monkeypatch: pytest.MonkeyPatch, index: Index, text: str) -> list[str]:
    """The bindings the kept searches of ``text`` called, by name, and the results' equality."""
    library = kernel.compiled_bm25()
    assert library is not None
    called: list[str] = []
    real = kernel.query_rows

    def spy(function: Any, *args: Any) -> Any:
        called.append("held" if function is library.query_sound_held else "released")
        return real(function, *args)

    monkeypatch.setattr(kernel, "query_rows", spy)
    first = index.search(Query(text), 10, RRF(), BM25Scorer())  # keeps the set-up: not the kept path
    called.clear()
    again = index.search(Query(text), 10, RRF(), BM25Scorer())
    assert again.keys == first.keys and again.score_array.tobytes() == first.score_array.tobytes()
    return called


def test_the_held_binding_keeps_the_gil() -> None:
    library = kernel.compiled_bm25()
    if library is None or library.query_sound_held is None or library.query_sound is None:
        pytest.skip("the compiled BM25 library is not built")
    keeps = ctypes._FUNCFLAG_PYTHONAPI  # type: ignore[attr-defined]  # how PyDLL marks its functions
    assert library.query_sound_held._flags_ & keeps  # type: ignore[attr-defined]
    assert not library.query_sound._flags_ & keeps  # type: ignore[attr-defined]


def test_a_short_query_on_a_small_index_keeps_the_gil(monkeypatch: pytest.MonkeyPatch) -> None:
    library = kernel.compiled_bm25()
    if library is None or library.query_sound_held is None or library.dense_max_docs is None:
        pytest.skip("the compiled BM25 library is not built")
    assert _chosen(monkeypatch, _index(), "graph sparse") == ["held"]


def test_a_long_query_releases_the_gil(monkeypatch: pytest.MonkeyPatch) -> None:
    library = kernel.compiled_bm25()
    if library is None or library.query_sound_held is None or library.dense_max_docs is None:
        pytest.skip("the compiled BM25 library is not built")
    monkeypatch.setattr(kernel, "HELD_QUERY_POSTINGS", 10)  # every query here holds more
    assert _chosen(monkeypatch, _index(), "graph sparse") == ["released"]


def test_a_segment_past_the_dense_pass_releases_the_gil(monkeypatch: pytest.MonkeyPatch) -> None:
    library = kernel.compiled_bm25()
    if library is None or library.query_sound_held is None or library.dense_max_docs is None:
        pytest.skip("the compiled BM25 library is not built")
    monkeypatch.setattr(library.dense_max_docs, "value", 100)  # the 3,000-document segment is past it
    assert _chosen(monkeypatch, _index(), "graph sparse") == ["released"]
