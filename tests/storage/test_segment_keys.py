"""A segment's key table read key by key (``keys_at``) refuses what the whole-table read
(``keys``) refuses: a repeated or out-of-order key, and a key holding NUL, which numpy's ``str_``
would shorten into another key (issue 13 item 11)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.storage.test_fuzz import SEGMENT_SECTIONS
from weftsearch.errors import CorruptIndexError
from weftsearch.storage.codec import encode_sections
from weftsearch.storage.segment import SegmentReader

#: The valid segment's five keys, in order: doc-a, doc-b, doc-c, doc-d, é-key.
VALID_KEYS = ["doc-a", "doc-b", "doc-c", "doc-d", "é-key"]


def segment_with_keys(keys: list[str]) -> SegmentReader:
    """The fuzz suite's valid segment with its key table replaced (every checksum recomputed)."""
    sections = {name: np.array(array) for name, array in SEGMENT_SECTIONS.items()}
    raw = [key.encode("utf-8") for key in keys]
    offsets = np.zeros(len(raw) + 1, dtype=np.uint64)
    np.cumsum([len(key) for key in raw], out=offsets[1:])
    sections["keys.blob"] = np.frombuffer(b"".join(raw), dtype=np.uint8).copy()
    sections["keys.offsets"] = offsets
    return SegmentReader(Path("<crafted>"), encode_sections(sections))


def test_the_valid_table_reads_either_way() -> None:
    reader = segment_with_keys(VALID_KEYS)
    assert reader.keys_at(np.arange(5, dtype=np.int64)) == VALID_KEYS
    assert reader.keys_at(np.array([4, 0, 2], dtype=np.int64)) == ["é-key", "doc-a", "doc-c"]
    assert reader.keys().tolist() == VALID_KEYS
    assert reader.keys_at(np.array([3], dtype=np.int64)) == ["doc-d"]  # from the decoded table now


@pytest.mark.parametrize(
    ("keys", "asked"),
    [
        (["doc-a", "doc-b", "doc-b", "doc-d", "é-key"], [1]),  # a repeated key
        (["doc-a", "doc-b", "doc-b", "doc-d", "é-key"], [2]),
        (["doc-a", "doc-a", "doc-c", "doc-d", "é-key"], [0]),
        (["doc-a", "doc-b", "doc-c", "doc-d", "doc-d"], [4]),
        (["doc-b", "doc-a", "doc-c", "doc-d", "é-key"], [0]),  # out of order
        (["doc-a", "doc-b", "doc-b\x00", "doc-d", "é-key"], [2]),  # NUL: numpy reads "doc-b"
        (["doc-a", "doc-b", "doc-c\x00", "doc-d", "é-key"], [2]),
    ],
)
def test_keys_at_refuses_what_keys_refuses(keys: list[str], asked: list[int]) -> None:
    with pytest.raises(CorruptIndexError):
        segment_with_keys(keys).keys_at(np.array(asked, dtype=np.int64))
    with pytest.raises(CorruptIndexError):
        segment_with_keys(keys).keys()
