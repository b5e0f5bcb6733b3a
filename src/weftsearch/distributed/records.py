"""The sharded index's two small records: ``SHARDS`` (the cut) and each shard's ``SHARD`` (its place).

Both are sealed as the single index's manifest is: ``{"body": {...}, "crc32c": N}``, N the
CRC32C of the body serialised with sorted keys and ``(",", ":")`` separators, so a damaged
or hand-edited record is refused rather than read (docs/FORMAT.md, "A sharded index").
Every field is checked for its type and range; a record that fails is
:class:`~weftsearch.errors.CorruptIndexError` naming the file and the field.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weftsearch.errors import CorruptIndexError
from weftsearch.storage.codec import checksum
from weftsearch.storage.directory import is_index_id
from weftsearch.storage.files import read_regular

from .sharding import MAX_SHARDS

__all__ = ["SHARD_RECORD", "ShardBinding", "seal", "unseal", "read_binding", "encode_binding"]

#: The file in each shard's index directory that says which sharded index and slot it belongs to.
SHARD_RECORD = "SHARD"
_SHARD_FORMAT = "weft-search-shard"
_SHARD_VERSION = 1
#: Generations and cut numbers are counters; anything at or above this is impossible.
COUNTER_LIMIT = 1 << 62


def _canonical(body: Mapping[str, Any]) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")


def seal(body: Mapping[str, Any]) -> bytes:
    """``body`` with the CRC32C of its canonical JSON, as a file's bytes."""
    return (
        json.dumps({"body": body, "crc32c": checksum(_canonical(body))}, sort_keys=True, indent=1) + "\n"
    ).encode()


def unseal(raw: bytes, where: Path) -> dict[str, Any]:
    """The body of a sealed record, its checksum checked.

    Raises:
        CorruptIndexError: not JSON, not ``{"body": {...}, "crc32c": N}``, or the checksum differs.

    """
    try:
        outer = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as error:
        raise CorruptIndexError(f"{where}: not JSON ({error})") from None
    if not isinstance(outer, dict) or set(outer) != {"body", "crc32c"} or not isinstance(outer["body"], dict):
        raise CorruptIndexError(f"{where}: not a sealed record ({{'body': ..., 'crc32c': ...}})")
    if checksum(_canonical(outer["body"])) != outer["crc32c"]:
        raise CorruptIndexError(f"{where}: checksum mismatch (the record was damaged or edited)")
    return outer["body"]


def integer(body: Mapping[str, Any], name: str, low: int, high: int, where: Path) -> int:
    """``body[name]``, which must be an int (not a bool) with ``low <= value < high``."""
    value = body.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value < high:
        raise CorruptIndexError(f"{where}: {name} must be an int from {low} to {high - 1}, got {value!r}")
    return value


def identifier(body: Mapping[str, Any], name: str, where: Path) -> str:
    """``body[name]``, which must be an index id (32 lowercase hex digits)."""
    value = body.get(name)
    if not is_index_id(value):
        raise CorruptIndexError(f"{where}: {name} is not 32 lowercase hex digits: {value!r}")
    assert isinstance(value, str)  # is_index_id says so
    return value


def exact_keys(body: Mapping[str, Any], keys: frozenset[str], where: Path) -> None:
    """Refuse a body with a missing or an unknown field (an unknown one would be silently ignored)."""
    if set(body) != keys:
        missing, unknown = sorted(keys - set(body)), sorted(set(body) - keys)
        raise CorruptIndexError(f"{where}: fields missing {missing}, unknown {unknown}")


@dataclass(frozen=True, slots=True)
class ShardBinding:
    """What a shard's ``SHARD`` record says: whose shard it is and where it belongs.

    Attributes:
        sharded_id: the id of the sharded index it belongs to (its ``SHARDS`` record's ``index_id``).
        slot: its shard number, 0 to ``shards - 1`` (it must sit in ``shard-{slot:04d}``).
        shards: the sharded index's shard count.
        index_id: the shard's own index id (its manifest's), so index files copied in from
            another shard without this record are refused too.

    """

    sharded_id: str
    slot: int
    shards: int
    index_id: str


_BINDING_KEYS = frozenset({"format", "version", "sharded_index_id", "slot", "shards", "index_id"})


def encode_binding(binding: ShardBinding) -> bytes:
    """The ``SHARD`` record's bytes for ``binding``."""
    return seal(
        {
            "format": _SHARD_FORMAT,
            "version": _SHARD_VERSION,
            "sharded_index_id": binding.sharded_id,
            "slot": binding.slot,
            "shards": binding.shards,
            "index_id": binding.index_id,
        }
    )


def read_binding(directory: Path) -> ShardBinding | None:
    """The ``SHARD`` record of the shard index at ``directory``, checked; ``None`` when it has none.

    Raises:
        CorruptIndexError: the record is damaged or holds an impossible value (named).

    """
    where = directory / SHARD_RECORD
    try:
        raw = read_regular(where)  # a FIFO, device or link is refused, never waited on
    except FileNotFoundError:
        return None
    except OSError as error:
        raise CorruptIndexError(f"{where}: cannot be read ({error})") from None
    body = unseal(raw, where)
    if body.get("format") != _SHARD_FORMAT or body.get("version") != _SHARD_VERSION:
        raise CorruptIndexError(f"{where}: not a version {_SHARD_VERSION} {_SHARD_FORMAT} record")
    exact_keys(body, _BINDING_KEYS, where)
    shards = integer(body, "shards", 1, MAX_SHARDS + 1, where)
    return ShardBinding(
        sharded_id=identifier(body, "sharded_index_id", where),
        slot=integer(body, "slot", 0, shards, where),
        shards=shards,
        index_id=identifier(body, "index_id", where),
    )
