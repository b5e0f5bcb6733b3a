"""Sharded copies of one corpus beside a single index, for tests that compare the two."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from weftsearch import Document, Index
from weftsearch.distributed import ShardedIndex

__all__ = ["close_all", "sharded_copies"]


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
