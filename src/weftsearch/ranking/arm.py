"""An arm: one ranking, named: the scorers whose streams are fused, the fuser and the depth.

What the evaluation harness measures, what a ranking profile stores, what the
server and ``weft-search search --rank`` run: all are an :class:`Arm`, built
from the spec text of :mod:`weftsearch.ranking.specs`. An arm of one scorer is
not fused (its run is the scorer's own stream with its own scores; see
:mod:`weftsearch.eval.runs`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from weftsearch.engine.filters import Filter, as_filter
from weftsearch.engine.protocols import Fuser, Scorer
from weftsearch.engine.stream import check_k
from weftsearch.errors import InvalidParameterError

__all__ = ["ARM_NAME_PATTERN", "PASS_THROUGH", "Arm"]

#: What :meth:`Arm.describe`'s fuser entry and the reports say of a one-scorer arm's fusion.
PASS_THROUGH = "none: one stream passes through with its own scores"

#: Arm names become file names (``<arm>.trec``): letters, digits, ``_ . + -``.
ARM_NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+\-]{0,63}")


@dataclass(frozen=True, eq=False)
class Arm:
    """One system under evaluation.

    Attributes:
        name: a label, also the TREC run tag and file name; see
            :data:`ARM_NAME_PATTERN`.
        scorers: the scorers whose streams are fused, in this order.
        fuser: merges the streams.
        depth: candidates asked of each scorer per query (the over-fetch
            depth); at least the run length ``k`` it is run with.
        notes: free text for reports (why the arm exists).
        filter: which documents the arm may return (a
            :class:`~weftsearch.engine.filters.Filter` or its string form);
            it replaces each query's own filter, so every scorer applies it
            before its top k, as in :meth:`Index.search`. ``None``: no filter.

    Raises:
        InvalidParameterError: a bad name, no scorer, an object that does not
            implement the protocol, or a depth that is not a positive integer.

    """

    name: str
    scorers: tuple[Scorer, ...]
    fuser: Fuser
    depth: int = 100
    notes: str = ""
    filter: Filter | str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or ARM_NAME_PATTERN.fullmatch(self.name) is None:
            raise InvalidParameterError(
                f"arm name {self.name!r} must match {ARM_NAME_PATTERN.pattern} (it becomes a file name)"
            )
        if isinstance(self.scorers, Scorer) or not isinstance(self.scorers, (tuple, list)):
            raise InvalidParameterError(
                f"arm {self.name!r}: scorers must be a tuple or list, got {type(self.scorers).__name__}"
            )
        object.__setattr__(self, "scorers", tuple(self.scorers))
        if not self.scorers:
            raise InvalidParameterError(f"arm {self.name!r} needs at least one scorer")
        for scorer in self.scorers:
            if not isinstance(scorer, Scorer):
                raise InvalidParameterError(f"arm {self.name!r}: {scorer!r} is not a Scorer")
        if not isinstance(self.fuser, Fuser):
            raise InvalidParameterError(f"arm {self.name!r}: {self.fuser!r} is not a Fuser")
        object.__setattr__(self, "depth", check_k(self.depth, f"arm {self.name!r} depth"))
        object.__setattr__(self, "filter", as_filter(self.filter))

    def describe(self) -> dict[str, Any]:
        """Every parameter of the arm, as a JSON-ready record (reprs of its parts).

        A one-scorer arm's fuser is recorded as :data:`PASS_THROUGH`: its
        stream is not fused (see the module docstring).
        """
        fuser = (
            {"name": "none", "repr": PASS_THROUGH}
            if len(self.scorers) == 1
            else {"name": str(self.fuser.name), "repr": repr(self.fuser)}
        )
        return {
            "name": self.name,
            "scorers": [{"name": str(s.name), "repr": repr(s)} for s in self.scorers],
            "fuser": fuser,
            "depth": self.depth,
            "notes": self.notes,
            **({} if self.filter is None else {"filter": str(self.filter)}),
        }
