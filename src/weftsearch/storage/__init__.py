"""Storage: committed states of an index on disk. Knows documents and bytes, never scoring."""

from __future__ import annotations

from weftsearch.storage.interim import (
    FORMAT_NAME,
    FORMAT_VERSION,
    MANIFEST,
    IndexMeta,
    read_index,
    write_index,
)

__all__ = ["IndexMeta", "write_index", "read_index", "MANIFEST", "FORMAT_NAME", "FORMAT_VERSION"]
