"""``hits_sound`` (``weft_hits_sound``): the first hit not known sound, from any thread, for any length."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from numpy.typing import NDArray

from tests.storage.crafting import damage_record
from weftsearch import Document, Index
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
        return kernel.hits_sound(function, ids, views.table_address, len(views.parts))

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
