"""Test doubles of a sharded index's shard group: one that counts the calls made of it, and one whose
shard stops answering when told (as an unreachable Ray actor does). Shared by the distributed and the
server tests."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from weftsearch.distributed import ShardGroup, local_shards
from weftsearch.errors import ShardUnavailableError

__all__ = ["CountingGroup", "FailingGroup", "failing_factory"]


class CountingGroup:
    """Shards (any group) that count the calls made of them, by method."""

    def __init__(self, group: ShardGroup, calls: dict[str, int]) -> None:
        self._group = group
        self.calls = calls

    @property
    def names(self) -> tuple[str, ...]:
        return self._group.names

    def call(self, method: str, arguments: Mapping[int, tuple[Any, ...]], *, read: bool) -> dict[int, Any]:
        self.calls[method] = self.calls.get(method, 0) + 1
        return self._group.call(method, arguments, read=read)

    def close(self) -> None:
        self._group.close()


class FailingGroup(CountingGroup):
    """Counting shards whose shard ``failing`` (1) stops answering while ``down`` is set.

    Its calls return the :class:`ShardUnavailableError` an unreachable actor gives, naming the shard.
    """

    down = False

    def __init__(self, group: ShardGroup, calls: dict[str, int] | None = None, *, failing: int = 1) -> None:
        super().__init__(group, {} if calls is None else calls)
        self.failing = failing

    def call(self, method: str, arguments: Mapping[int, tuple[Any, ...]], *, read: bool) -> dict[int, Any]:
        results = super().call(method, arguments, read=read)
        if self.down and self.failing in results:
            name = self.names[self.failing]
            results[self.failing] = ShardUnavailableError(
                f"shard {name!r} on node test did not answer", (name,)
            )
        return results


def failing_factory(
    groups: list[FailingGroup],
) -> Callable[[Sequence[Path], Mapping[str, Any] | None, bool], ShardGroup]:
    """A ``factory`` for ``ShardedIndex.create``/``open``: local shards in a :class:`FailingGroup`,
    each group made appended to ``groups`` (so the test can set ``down``)."""

    def factory(directories: Sequence[Path], options: Mapping[str, Any] | None, readonly: bool) -> ShardGroup:
        groups.append(FailingGroup(local_shards(directories, options, readonly)))
        return groups[-1]

    return factory
