"""When segments merge: the size-tiered policy an index follows (:class:`MergePolicy`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from weftsearch.errors import InvalidParameterError

__all__ = ["MergePolicy"]


@dataclass(frozen=True, slots=True)
class MergePolicy:
    """Size-tiered merging: segments of similar size are merged ``factor`` at a time.

    A segment of n live documents sits in tier ``floor(log(n) / log(factor))``
    (tier 0 below ``factor`` documents). When some tier holds ``factor`` or
    more segments, the ``factor`` smallest of the lowest such tier are merged
    into one, which lands a tier up. Each document is therefore rewritten
    O(log_factor N) times over the life of an index, and a search touches at
    most ``(factor - 1)`` segments per tier.

    Attributes:
        factor: segments per tier before they merge (>= 2; 10 by default).

    """

    factor: int = 10

    def __post_init__(self) -> None:
        if isinstance(self.factor, bool) or not isinstance(self.factor, int) or self.factor < 2:
            raise InvalidParameterError(f"merge factor must be an integer >= 2, got {self.factor!r}")

    def tier(self, documents: int) -> int:
        """The tier of a segment with ``documents`` live documents."""
        # Integer division, not logarithms: log(1000) / log(10) is 2.9999999999999996.
        tier = 0
        while documents >= self.factor:
            documents //= self.factor
            tier += 1
        return tier

    def select(self, sizes: Sequence[int]) -> list[int]:
        """Positions of the segments to merge next (empty when none need merging)."""
        tiers: dict[int, list[int]] = {}
        for position, size in enumerate(sizes):
            tiers.setdefault(self.tier(size), []).append(position)
        for tier in sorted(tiers):
            members = tiers[tier]
            if len(members) >= self.factor:
                smallest = sorted(members, key=lambda p: (sizes[p], p))[: self.factor]
                return sorted(smallest)
        return []
