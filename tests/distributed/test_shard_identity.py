"""A sharded index's shards know their place: open refuses a shard that is not the one recorded there.

Each shard directory holds a sealed ``SHARD`` record (the sharded index's id, the shard's slot,
the shard count, the shard index's own id) and ``SHARDS`` is sealed and checked field by field,
so a copied, swapped, missing, extra or foreign shard, or an edited record, is a typed error
naming the culprit, never a silently different ranking (issue 26, item 1).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.distributed.building import DROP, reseal_record
from weftsearch import RRF, BM25Scorer, Document
from weftsearch.distributed import RECORD, ShardedIndex
from weftsearch.errors import (
    CorruptIndexError,
    FormatVersionError,
    IndexClosedError,
    IndexNotFoundError,
    IndexStorageError,
)
from weftsearch.storage.directory import IndexDirectory

WORDS = ["apple", "banana", "cherry", "damson", "elder", "fig", "grape", "hazel"]
QUERIES = ["apple banana", "cherry", "damson fig grape", "hazel apple", "elder"]


def _build(root: Path, shards: int = 2, count: int = 60) -> list[str]:
    """A committed sharded index at ``root`` (every shard at the same generation); its keys."""
    keys = [f"doc-{n:03d}" for n in range(count)]
    with ShardedIndex.create(root, shards) as sharded:
        sharded.add_many(
            [
                Document(key=key, text=" ".join(WORDS[(n * j) % 8] for j in range(1, 4 + n % 5)))
                for n, key in enumerate(keys)
            ],
            progress=False,
        )
        sharded.commit()
    return keys


def _answers(root: Path) -> list[list[tuple[str, bytes]]]:
    with ShardedIndex.open(root, readonly=True) as sharded:
        return [
            [(hit.key, hit.score.hex().encode()) for hit in sharded.search(query, 10, RRF(), BM25Scorer())]
            for query in QUERIES
        ]


@pytest.fixture
def index(tmp_path: Path) -> Path:
    root = tmp_path / "s"
    _build(root)
    return root


def test_a_valid_sharded_index_reopens_and_answers_identically(index: Path) -> None:
    """Reopened (writable and read-only), the same keys and scores to the bit, every key found."""
    before = _answers(index)
    with ShardedIndex.open(index) as writable:
        writable.commit()
    assert _answers(index) == before
    with ShardedIndex.open(index, readonly=True) as sharded:
        assert all(sharded.get(f"doc-{n:03d}").key == f"doc-{n:03d}" for n in range(60))


def test_shard_0_copied_over_shard_1_is_refused_naming_it(index: Path) -> None:
    shutil.rmtree(index / "shard-0001")
    shutil.copytree(index / "shard-0000", index / "shard-0001")
    with pytest.raises(CorruptIndexError, match=r"shard-0001: is shard-0000.*copied or swapped"):
        ShardedIndex.open(index)


def test_two_swapped_shards_are_refused_naming_the_first_out_of_place(index: Path) -> None:
    (index / "shard-0000").rename(index / "tmp")
    (index / "shard-0001").rename(index / "shard-0000")
    (index / "tmp").rename(index / "shard-0001")
    with pytest.raises(CorruptIndexError, match=r"shard-0000: is shard-0001.*copied or swapped"):
        ShardedIndex.open(index, readonly=True)


def test_a_missing_shard_is_refused_naming_it(index: Path) -> None:
    shutil.rmtree(index / "shard-0001")
    with pytest.raises(IndexNotFoundError, match="shard-0001"):
        ShardedIndex.open(index)


def test_an_extra_shard_directory_is_refused_naming_it(index: Path) -> None:
    shutil.copytree(index / "shard-0001", index / "shard-0002")
    with pytest.raises(CorruptIndexError, match=r"shard-0002: a shard directory SHARDS does not list"):
        ShardedIndex.open(index)


def test_a_shard_of_another_sharded_index_is_refused_naming_it(index: Path, tmp_path: Path) -> None:
    _build(tmp_path / "other")
    shutil.rmtree(index / "shard-0001")
    shutil.copytree(tmp_path / "other" / "shard-0001", index / "shard-0001")
    with pytest.raises(CorruptIndexError, match=r"shard-0001: is a shard of sharded index [0-9a-f]{32}, not"):
        ShardedIndex.open(index)


def test_index_files_copied_in_without_their_shard_record_are_refused(index: Path) -> None:
    """Shard 0's manifest and segments copied into shard 1, shard 1's own SHARD record kept."""
    target = index / "shard-0001"
    for entry in target.iterdir():
        if entry.name != "SHARD":
            entry.unlink()
    for entry in (index / "shard-0000").iterdir():
        if entry.name not in {"SHARD", "write.lock"}:
            shutil.copy(entry, target / entry.name)
    with pytest.raises(
        CorruptIndexError, match=r"shard-0001: holds index [0-9a-f]{32}; its SHARD record names"
    ):
        ShardedIndex.open(index)


def test_a_shard_without_or_with_a_damaged_shard_record_is_refused(index: Path) -> None:
    record = index / "shard-0001" / "SHARD"
    kept = record.read_bytes()
    record.write_bytes(kept.replace(b'"slot": 1', b'"slot": 0'))  # edited: the checksum no longer holds
    with pytest.raises(CorruptIndexError, match=r"shard-0001/SHARD: checksum mismatch"):
        ShardedIndex.open(index)
    record.write_bytes(kept)
    reseal_record(record, slot=5)  # sealed again, but no slot of a 2-shard index
    with pytest.raises(CorruptIndexError, match=r"shard-0001/SHARD: slot must be an int from 0 to 1, got 5"):
        ShardedIndex.open(index)
    record.unlink()
    with pytest.raises(CorruptIndexError, match=r"shard-0001: has no SHARD record"):
        ShardedIndex.open(index)


def test_shards_edited_to_fewer_shards_is_refused(index: Path) -> None:
    path = index / RECORD
    body = json.loads(path.read_text())["body"]
    reseal_record(
        path, shards=1, generations=body["generations"][:1], shard_ids=body["shard_ids"][:1]
    )  # checksum renewed: only the shards themselves tell
    with pytest.raises(CorruptIndexError, match="shard-0001"):
        ShardedIndex.open(index)
    shutil.rmtree(index / "shard-0001")  # without the extra directory, shard 0's record tells
    with pytest.raises(
        CorruptIndexError, match=r"shard-0000: belongs to a sharded index of 2 shards; SHARDS lists 1"
    ):
        ShardedIndex.open(index)


def test_shards_with_a_wrong_checksum_is_refused(index: Path) -> None:
    path = index / RECORD
    outer = json.loads(path.read_text())
    outer["body"]["shards"] = 1
    path.write_text(json.dumps(outer))
    with pytest.raises(CorruptIndexError, match=r"SHARDS: checksum mismatch"):
        ShardedIndex.open(index)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"cut": -1}, r"cut must be an int from 0 to \d+, got -1"),
        ({"cut": 10**30}, r"cut must be an int from 0 to \d+, got 10{30}"),
        ({"cut": "3"}, r"cut must be an int .* got '3'"),
        ({"cut": True}, r"cut must be an int .* got True"),
        ({"cut": 1.0}, r"cut must be an int .* got 1.0"),
        ({"index_id": None}, r"index_id is not 32 lowercase hex digits: None"),
        ({"index_id": DROP}, r"fields missing \['index_id'\]"),
        ({"index_id": "ABCDEF0123456789ABCDEF0123456789"}, "index_id is not 32 lowercase hex digits"),
        ({"shards": 0}, r"shards must be an int from 1 to 4096, got 0"),
        ({"shards": "2"}, r"shards must be an int .* got '2'"),
        ({"generations": [1]}, r"generations must be a list of 2 entries"),
        ({"generations": {"0": 1}}, r"generations must be a list of 2 entries"),
        ({"generations": [-1, 1]}, r"generation must be an int from 0 to \d+, got -1"),
        ({"generations": [1.5, 1]}, r"generation must be an int .* got 1.5"),
        ({"shard_ids": None}, r"shard_ids must be a list of 2 entries"),
        ({"shard_ids": ["x", "y"]}, r"shard_ids\[0\] is not 32 lowercase hex digits: 'x'"),
        ({"hash": "md5"}, r"keys hashed by 'md5'"),
        ({"surprise": 1}, r"fields missing \[\], unknown \['surprise'\]"),
        ({"format": "weft-search-index"}, r"not a weft-search-sharded record"),
    ],
    ids=lambda value: json.dumps(value, default=str)[:40] if isinstance(value, dict) else None,
)
def test_every_field_of_shards_is_checked(index: Path, changes: dict[str, Any], message: str) -> None:
    reseal_record(index / RECORD, **changes)
    with pytest.raises(CorruptIndexError, match=rf"SHARDS: {message}"):
        ShardedIndex.open(index)


def test_two_shards_with_one_index_id_in_shards_are_refused(index: Path) -> None:
    path = index / RECORD
    first = json.loads(path.read_text())["body"]["shard_ids"][0]
    reseal_record(path, shard_ids=[first, first])
    with pytest.raises(CorruptIndexError, match="two shards have the same index id"):
        ShardedIndex.open(index)


@pytest.mark.parametrize(
    "damage",
    [
        lambda raw: raw[:-5],
        lambda raw: b"[]",
        lambda raw: b'{"body": [], "crc32c": 0}',
        lambda raw: b"\xff\xfe",
        lambda raw: b"[" * 100_000,
    ],
    ids=["truncated", "list", "body-not-object", "not-utf8", "nested"],
)
def test_a_damaged_shards_is_corrupt(index: Path, damage: Callable[[bytes], bytes]) -> None:
    path = index / RECORD
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(CorruptIndexError, match="SHARDS"):
        ShardedIndex.open(index)


def test_a_version_1_record_says_to_rebuild(index: Path) -> None:
    path = index / RECORD
    body = json.loads(path.read_text())["body"]
    old = {key: body[key] for key in ("format", "hash", "shards", "cut", "generations", "index_id")}
    path.write_text(json.dumps({**old, "version": 1}))
    with pytest.raises(FormatVersionError, match=r"version 1 .* rebuild the sharded index"):
        ShardedIndex.open(index)


def test_every_refusal_is_an_index_storage_error(index: Path) -> None:
    """One ``except IndexStorageError`` catches them all (the CLI and server map it to one line)."""
    shutil.copytree(index / "shard-0001", index / "shard-0007")
    with pytest.raises(IndexStorageError):
        ShardedIndex.open(index)


def _tree_bytes(root: Path) -> dict[str, bytes]:
    files = sorted(path for path in root.rglob("*") if path.is_file())
    return {str(path.relative_to(root)): path.read_bytes() for path in files}


def test_a_sharded_build_with_a_fixed_id_is_byte_identical_and_its_shard_ids_differ(tmp_path: Path) -> None:
    """The shards derive their ids from the given one: same input, same bytes; no two shards share an id."""
    fixed = "0123456789abcdef0123456789abcdef"
    trees = []
    for name in ("a", "b"):
        with ShardedIndex.create(tmp_path / name, 3, index_id=fixed) as sharded:
            sharded.add_many([Document(key=f"k{n}", text=WORDS[n % 8]) for n in range(30)], progress=False)
            sharded.commit()
        trees.append(_tree_bytes(tmp_path / name))
    assert trees[0] == trees[1]
    with ShardedIndex.open(tmp_path / "a", readonly=True) as sharded:
        assert sharded.index_id == fixed
    ids = {IndexDirectory(tmp_path / "a" / f"shard-{n:04d}").read_manifest().index_id for n in range(3)}
    assert len(ids) == 3 and fixed not in ids


@pytest.mark.parametrize("name", [RECORD, "shard-0001/SHARD"])
def test_a_record_that_is_a_fifo_or_a_link_is_refused_not_waited_on(index: Path, name: str) -> None:
    """Item 5's class: the sharded records are read as regular files only (a FIFO hung the open)."""
    target = index / name
    makers: list[Callable[[], None]] = [lambda: os.mkfifo(target), lambda: target.symlink_to("/dev/zero")]
    for make in makers:
        target.unlink()
        make()
        with pytest.raises(CorruptIndexError, match=r"not a regular file|link|FIFO"):
            ShardedIndex.open(index, readonly=True)


def test_a_closed_sharded_index_refuses_every_call_as_a_closed_index_does(index: Path) -> None:
    """``IndexClosedError`` (the server's 503), not ``InvalidParameterError`` (a 400), as :class:`Index`."""
    sharded = ShardedIndex.open(index)
    sharded.close()
    calls: list[Callable[[], object]] = [
        lambda: sharded.search("apple", 5, RRF(), BM25Scorer()),
        lambda: sharded.search_many(["apple"], 5, RRF(), BM25Scorer()),
        lambda: sharded.get("doc-000"),
        sharded.stats,
        sharded.shard_stats,
        sharded.refresh,
        sharded.commit,
        lambda: sharded.add_many([Document(key="new", text="apple")]),
        lambda: sharded.delete("doc-000"),
    ]
    for call in calls:
        with pytest.raises(IndexClosedError, match="closed"):
            call()
