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


def test_keys_at_checks_the_offsets_once_per_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 14 item 6: the O(n) offsets check ran on every lookup; now once per reader, so a
    lookup costs O(k). Counted, not timed."""
    import weftsearch.storage.segment as segment

    calls: list[str] = []
    real = segment._check_offsets

    def counting(offsets: np.ndarray, count: int, limit: int, what: str, path: Path) -> None:
        calls.append(what)
        real(offsets, count, limit, what, path)

    monkeypatch.setattr(segment, "_check_offsets", counting)
    reader = segment_with_keys(VALID_KEYS)
    for position in range(5):
        assert reader.keys_at(np.array([position], dtype=np.int64)) == [VALID_KEYS[position]]
    assert calls.count("keys") == 1
    # Scrub (verify) checks the table afresh, whatever the reader has seen.
    assert reader.verify() == []
    assert calls.count("keys") >= 2


def test_bad_key_offsets_are_refused_at_first_use_and_by_verify() -> None:
    sections = {name: np.array(array) for name, array in SEGMENT_SECTIONS.items()}
    offsets = sections["keys.offsets"].copy()
    offsets[2], offsets[3] = offsets[3], offsets[2]  # decreasing: inconsistent
    sections["keys.offsets"] = offsets
    reader = SegmentReader(Path("<crafted>"), encode_sections(sections))
    with pytest.raises(CorruptIndexError, match="offsets are inconsistent"):
        reader.keys_at(np.array([0], dtype=np.int64))
    with pytest.raises(CorruptIndexError, match="offsets are inconsistent"):
        reader.keys_at(np.array([4], dtype=np.int64))  # a failed check is not remembered as passed
    assert any("offsets are inconsistent" in problem for problem in reader.verify())


def test_each_key_is_checked_once_and_a_refused_key_stays_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    reader = segment_with_keys(VALID_KEYS)
    checked: list[list[int]] = []
    real = SegmentReader._check_keys_at

    def counting(self: SegmentReader, blob: np.ndarray, offsets: np.ndarray, positions: np.ndarray) -> None:
        checked.append(positions.tolist())
        real(self, blob, offsets, positions)

    monkeypatch.setattr(SegmentReader, "_check_keys_at", counting)
    assert reader.keys_at(np.array([3, 1], dtype=np.int64)) == ["doc-d", "doc-b"]
    assert reader.keys_at(np.array([1, 4, 3], dtype=np.int64)) == ["doc-b", "é-key", "doc-d"]
    assert checked == [[3, 1], [4]]
    bad = segment_with_keys(["doc-a", "doc-b", "doc-b", "doc-d", "é-key"])
    for _ in range(2):
        with pytest.raises(CorruptIndexError):
            bad.keys_at(np.array([0, 2], dtype=np.int64))
    assert bad.keys_at(np.array([0], dtype=np.int64)) == ["doc-a"]  # its neighbours are sound


@pytest.mark.parametrize("count", [1, 31, 32, 80])
def test_keys_at_decodes_many_keys_at_once_as_one_by_one(count: int) -> None:
    """Both decoding paths (key by key below 32 keys, one gather from 32) give the table's keys,
    non-ASCII and one-character keys included, in the order asked, the last key of the table too."""
    from weftsearch import Document, Index

    keys = sorted({f"k{n:03d}" for n in range(60)} | {"é", "日本語キー", "z", "a", "ß-key", "🙂"})
    index = Index(analyzer="simple")
    index.add_many(Document(key, "word") for key in keys)
    reader = index.snapshot().parts[0].reader
    rng = np.random.default_rng(count)
    positions = rng.choice(len(keys), size=min(count, len(keys)), replace=False).astype(np.int64)
    positions[0] = len(keys) - 1
    expected = [keys[p] for p in positions.tolist()]
    assert reader.keys_at(positions) == expected
    assert reader.keys_at(positions) == expected  # checked keys: the fast path
    assert reader.keys_at(np.array([], dtype=np.int64)) == []
