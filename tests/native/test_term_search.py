"""The term table's compiled binary search (``_inversion.c`` ``lower_bound``) against Python's bisection.

A term's first look-up on a reader (and every prefix expansion) bisects the
segment's sorted UTF-8 term table; the compiled search must give the index
``bisect.bisect_left`` gives over the terms' bytes, for any table and needle,
and a reader must find the same terms and prefixes with it as without it.
"""

from __future__ import annotations

import bisect
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from weftsearch import Document, Index
from weftsearch.native import inversion
from weftsearch.storage import segment

pytestmark = pytest.mark.skipif(
    segment._term_search is None, reason="the compiled inversion module is not built here"
)


def _table(terms: list[bytes]) -> tuple[NDArray[np.uint8], NDArray[np.uint64]]:
    blob = np.frombuffer(b"".join(terms), dtype=np.uint8)
    offsets = np.zeros(len(terms) + 1, dtype=np.uint64)
    np.cumsum([len(term) for term in terms], out=offsets[1:])
    return blob, offsets


def test_the_compiled_search_is_handed_to_storage() -> None:
    assert segment._term_search is not None and inversion._compiled is not None
    assert segment._term_search is inversion._compiled.lower_bound


@settings(max_examples=300, deadline=None)
@given(
    terms=st.sets(st.text(max_size=6), max_size=40),
    needles=st.lists(st.text(max_size=7), max_size=10),
    raw_needles=st.lists(st.binary(max_size=4), max_size=5),
)
def test_lower_bound_is_bisect_left_over_the_terms_bytes(
    terms: set[str], needles: list[str], raw_needles: list[bytes]
) -> None:
    encoded = sorted(term.encode("utf-8", "surrogatepass") for term in terms)
    blob, offsets = _table(encoded)
    search = segment._term_search
    assert search is not None
    every = [needle.encode("utf-8", "surrogatepass") for needle in needles] + raw_needles + encoded
    for needle in every:
        assert search(blob, offsets, needle) == bisect.bisect_left(encoded, needle)


def test_offsets_past_the_blob_read_as_numpy_slices_them() -> None:
    """A damaged table (the reader refuses it at open) still gives the bisection's answer, no read past."""
    blob, _ = _table([b"a", b"b", b"c"])
    offsets = np.array([0, 1, 50, 2, 3], dtype=np.uint64)  # descending, and past the blob
    search = segment._term_search
    assert search is not None
    for needle in (b"", b"a", b"b", b"bb", b"c", b"d"):
        want = segment._bisect_terms(blob, offsets, offsets.shape[0] - 1, needle)
        assert search(blob, offsets, needle) == want


def test_a_reader_finds_the_same_terms_and_prefixes_with_and_without_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    words = ["graph", "graphs", "gr\u00e4ph", "rank", "ranking", "ranked", "zeta", "\u00e9t\u00e9"]
    with Index.create(tmp_path / "index", "simple") as index:
        index.add_many(Document(f"d{i}", " ".join(words[i % len(words) :])) for i in range(40))
        index.commit()
    probes = [*words, "", "g", "gra", "graphz", "r", "rankings", "\u00e9", "\ud800", "zz"]

    def answers() -> tuple[list[int], list[list[str]]]:
        with Index.open(tmp_path / "index", readonly=True) as index:
            [part] = index.snapshot().parts
            reader = part.reader
            return [reader.term_position(p) for p in probes], [reader.terms_with_prefix(p, 3) for p in probes]

    compiled = answers()
    monkeypatch.setattr(segment, "_term_search", None)
    assert answers() == compiled
    positions, _ = compiled
    assert all(position >= 0 for position in positions[: len(words)])
