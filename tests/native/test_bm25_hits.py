"""``hits_sound`` (``weft_hits_sound``): the first hit not known sound, from any thread, for any length."""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable

import numpy as np
import pytest
from numpy.typing import NDArray

from tests.storage.crafting import damage_record
from weftsearch import BM25Scorer, Document, Index, Query
from weftsearch.native import bm25 as kernel


def test_hits_sound_finds_the_damaged_hit_in_every_thread_and_length() -> None:
    library = kernel.compiled_bm25()
    if library is None or library.hits_sound is None:
        pytest.skip("the compiled BM25 library is not built")
    function = library.hits_sound
    index = Index("english")
    index.add_many(Document(f"d{i:05d}", f"graph word{i}") for i in range(2100))
    snapshot = index.snapshot()
    assert len(snapshot.parts) == 1
    reader = snapshot.parts[0].reader
    victim = 950
    damage_record(reader, victim)  # this reader only, before any check
    every = np.arange(snapshot.n_docs, dtype=np.int64)
    keep, _ = snapshot.sound_keys(every)  # checks every record: the verdicts are known from here
    assert keep is not None and not keep[victim] and int(keep.sum()) == snapshot.n_docs - 1
    views = snapshot._key_views()

    def first_unsound(ids: NDArray[np.int64]) -> int:
        released = kernel.hits_sound(function, ids, views.table_address, len(views.parts))
        # The binding that keeps the GIL (a search's few hits) answers the same, up to HELD_MAX
        # ids and past it (where the released one runs).
        held_function = library.hits_sound_held
        held = kernel.hits_sound(function, ids, views.table_address, len(views.parts), held_function)
        assert held == released
        return released

    # Within a thread's buffer (up to _HITS_SCRATCH ids), past it, and a strided view.
    cases: list[tuple[NDArray[np.int64], int]] = [
        (every[:900], 900),
        (every[:1000], victim),
        (every[900:1024][::-1].copy(), 1023 - victim),
        (every, victim),
        (every[::2], victim // 2),
    ]
    for ids, expected in cases:
        assert first_unsound(ids) == expected
    found: list[int] = []
    # A thread that never called it before: its own buffer has the same room.
    worker = threading.Thread(target=lambda: found.extend(first_unsound(ids) for ids, _ in cases))
    worker.start()
    worker.join()
    assert found == [expected for _, expected in cases]


def test_the_verdict_and_key_order_bindings_for_few_hits_keep_the_gil() -> None:
    """A search's verdict and tie calls keep the GIL; the kernels' and the long calls' release it.

    Releasing the GIL for a call of a microsecond hands it to a waiting thread and back (two
    wake-ups): one search made up to three hand-offs, now the kernel's alone.
    """
    library = kernel.compiled_bm25()
    if library is None or library.hits_sound_held is None or library.ties_by_key_held is None:
        pytest.skip("the compiled BM25 library is not built")
    assert library.hits_sound is not None and library.ties_by_key is not None
    keeps = ctypes._FUNCFLAG_PYTHONAPI  # type: ignore[attr-defined]  # how PyDLL marks its functions
    assert library.hits_sound_held._flags_ & keeps  # type: ignore[attr-defined]
    assert library.ties_by_key_held._flags_ & keeps  # type: ignore[attr-defined]
    for released in (library.hits_sound, library.ties_by_key, library.query, library.query_batch):
        assert not released._flags_ & keeps  # type: ignore[union-attr]
    index = Index("english")
    index.add_many(Document(f"d{i:04d}", "graph") for i in range(kernel.HELD_MAX + 1))
    snapshot = index.snapshot()
    snapshot.sound_keys(np.arange(snapshot.n_docs, dtype=np.int64))  # every verdict known
    views = snapshot._key_views()
    assert views.compiled_held is library.hits_sound_held
    assert views.compiled_ties_held is library.ties_by_key_held
    calls: list[str] = []

    def spy(name: str, function: Callable[..., int]) -> Callable[..., int]:
        def call(*args: object) -> int:
            calls.append(name)
            return function(*args)

        return call

    views.compiled = spy("released", library.hits_sound)
    views.compiled_held = spy("held", library.hits_sound_held)
    views.compiled_ties = spy("released", library.ties_by_key)
    views.compiled_ties_held = spy("held", library.ties_by_key_held)
    few = np.arange(kernel.HELD_MAX, dtype=np.int64)
    many = np.arange(kernel.HELD_MAX + 1, dtype=np.int64)
    for ids in (few, many):
        assert views.sound_ids(ids)
        ordered = views.ties_by_key(ids, np.ones(ids.shape[0]), 3)  # one run of ties: key order
        assert ordered is not None and ordered.tolist() == ids.tolist()
    assert calls == ["held", "held", "released", "released"]


def test_the_query_that_checks_its_hits_agrees_with_the_two_calls() -> None:
    """``weft_bm25_query_sound``: the query's results and statistics, and ``hits_sound`` of its first k.

    Three segments (keys interleaved), a delete, one damaged record among the hits and one
    outside them, every k from 1 past the hits: the same ids, score bits and six statistics as
    ``weft_bm25_query``, and a seventh equal to ``hits_sound`` of ``ids[:k]``.
    """
    library = kernel.compiled_bm25()
    if library is None or library.query_sound is None or library.query is None or library.hits_sound is None:
        pytest.skip("the compiled BM25 library is not built")
    from weftsearch.scorers.bm25 import lists as layout

    index = Index("english")
    for part in range(3):
        index.add_many(
            Document(f"d{i:04d}", "graph " * (1 + i % 5) + ("sparse" if i % 3 else "dense"))
            for i in range(part, 600, 3)
        )
        index.snapshot()
    index.delete_many(["d0003"])
    snapshot = index.snapshot()
    assert len(snapshot.parts) == 3
    every = np.arange(snapshot.n_docs, dtype=np.int64)
    damage_record(snapshot.parts[1].reader, 7)
    damage_record(snapshot.parts[2].reader, 150)
    snapshot.sound_keys(every)  # every verdict known: sound, or damaged for the two
    scorer = BM25Scorer()
    avgdl, prepared = scorer._kept_setup(snapshot)
    assert prepared is not None
    table = layout._part_table_for(snapshot, scorer.k1, scorer.b, avgdl, None)
    parts_address, n_parts = table.ctypes.data, int(table.shape[0])
    hit_parts, n_hit_parts = snapshot._hit_table()
    assert hit_parts and n_hit_parts == 3
    verdicts: set[str] = set()
    for text in ("graph", "graph sparse", "dense"):
        scorer.score(snapshot, Query(text), 5)  # keeps the text's set-up
        planned, _ = prepared.entries[text]
        for k in (1, 2, 5, 40, 199, 600):
            terms, m, weights = planned.refs_at, len(planned.weights), planned.weights_at
            plain = kernel.query_rows(
                library.query, terms, m, weights, parts_address, n_parts, scorer.k1, scorer.b, avgdl, k
            )
            checked = kernel.query_rows(
                library.query_sound,
                *(terms, m, weights, parts_address, n_parts, scorer.k1, scorer.b, avgdl, k),
                hit_parts,
                n_hit_parts,
            )
            assert checked[0].tolist() == plain[0].tolist()
            assert checked[1].tobytes() == plain[1].tobytes()
            assert checked[2][:6] == plain[2][:6]
            first = kernel.hits_sound(library.hits_sound, plain[0][:k].copy(), hit_parts, n_hit_parts)
            assert checked[2][6] == first
            verdicts.add("damaged" if first < min(k, plain[0].shape[0]) else "sound")
    assert verdicts == {"damaged", "sound"}  # both answers were given
    assert snapshot.n_docs == 599
