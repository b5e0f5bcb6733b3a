"""Scale-out: one index split over shards by key, searched with the single index's results.

:class:`ShardedIndex` routes documents to shards by a stable hash of the key
(:func:`shard_of`), records which shard generations form a consistent cut, and
searches in phases (collection statistics, per-shard streams scored with them,
one fusion at the coordinator), so rankings and scores equal the single
index's to the bit. Shards run in this process (:func:`local_shards`) or as Ray
actors (:mod:`weftsearch.distributed.ray_shard`, the ``ray`` extra). This
package sits above the library and adds no scoring of its own; see
docs/SCALING.md.
"""

from __future__ import annotations

from .shard import CutRef, LocalShard, ShardStatistics
from .sharded import RECORD, LocalShards, ShardedIndex, ShardedResults, ShardGroup, local_shards
from .sharding import HASH_NAME, MAX_SHARDS, shard_of

__all__ = [
    "HASH_NAME",
    "MAX_SHARDS",
    "RECORD",
    "CutRef",
    "LocalShard",
    "LocalShards",
    "ShardGroup",
    "ShardStatistics",
    "ShardedIndex",
    "ShardedResults",
    "local_shards",
    "shard_of",
]
