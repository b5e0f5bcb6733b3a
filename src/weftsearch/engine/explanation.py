"""Why a document scored what it did: a tree of values (Lucene's ``Explanation``, ES's ``_explain``).

:meth:`Index.explain <weftsearch.engine.index.Index.explain>` answers it for
documents of a search: the fused score at the root, one child per stream (its
rank, raw score and contribution), and under a stream the breakdown its scorer
gives when it offers one (the optional ``explain`` method of
:class:`~weftsearch.engine.protocols.Scorer`; :class:`~weftsearch.BM25Scorer`
breaks a score into its query terms: idf, tf per field, length norm). The
engine reads that method like any other optional scorer method, never by the
scorer's type.

A node's ``value`` is what its description says it is; the children of a
``"sum of:"`` node add up to it (to rounding: the breakdown recomputes each
term's part in Python floats, in the scorer's order).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["Explanation"]


@dataclass(frozen=True)
class Explanation:
    """One node of a score's explanation: a value, what it is, and what it is made of.

    Attributes:
        value: the number this node explains (a score, a weight, a count, ...).
        description: what ``value`` is, in words (``"idf, computed as ..."``).
        details: the nodes ``value`` was computed from, in the order used.

    """

    value: float
    description: str
    details: tuple[Explanation, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """Elasticsearch's shape: ``{"value", "description", "details": [...]}`` (NaN, inf: None)."""
        return {
            "value": self.value if math.isfinite(self.value) else None,
            "description": self.description,
            "details": [detail.to_dict() for detail in self.details],
        }

    def lines(self, indent: str = "  ") -> list[str]:
        """The tree as text lines, one per node, children indented under their parent (Lucene's form)."""
        out: list[str] = []
        stack: list[tuple[Explanation, int]] = [(self, 0)]
        while stack:
            node, depth = stack.pop()
            out.append(f"{indent * depth}{node.value:.6g} = {node.description}")
            stack.extend((child, depth + 1) for child in reversed(node.details))
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())
