"""The argparse value types every command shares (``weftsearch._argtypes``), and that no command keeps its
own copy (issue 18: ``_positive_int`` was defined in cli, embed, bench load, recall; ``--workers`` had a
fourth parser and ``eval`` a fifth)."""

from __future__ import annotations

import argparse
import ast
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from weftsearch._argtypes import (
    bounded_int,
    int_at_least,
    non_negative_float,
    port,
    positive_float,
    positive_int,
    positive_list,
)
from weftsearch.cli import build_parser

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "weftsearch"


@pytest.mark.parametrize(
    ("parse", "good", "value"),
    [
        (positive_int, "3", 3),
        (bounded_int(10), "10", 10),
        (int_at_least(0), "0", 0),
        (non_negative_float, "0", 0.0),
        (positive_float, "0.5", 0.5),
        (port, "65535", 65535),
        (positive_list(float, "0.5,1"), "0.125, 0.5,,1", [0.125, 0.5, 1.0]),
        (positive_list(int, "1,4,20"), "1,4,20", [1, 4, 20]),
    ],
)
def test_each_type_reads_a_good_value(parse: Callable[[str], Any], good: str, value: Any) -> None:
    assert parse(good) == value


@pytest.mark.parametrize(
    ("parse", "bad", "message"),
    [
        (positive_int, "0", "expected a positive integer, got '0'"),
        (positive_int, "-2", "expected a positive integer, got '-2'"),
        (positive_int, "two", "expected a positive integer, got 'two'"),
        (bounded_int(10, "(the most)"), "11", "expected at most 10 (the most), got '11'"),
        (bounded_int(10_000), "0", "expected a positive integer, got '0'"),
        (bounded_int(64, "threads"), "65", "expected at most 64 threads, got '65'"),
        (int_at_least(2), "1", "expected an integer >= 2, got '1'"),
        (int_at_least(0), "x", "expected an integer >= 0, got 'x'"),
        (non_negative_float, "x", "expected a finite number >= 0, got 'x'"),
        (non_negative_float, "-1", "expected a finite number >= 0, got '-1'"),
        (non_negative_float, "inf", "expected a finite number >= 0, got 'inf'"),
        (positive_float, "0", "expected a positive number, got '0'"),
        (positive_float, "nan", "expected a positive number, got 'nan'"),
        (port, "0", "a port is a number from 1 to 65535, got '0'"),
        (port, "http", "a port is a number from 1 to 65535, got 'http'"),
        (positive_list(float, "0.5,1"), "0,1", "expected positive numbers like 0.5,1, got '0,1'"),
        (positive_list(float, "0.5,1"), ",", "expected positive numbers like 0.5,1, got ','"),
        (positive_list(int, "1,4,20"), "1,2.5", "expected positive integers like 1,4,20, got '1,2.5'"),
    ],
)
def test_each_type_refuses_in_words(parse: Callable[[str], Any], bad: str, message: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as caught:
        parse(bad)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["search", "q", "--index", "idx", "-k", "0"], "argument -k: expected a positive integer, got '0'"),
        (
            ["serve", "--index", "idx", "--workers", "0"],
            "argument --workers: expected a positive integer, got '0'",
        ),
        (["serve", "--index", "idx", "--port", "0"], "argument --port: a port is a number from 1 to 65535"),
        (["bench", "load", "--synthetic", "0"], "argument --synthetic: expected a positive integer, got '0'"),
        (["bench", "load", "--synthetic", "9", "--rungs", "0"], "expected positive numbers like 0.125,0.5,1"),
        (
            ["embed", "--texts", "t", "--out", "o", "--threads", "0"],
            "argument --threads: expected a positive",
        ),
    ],
)
def test_every_command_refuses_in_the_same_words(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        build_parser().parse_args(argv)
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert message in err
    # Issue 26 item 16: a refused value is one line, without argparse's usage block.
    assert len(err.strip().splitlines()) == 1 and "usage:" not in err, err


def _own_argument_types(path: Path) -> list[str]:
    """Functions in ``path`` that raise ``argparse.ArgumentTypeError`` about a number: an argparse type
    of their own for a count, rate or port, which ``_argtypes`` already has."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.FunctionDef):
            continue
        for inner in ast.walk(node):
            if (
                isinstance(inner, ast.Raise)
                and isinstance(inner.exc, ast.Call)
                and isinstance(inner.exc.func, ast.Attribute)
                and inner.exc.func.attr == "ArgumentTypeError"
            ):
                text = ast.unparse(inner.exc).lower()
                if any(word in text for word in ("integer", "number", "port", "fraction")):
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}")
                    break
    return found


def test_no_command_keeps_its_own_number_parser() -> None:
    copies = [
        found
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.name != "_argtypes.py"
        for found in _own_argument_types(path)
    ]
    assert copies == []
    assert _own_argument_types(PACKAGE / "_argtypes.py")  # the check sees such parsers where they are
