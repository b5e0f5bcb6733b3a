"""The manifest reader refuses every record it did not write (issue 26, item 9c).

Each case edits one value of a committed index's manifest and re-seals its
CRC32C (``tests/storage/crafting.py``), so only the reader's validation can
refuse it: an unknown field kind, an unknown key anywhere, a number of the
wrong JSON type (never coerced: ``1.5`` is not 1, ``"7"`` is not 7, ``true``
is not 1) or out of range. Each must be ``CorruptIndexError`` naming what is
wrong, at open and in scrub.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.storage.crafting import edit_manifest
from weftsearch import Document, Index
from weftsearch.errors import CorruptIndexError
from weftsearch.storage import scrub_directory


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("manifest") / "index"
    with Index.create(path, vector_dim=4) as index:
        index.add(
            Document(
                "a",
                "hello world",
                vector=np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32),
                fields={"year": 2001, "tag": "x"},
            )
        )
        index.commit()
    return path


def _set(*path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def edit(body: dict[str, Any]) -> None:
        record: Any = body
        for step in path[:-1]:
            record = record[int(step)] if step.isdigit() else record[step]
        last = path[-1]
        record[int(last) if last.isdigit() else last] = value

    return edit


def _remove(*path: str) -> Callable[[dict[str, Any]], None]:
    def edit(body: dict[str, Any]) -> None:
        record: Any = body
        for step in path[:-1]:
            record = record[int(step)] if step.isdigit() else record[step]
        del record[path[-1]]

    return edit


CASES: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "unknown field kind": (
        _set("extra", "fields", "year", value="date"),
        r"field 'year' has unknown kind 'date'",
    ),
    "field kind not a string": (_set("extra", "fields", "tag", value=3), r"field 'tag' has unknown kind 3"),
    "fields not an object": (_set("extra", "fields", value=["year"]), r"'fields' is a list"),
    "unknown extra key": (_set("extra", "colour", value="blue"), r"unknown key\(s\) 'colour'"),
    "extra not an object": (_set("extra", value=[]), r"'extra' is a list"),
    "unknown vector dtype": (_set("extra", "vector_dtype", value="int8"), r"vector_dtype 'int8'"),
    "store_text not a boolean": (_set("extra", "store_text", value="no"), r"store_text is 'no'"),
    "unknown body key": (_set("shards", value=2), r"unknown key\(s\) 'shards'"),
    "missing body key": (_remove("next_segment"), r"lacks 'next_segment'"),
    "unknown entry key": (_set("segments", "0", "owner", value="me"), r"segment entry 0 has unknown key"),
    "missing entry key": (_remove("segments", "0", "checksum"), r"segment entry 0 lacks 'checksum'"),
    "documents a float": (_set("segments", "0", "documents", value=1.5), r"documents is 1.5, not an integer"),
    "documents a whole float": (_set("segments", "0", "documents", value=1.0), r"not an integer"),
    "documents a string": (_set("segments", "0", "documents", value="1"), r"not an integer"),
    "documents a boolean": (_set("segments", "0", "documents", value=True), r"not an integer"),
    "deleted negative": (_set("segments", "0", "deleted", value=-1), r"out of range"),
    "size huge": (_set("segments", "0", "size", value=10**30), r"out of range"),
    "entry name not a string": (_set("segments", "0", "name", value=1), r"not a string"),
    "entry not an object": (_set("segments", "0", value=["seg-000001.wseg"]), r"segment entry 0 is a list"),
    "segments an object": (_set("segments", value={}), r"'segments' is an object"),
    "generation a float": (_set("generation", value=2.0), r"generation is 2.0"),
    "vector_dim zero": (_set("vector_dim", value=0), r"vector_dim 0 is out of range"),
    "vector_dim a string": (_set("vector_dim", value="4"), r"vector_dim is '4'"),
    "analyzer a number": (_set("analyzer", value=5), r"'analyzer' is 5"),
    "analyzer empty": (_set("analyzer", value=""), r"'analyzer' is ''"),
}


@pytest.mark.parametrize("label", sorted(CASES))
def test_a_manifest_value_nobody_wrote_is_refused(label: str, pristine: Path, tmp_path: Path) -> None:
    edit, message = CASES[label]
    directory = tmp_path / "index"
    shutil.copytree(pristine, directory)
    edit_manifest(directory, edit)
    for readonly in (True, False):
        with pytest.raises(CorruptIndexError, match=message):
            Index.open(directory, readonly=readonly)
    assert any("MANIFEST" in problem for problem in scrub_directory(directory).problems)


def test_the_pristine_manifest_opens(pristine: Path) -> None:
    with Index.open(pristine, readonly=True) as index:
        assert index.keys() == ["a"]
