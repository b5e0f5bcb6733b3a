"""Custom embedders found by entry point (group ``weftsearch.embedders``) in every process opening an index.

The plugin (``tests/embedder_plugin.py``) is declared by a ``.dist-info``
folder put on the path, as ``pip install`` would; nothing registers it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import weftsearch.embedders as embedders
from tests import embedder_plugin
from tests.embedder_plugin import NAME, Letters
from weftsearch import Document, Index, embedder_names, get_embedder, register_embedder
from weftsearch.errors import PluginError, UnknownEmbedderError

ROOT = Path(__file__).resolve().parents[1]
DOCS = [Document("a", "abba cafe"), Document("b", "hedge hog"), Document("c", "deaf bee")]


@pytest.fixture
def installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The plugin declared on ``sys.path``; the registry is restored afterwards."""
    folder = embedder_plugin.install(tmp_path / "site")
    monkeypatch.syspath_prepend(str(folder))
    saved = dict(embedders._REGISTRY)
    yield folder
    embedders._REGISTRY.clear()
    embedders._REGISTRY.update(saved)


def _env(*folders: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT), *map(str, folders)])}


def test_a_declared_embedder_is_found_by_name_without_registration(installed: Path, tmp_path: Path) -> None:
    assert NAME not in embedders._REGISTRY
    assert NAME in embedder_names()  # listed before it is loaded
    assert isinstance(get_embedder(NAME), Letters)
    with Index.create(tmp_path / "i", embedder=NAME) as index:
        index.add_many(DOCS)
    embedders._REGISTRY.pop(NAME)  # as a fresh process: the entry point is read again
    with Index.open(tmp_path / "i", readonly=True) as index:
        assert index.embedder is not None and index.embedder.name == NAME
        assert index.get("a").vector is not None


def test_a_registered_name_wins_over_the_entry_point(installed: Path) -> None:
    class Other(Letters):
        pass

    register_embedder(NAME, Other)
    assert type(get_embedder(NAME)) is Other


def test_without_the_declaration_the_name_is_unknown_and_the_message_says_both_ways(tmp_path: Path) -> None:
    with pytest.raises(
        UnknownEmbedderError, match=r"register_embedder.*entry-point group 'weftsearch\.embedders'"
    ):
        get_embedder(NAME)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ("no_such_weft_module:Thing", "ModuleNotFoundError"),
        ("tests.embedder_plugin:Missing", "AttributeError"),
        ("tests.embedder_plugin:NAME", "not a factory"),
    ],
)
def test_a_broken_declaration_is_a_plugin_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str, reason: str
) -> None:
    monkeypatch.syspath_prepend(str(embedder_plugin.install(tmp_path, {"broken-x": value})))
    with pytest.raises(PluginError, match=rf"embedder 'broken-x': entry point '{value}'.*{reason}"):
        get_embedder("broken-x")
    assert "broken-x" not in embedders._REGISTRY


def test_two_packages_declaring_one_name_differently_is_a_plugin_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    embedder_plugin.install(tmp_path, {"twice": "tests.embedder_plugin:Letters"}, distribution="one")
    embedder_plugin.install(tmp_path, {"twice": "tests.fake_embedder:FakeEmbedder"}, distribution="two")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(
        PluginError,
        match=r"more than one entry point.*embedder_plugin:Letters, tests\.fake_embedder",
    ):
        get_embedder("twice")


def test_the_cli_in_new_processes_finds_the_declared_embedder(tmp_path: Path) -> None:
    """``index --embed NAME`` and ``search "text" --rank vector`` in fresh processes: no import, no flag."""
    folder = embedder_plugin.install(tmp_path / "site")
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": d.key, "text": d.text}) + "\n" for d in DOCS))
    index = tmp_path / "idx"
    cli = [sys.executable, "-m", "weftsearch.cli"]
    built = subprocess.run(
        [*cli, "index", str(corpus), "--index", str(index), "--embed", NAME],
        capture_output=True,
        text=True,
        env=_env(folder),
        timeout=120,
    )
    assert built.returncode == 0, built.stderr
    assert f"embedder {NAME}" in built.stdout
    searched = subprocess.run(
        [*cli, "search", "hedge", "--index", str(index), "--rank", "vector", "--json", "-k", "1"],
        capture_output=True,
        text=True,
        env=_env(folder),
        timeout=120,
    )
    assert searched.returncode == 0, searched.stderr
    assert json.loads(searched.stdout)["hits"][0]["key"] == "b"
    without = subprocess.run(  # the same search where the package is not installed: one line, exit 2
        [*cli, "search", "hedge", "--index", str(index), "--rank", "vector"],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    assert without.returncode == 2
    assert f"unknown embedder {NAME!r}" in without.stderr


def test_serve_workers_embed_query_text_with_the_declared_embedder(tmp_path: Path) -> None:
    """Each ``serve --workers 2`` process (readers and writer) opens the index and finds the embedder."""
    pytest.importorskip("fastapi", reason="the server tests need the 'server' extra")
    import httpx

    from tests.server.serving import running_server

    folder = embedder_plugin.install(tmp_path / "site")
    index = tmp_path / "idx"
    sys.path.insert(0, str(folder))
    try:
        with Index.create(index, embedder=NAME) as made:
            made.add_many(DOCS)
    finally:
        sys.path.remove(str(folder))
        embedders._REGISTRY.pop(NAME, None)
    paths = os.pathsep.join([str(ROOT), str(folder)])
    with (
        running_server(index, "--workers", "2", env={"PYTHONPATH": paths}) as base,
        httpx.Client(base_url=base, timeout=30) as client,
    ):
        for _ in range(4):  # new connections: either reader answers
            found = client.post("/v1/search", json={"text": "hedge", "spec": "vector", "k": 1})
            assert found.status_code == 200, found.text
            assert found.json()["hits"][0]["key"] == "b"
