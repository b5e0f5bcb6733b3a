"""Issue 31: a search's keys resolved one hit at a time from per-snapshot views (``_KeyViews``).

The oracle is :meth:`Snapshot.keys_of` and :meth:`Snapshot.damaged`: for any few ids
of a snapshot of several segments with deletions, whether the verdicts of their
records and keys are known yet or not, and whether a reader decoded its whole key
table or not, :meth:`Snapshot.sound_keys` gives the same keys in the same order and
leaves out exactly the damaged records.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.engine.test_search_layer import segmented_index
from weftsearch.engine import snapshot as snapshot_module


@settings(max_examples=25, deadline=None)
@given(
    segments=st.integers(1, 4),
    per_segment=st.integers(1, 60),
    delete_every=st.sampled_from([0, 2, 3, 7]),
    seed=st.integers(0, 2**32 - 1),
    decode_all=st.booleans(),
)
def test_few_hits_get_the_keys_and_verdicts_of_the_checking_path(
    segments: int, per_segment: int, delete_every: int, seed: int, decode_all: bool
) -> None:
    index = segmented_index(segments, per_segment=per_segment, seed=seed % 1000)
    if delete_every:
        doomed = index.keys()[::delete_every]
        if len(doomed) < len(index.keys()):
            index.delete_many(doomed)
    snapshot = index.snapshot()
    if decode_all:
        for part in snapshot.parts:
            part.reader.keys()  # the reader's decoded key table: the views read that instead
    rng = np.random.default_rng(seed)
    n = snapshot.n_docs
    for size in (1, 2, 10, snapshot_module._KEYS_ONE_BY_ONE, 100):  # 100: one by one on several segments
        ids = rng.choice(n, size=min(size, n), replace=False).astype(np.int64)
        for _ in range(2):  # verdicts unknown (the checking path), then known (one by one)
            keep, keys = snapshot.sound_keys(ids)
            assert keep is None and keys == snapshot.keys_of(ids)
        victim = int(ids[int(rng.integers(ids.shape[0]))])
        part = next(p for p in snapshot.parts if p.base <= victim < p.base + p.n_live)
        verdicts, local = part.reader.key_views()[0], int(part.live_locals[victim - part.base])
        verdicts[local] = 2  # what a reader's first check of a damaged record records
        try:
            keep, keys = snapshot.sound_keys(ids)
            damaged = snapshot.damaged(ids)
        finally:
            verdicts[local] = 1
        assert damaged.tolist() == [int(doc) == victim for doc in ids.tolist()]
        assert keep is not None and keep.tolist() == (~damaged).tolist()
        assert keys == snapshot.keys_of(ids[~damaged])


def test_the_views_are_built_once_per_snapshot() -> None:
    index = segmented_index(3, per_segment=30)
    snapshot = index.snapshot()
    ids = np.arange(5, dtype=np.int64)
    snapshot.sound_keys(ids)
    views = snapshot.memo(("engine", "key views"), lambda: None)
    assert isinstance(views, snapshot_module._KeyViews)
    snapshot.sound_keys(ids[::-1])
    assert snapshot.memo(("engine", "key views"), lambda: None) is views
    index.delete_many(snapshot.keys_of(ids[:2]))
    after = index.snapshot()
    keep, keys = after.sound_keys(np.arange(3, dtype=np.int64))
    assert keep is None and keys == after.keys_of(np.arange(3, dtype=np.int64))
    assert after.memo(("engine", "key views"), lambda: None) is not views
