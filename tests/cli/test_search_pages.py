"""``weft-search search --offset/--after`` (issue 30 item 4): pages of one ranking from the shell."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.engine.test_pages import corpus
from weftsearch import Index
from weftsearch.cli import main


@pytest.fixture
def index(tmp_path: Path) -> Path:
    with Index.create(tmp_path / "idx", analyzer="simple") as built:
        built.add_many(corpus(60), progress=False)
    return tmp_path / "idx"


def search(capsys: pytest.CaptureFixture[str], index: Path, *extra: str) -> dict[str, Any]:
    assert main(["search", "alpha beta", "--index", str(index), "--rank", "bm25", "--json", *extra]) == 0
    answer: dict[str, Any] = json.loads(capsys.readouterr().out)
    return answer


def keys(answer: dict[str, Any]) -> list[tuple[str, int, float]]:
    return [(hit["key"], hit["rank"], hit["score"]) for hit in answer["hits"]]


def test_pages_from_the_shell_equal_one_deeper_search(
    capsys: pytest.CaptureFixture[str], index: Path
) -> None:
    deep = search(capsys, index, "-k", "15")
    first = search(capsys, index, "-k", "5")
    second = search(capsys, index, "-k", "5", "--after", first["next_cursor"])
    third = search(capsys, index, "-k", "5", "--offset", "10")
    assert keys(first) + keys(second) + keys(third) == keys(deep)
    assert (second["offset"], third["offset"]) == (5, 10)
    # The table says how to ask for the next page.
    assert main(["search", "alpha beta", "--index", str(index), "--rank", "bm25", "-k", "5"]) == 0
    assert f"next page: --after {first['next_cursor']}" in capsys.readouterr().out


@pytest.mark.parametrize(
    "extra",
    [["--after", "junk!"], ["--after", "QUJD"], ["--offset", "-1"], ["--offset", "x"]],
)
def test_bad_pages_exit_2_with_one_line(
    capsys: pytest.CaptureFixture[str], index: Path, extra: list[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        code = main(["search", "alpha beta", "--index", str(index), "--rank", "bm25", *extra])
        raise SystemExit(code)
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err and ("cursor" in err[-1] or "--offset" in err[-1]), err
