"""Near-real-time visibility across threads (``Index.snapshot``'s docstring).

The writing thread sees its own writes at once; other threads see the newest
published snapshot, except before anything was ever published, when another
thread's first search publishes the writes so far (so that an index built in
one thread and searched from a pool answers from what was added).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from weftsearch import Document, Index


def _keys_seen_from_another_thread(index: Index) -> list[str]:
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: sorted(index.snapshot().keys())).result()


def test_a_pool_thread_sees_an_index_built_without_a_refresh() -> None:
    index = Index("english")
    index.add_many([Document("a", "alpha"), Document("b", "beta")], progress=False)
    assert _keys_seen_from_another_thread(index) == ["a", "b"]


def test_other_threads_see_the_published_snapshot_until_the_writer_publishes_again() -> None:
    index = Index("english")
    index.add(Document("a", "alpha"))
    index.refresh()
    index.add(Document("b", "beta"))
    # Published once already: the reader takes that snapshot and seals nothing.
    assert _keys_seen_from_another_thread(index) == ["a"]
    assert sorted(index.snapshot().keys()) == ["a", "b"]  # the writer sees its own write ...
    assert _keys_seen_from_another_thread(index) == ["a", "b"]  # ... and that published it


def test_refresh_publishes_for_every_thread() -> None:
    index = Index("english")
    index.add(Document("a", "alpha"))
    index.refresh()
    index.delete("a")
    index.add(Document("c", "gamma"))
    assert _keys_seen_from_another_thread(index) == ["a"]
    assert index.refresh() is True
    assert _keys_seen_from_another_thread(index) == ["c"]
    assert index.refresh() is False
