"""Sharded copies of one corpus beside a single index, for tests that compare the two."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from weftsearch import Document, Index
from weftsearch.distributed import ShardedIndex

__all__ = ["DROP", "close_all", "reseal_record", "sharded_copies"]


def sharded_copies(
    root: Path, documents: Sequence[Document], counts: Iterable[int], **create: Any
) -> dict[int, ShardedIndex]:
    """Shard count -> a committed ``ShardedIndex`` at ``root/s<count>`` holding ``documents``."""
    sharded = {}
    for count in counts:
        index = ShardedIndex.create(root / f"s{count}", count, **create)
        index.add_many(documents, progress=False)
        index.commit()
        sharded[count] = index
    return sharded


def close_all(single: Index, sharded: dict[int, ShardedIndex]) -> None:
    """Close every sharded copy, then the single index."""
    for index in sharded.values():
        index.close()
    single.close()


def reseal_record(path: Path, **changes: Any) -> None:
    """Rewrite the sealed record (``SHARDS`` or ``SHARD``) at ``path`` with ``changes``, checksum renewed.

    A change whose value is :data:`DROP` removes the field. Imported here, not at the top, so the
    tests that use no record helper also run against code without sealed records.
    """
    from weftsearch.distributed.records import seal, unseal

    body = unseal(path.read_bytes(), path)
    for name, value in changes.items():
        if value is DROP:
            body.pop(name, None)
        else:
            body[name] = value
    path.write_bytes(seal(body))


class _Drop:
    """The type of :data:`DROP` (a stable repr, so test ids do not change between runs)."""

    def __repr__(self) -> str:
        return "DROP"


#: A :func:`reseal_record` value that removes the field.
DROP = _Drop()
