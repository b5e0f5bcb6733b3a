"""Which shard a document belongs to: a stable hash of its key.

Python's ``hash`` of a string is salted per process (``PYTHONHASHSEED``), so it
would send a key to another shard in every process; the shard of a key must
never change, since a replaced or deleted key has to reach the shard that holds
it. The hash is BLAKE2b with an 8-byte digest of the key's UTF-8 bytes, read
big-endian, modulo the shard count: the same in every process, machine and
Python version, and uniform enough that shards differ in size by a few
percent at thousands of documents.
"""

from __future__ import annotations

import hashlib

from weftsearch.errors import InvalidParameterError

__all__ = ["HASH_NAME", "MAX_SHARDS", "shard_of"]

#: The hash's name in the sharded commit record (a record of another hash is refused).
HASH_NAME = "blake2b-64"

#: The most shards an index may have (a larger count is a mistake).
MAX_SHARDS = 4096


def check_shards(shards: object) -> int:
    """``shards`` as an int from 1 to :data:`MAX_SHARDS`, else :class:`InvalidParameterError`."""
    if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= MAX_SHARDS:
        raise InvalidParameterError(f"shards must be an int from 1 to {MAX_SHARDS}, got {shards!r}")
    return shards


def shard_of(key: str, shards: int) -> int:
    """The shard (``0 .. shards - 1``) that holds ``key``. O(len(key))."""
    digest = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % shards
