"""The one loader of compiled code (weftsearch.native.loader): lookup, switches, self-check, scratch."""

from __future__ import annotations

import ast
import threading
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from weftsearch.native import loader

REPO = Path(__file__).resolve().parents[2]


def _setup_extensions() -> list[str]:
    """The module names of setup.py's ``Extension`` calls (their first argument)."""
    tree = ast.parse((REPO / "setup.py").read_text(encoding="utf-8"))
    return [
        ast.literal_eval(node.args[0])
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Extension"
    ]


def test_every_part_setup_py_builds_has_a_switch_and_lives_in_native() -> None:
    names = _setup_extensions()
    assert sorted(names) == sorted(f"weftsearch.native.{name}" for name in loader.SWITCHES)
    assert set(loader.SWITCHES.values()) == {
        "WEFTSEARCH_NO_COMPILED_SCAN",
        "WEFTSEARCH_NO_COMPILED_BM25",
        "WEFTSEARCH_NO_COMPILED_BOOLEAN",
        "WEFTSEARCH_NO_COMPILED_ANALYSIS",
        "WEFTSEARCH_NO_COMPILED_INVERSION",
    }


@pytest.mark.parametrize("name", sorted(loader.SWITCHES))
def test_every_part_is_built_here(name: str) -> None:
    # CI builds with a C compiler: a part that silently failed to build would hide behind its fallback.
    assert loader.library_path(name) is not None


@pytest.mark.parametrize(("value", "off"), [("", False), ("0", False), ("1", True), ("yes", True)])
def test_a_switch_is_off_unless_set_to_something_but_0(
    monkeypatch: pytest.MonkeyPatch, value: str, off: bool
) -> None:
    monkeypatch.setenv(loader.ANALYSIS_SWITCH, value)
    assert loader.disabled(loader.ANALYSIS_SWITCH) is off
    assert (loader.load_extension("_analysis", lambda module: True) is None) is off


def test_the_analysis_switch_and_self_check_turn_the_loop_off(monkeypatch: pytest.MonkeyPatch) -> None:
    found = loader.load_extension("_analysis", lambda module: True)
    assert isinstance(found, ModuleType) and found.__name__ == "weftsearch.native._analysis"
    assert loader.load_extension("_analysis", lambda module: False) is None  # a disagreement: off
    monkeypatch.setenv(loader.ANALYSIS_SWITCH, "1")
    assert loader.load_extension("_analysis", lambda module: True) is None


def test_a_library_is_used_only_if_bound_and_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    def bind(library: object) -> object:
        return library.weft_bm25_blocks  # type: ignore[attr-defined]

    assert loader.load_library("_bm25", bind, lambda bound: True) is not None
    assert loader.load_library("_bm25", bind, lambda bound: False) is None
    assert loader.load_library("_bm25", lambda library: None, lambda bound: True) is None

    def missing(library: object) -> object:
        return library.no_such_function  # type: ignore[attr-defined]

    assert loader.load_library("_bm25", missing, lambda bound: True) is None
    monkeypatch.setenv(loader.BM25_SWITCH, "1")
    assert loader.load_library("_bm25", bind, lambda bound: True) is None


def test_scratch_grows_and_is_per_thread() -> None:
    scratch = loader.Scratch()
    assert scratch.capacity == 256 and scratch.ids_address == scratch.ids.ctypes.data
    scratch.reserve(300)
    assert scratch.capacity == 512 and scratch.scores.shape == (512,)
    assert scratch.scores_address == scratch.scores.ctypes.data
    scratch.reserve(10)
    assert scratch.capacity == 512
    query = scratch.query_of_width(7)
    assert query.dtype == np.float32 and query.shape == (7,) and scratch.query_address == query.ctypes.data
    seen: list[int] = []
    thread = threading.Thread(target=lambda: seen.append(scratch.capacity))
    thread.start()
    thread.join()
    assert seen == [256]  # another thread starts with its own buffers


def test_a_self_check_that_raises_turns_the_part_off_with_a_warning() -> None:
    # A check that raised once escaped from the first query wanting the part, dressed as that
    # query's error (a corrupt-list code from the check's own data): it is a disagreement.
    def bind(library: object) -> object:
        return library.weft_bm25_blocks  # type: ignore[attr-defined]

    def raising(bound: object) -> bool:
        raise ValueError("the check's own data")

    message = r"_bm25 failed its self-check \(ValueError: the check's own data\)"
    with pytest.warns(RuntimeWarning, match=message):
        assert loader.load_library("_bm25", bind, raising) is None
    with pytest.warns(RuntimeWarning, match="_analysis failed its self-check"):
        assert loader.load_extension("_analysis", raising) is None
