"""How a compiled part is found, switched off and trusted: the one loader of :mod:`weftsearch.native`.

Every compiled part goes through the same steps: its switch
(:data:`SWITCHES`, :func:`disabled`), the lookup of its file next to this
module (:func:`library_path`), the binding of its functions, and a self-check
against the reference path (:func:`load_library`, :func:`load_extension`);
any step failing returns ``None`` and the caller runs its numpy or Python path.
:class:`Scratch` is the per-thread result buffer every ctypes call writes into.
"""

from __future__ import annotations

import ctypes
import importlib
import importlib.machinery
import os
import threading
import warnings
from collections.abc import Callable
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "BM25_SWITCH",
    "BOOLEAN_SWITCH",
    "SCAN_SWITCH",
    "ANALYSIS_SWITCH",
    "INVERSION_SWITCH",
    "SWITCHES",
    "Scratch",
    "disabled",
    "library_path",
    "load_extension",
    "load_library",
]

#: Turns the vector scan (``_scan.c``) off.
SCAN_SWITCH = "WEFTSEARCH_NO_COMPILED_SCAN"
#: Turns the BM25 top-k (``_bm25.c``) off.
BM25_SWITCH = "WEFTSEARCH_NO_COMPILED_BM25"
#: Turns the compiled conjunctions and phrases of query trees (``_boolean.c``) off.
BOOLEAN_SWITCH = "WEFTSEARCH_NO_COMPILED_BOOLEAN"
#: Turns the analyzer's compiled inner loop (``_analysis.c``) off.
ANALYSIS_SWITCH = "WEFTSEARCH_NO_COMPILED_ANALYSIS"
#: Turns the segment writer's compiled inversion (``_inversion.c``) off.
INVERSION_SWITCH = "WEFTSEARCH_NO_COMPILED_INVERSION"

#: Each compiled part's module name in this package and its switch.
SWITCHES: dict[str, str] = {
    "_scan": SCAN_SWITCH,
    "_bm25": BM25_SWITCH,
    "_boolean": BOOLEAN_SWITCH,
    "_analysis": ANALYSIS_SWITCH,
    "_inversion": INVERSION_SWITCH,
}

_HERE = Path(__file__).resolve().parent

T = TypeVar("T")


def disabled(variable: str) -> bool:
    """Whether the switch ``variable`` is set (to anything but ``""`` or ``"0"``)."""
    return os.environ.get(variable, "") not in ("", "0")


def library_path(name: str) -> Path | None:
    """The built file of compiled part ``name`` (``"_bm25"``, ...) here, or ``None`` (not built)."""
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        candidate = _HERE / f"{name}{suffix}"
        if candidate.is_file():
            return candidate
    return None


@cache
def _open(path: Path) -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(str(path))
    except OSError:
        return None


def load_library(name: str, bind: Callable[[ctypes.CDLL], T | None], agrees: Callable[[T], bool]) -> T | None:
    """Compiled part ``name`` (a C library without Python.h) bound and checked, or ``None``.

    ``None`` when its switch (:data:`SWITCHES`) is set, when it was not built,
    when ``bind`` (which takes the library's functions and sets their
    argument types) finds a function missing (``AttributeError``) or returns
    ``None``, or when ``agrees`` (the self-check: the bound functions against
    the reference path, every bit) is false. A disagreement turns the fast
    path off rather than letting results depend on which path ran.
    """
    if disabled(SWITCHES[name]):
        return None
    path = library_path(name)
    library = None if path is None else _open(path)
    if library is None:
        return None
    try:
        bound = bind(library)
    except AttributeError:  # a library built before the function existed
        return None
    if bound is None:
        return None
    return bound if _self_check_passes(name, agrees, bound) else None


def _self_check_passes(name: str, agrees: Callable[[T], bool], bound: T) -> bool:
    """Whether ``agrees(bound)`` is true; a self-check that raises is a disagreement, not an error.

    The check runs on the first query that wants the part, so an exception
    escaping it would surface from that query as if its index or arguments
    were at fault (a miscompiled part's corrupt-list code once did). The part
    is turned off instead, with a :class:`RuntimeWarning` naming it and what
    was raised (the results then come from the reference path).
    """
    try:
        return bool(agrees(bound))
    except Exception as error:  # any failure of the check means the part is unusable
        warnings.warn(
            f"weftsearch: compiled part {name} failed its self-check ({type(error).__name__}: {error});"
            " using the reference path",
            RuntimeWarning,
            stacklevel=3,
        )
        return False


def load_extension(name: str, agrees: Callable[[ModuleType], bool]) -> ModuleType | None:
    """Compiled part ``name`` (a CPython extension module of this package) imported and checked, or ``None``.

    The same steps as :func:`load_library`: its switch, its presence (an
    ``ImportError`` when it was not built) and ``agrees``, the self-check.
    """
    if disabled(SWITCHES[name]):
        return None
    try:
        module = importlib.import_module(f"{__package__}.{name}")
    except ImportError:
        return None
    return module if _self_check_passes(name, agrees, module) else None


class Scratch(threading.local):
    """Each thread's buffers for one binding's calls, grown on demand, with their addresses taken once.

    ``ids``/``scores``: the results (int64, float64) a kernel writes, room for
    :attr:`capacity`; ``stats``: five int64 counters; :meth:`query_of_width`:
    a float32 query vector. A binding keeps one module-level instance, so
    threads never share a buffer.
    """

    def __init__(self) -> None:
        self.capacity = 0
        self.ids: NDArray[np.int64] = np.empty(0, dtype=np.int64)
        self.scores: NDArray[np.float64] = np.empty(0, dtype=np.float64)
        self.ids_address = 0
        self.scores_address = 0
        self.stats = np.zeros(5, dtype=np.int64)
        self.stats_address = self.stats.ctypes.data
        self.query: NDArray[np.float32] = np.empty(0, dtype=np.float32)
        self.query_address = 0
        self.reserve(256)

    def reserve(self, results: int) -> None:
        """Room for at least ``results`` results (the buffers at least double when they grow)."""
        if results > self.capacity:
            self.capacity = max(results, 2 * self.capacity)
            self.ids = np.empty(self.capacity, dtype=np.int64)
            self.scores = np.empty(self.capacity, dtype=np.float64)
            self.ids_address = self.ids.ctypes.data
            self.scores_address = self.scores.ctypes.data

    def query_of_width(self, dim: int) -> NDArray[np.float32]:
        """A float32 buffer of ``dim`` values (its address in :attr:`query_address`)."""
        if self.query.shape[0] != dim:
            self.query = np.empty(dim, dtype=np.float32)
            self.query_address = self.query.ctypes.data
        return self.query
