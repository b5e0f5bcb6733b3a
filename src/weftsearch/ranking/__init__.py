"""Rankings: the one language every part of weft-search ranks with.

A ranking is written as spec text (``rrf(bm25, vector, k=60)@100``, grammar in
:mod:`weftsearch.ranking.specs`), built into an :class:`~weftsearch.ranking.arm.Arm`
(scorers, a fuser, a depth) and, when named and kept, stored as a versioned
profile inside an index directory (:mod:`weftsearch.ranking.profiles`). The
evaluation harness measures arms, ``weft-search eval --save-profile`` saves
one, the server and ``weft-search search --rank/--profile`` run them: all
through :func:`build_arm` and :func:`parse_arm`, so what was measured is what
runs.

This package sits below ``eval``, ``server``, ``distributed`` and ``cli`` and
above the engine, the scorers and the fusers; it needs no web framework.
"""

from __future__ import annotations

from weftsearch.ranking.arm import ARM_NAME_PATTERN, PASS_THROUGH, Arm
from weftsearch.ranking.profiles import (
    PROFILE_FORMAT,
    PROFILE_NAME,
    Profile,
    ProfileNotFoundError,
    ProfileProvenance,
    ProfileStore,
    build_arm,
    check_profile_name,
    spec_of_fuser,
)
from weftsearch.ranking.specs import ArmBuilder, ArmSpec, Expr, parse_arm, register_scorer

__all__ = [
    "ARM_NAME_PATTERN",
    "PASS_THROUGH",
    "PROFILE_FORMAT",
    "PROFILE_NAME",
    "Arm",
    "ArmBuilder",
    "ArmSpec",
    "Expr",
    "Profile",
    "ProfileNotFoundError",
    "ProfileProvenance",
    "ProfileStore",
    "build_arm",
    "check_profile_name",
    "parse_arm",
    "register_scorer",
    "spec_of_fuser",
]
