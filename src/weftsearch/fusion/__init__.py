"""Fusers: merge any number of candidate streams into one ranking.

One method per module, each a small class implementing the
:class:`~weftsearch.engine.protocols.Fuser` protocol, plus a string front door
for the CLI and configuration files::

    make_fuser("rrf", k=60)              -> RRF(k=60)
    make_fuser("weighted", weights=[2, 1]) -> WeightedRRF([2, 1])
    make_fuser("score", norm="zscore")   -> ScoreFusion(norm="zscore")

A fuser never learns which scorer produced a stream: it sees ids, scores and
the key order for ties, nothing else.
"""

from __future__ import annotations

from typing import Any

from weftsearch.engine.protocols import Fuser
from weftsearch.errors import InvalidParameterError, UnknownSignalError
from weftsearch.fusion.rrf import RRF, reciprocal_rank_fusion
from weftsearch.fusion.score import ScoreFusion
from weftsearch.fusion.weighted import WeightedRRF

__all__ = ["RRF", "WeightedRRF", "ScoreFusion", "make_fuser", "FUSION_METHODS", "reciprocal_rank_fusion"]

#: Names accepted by :func:`make_fuser` (and ``--fusion`` on the command line).
FUSION_METHODS = ("rrf", "weighted", "score")


def make_fuser(method: str, **params: Any) -> Fuser:
    """Build a fuser by name: ``"rrf"``, ``"weighted"`` or ``"score"``.

    Raises:
        UnknownSignalError: an unknown method name.
        InvalidParameterError: parameters the method does not take, or bad values.

    """
    makers: dict[str, type[RRF] | type[WeightedRRF] | type[ScoreFusion]] = {
        "rrf": RRF,
        "weighted": WeightedRRF,
        "score": ScoreFusion,
    }
    if method not in makers:
        raise UnknownSignalError(f"unknown fusion method {method!r}; choose from {', '.join(FUSION_METHODS)}")
    try:
        return makers[method](**params)
    except TypeError as exc:
        raise InvalidParameterError(f"fusion {method!r}: {exc}") from None
