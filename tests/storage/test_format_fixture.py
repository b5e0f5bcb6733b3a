"""The checked-in format-version-1 index: every later version opens it and gives the recorded
answers, or refuses it with FormatVersionError; the fixture rebuilds byte for byte; newer
version numbers in the manifest or a file header are refused, not misread.

The fixture is built by ``tests/fixtures/make_format_v1.py``; never regenerate it to make
these tests pass after a format change (see that script's docstring).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from weftsearch import Document, Index
from weftsearch.errors import CorruptIndexError, FormatVersionError
from weftsearch.storage import FORMAT_VERSION, INDEX_VERSION, LOCK, MANIFEST, checksum

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "fixtures" / "make_format_v1.py"
FIXTURE = ROOT / "tests" / "fixtures" / "format_v1"
INDEX_DIR = FIXTURE / "index"
EXPECTED: dict[str, Any] = json.loads((FIXTURE / "expected.json").read_text(encoding="utf-8"))
#: This code wrote the fixture's version, so it must open it (a later version may refuse it).
CURRENT = EXPECTED["format_version"] == FORMAT_VERSION and EXPECTED["index_version"] == INDEX_VERSION


def load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_format_v1", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SCRIPT_MODULE = load_script()
SEARCH_LABELS = [str(spec["label"]) for spec in EXPECTED["searches"]]


def open_fixture(path: Path = INDEX_DIR) -> Index | None:
    """The fixture opened read-only, or None when this version refuses it as too old."""
    try:
        return Index.open(path, readonly=True)
    except FormatVersionError:
        if CURRENT:
            raise
        return None


def tree_hashes(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


@pytest.fixture
def fixture_copy(tmp_path: Path) -> Path:
    target = tmp_path / "index"
    shutil.copytree(INDEX_DIR, target)
    return target


# ---------------------------------------------------------------------------- the recorded answers


def test_fixture_is_what_it_claims() -> None:
    names = sorted(path.name for path in INDEX_DIR.iterdir())
    assert names == [MANIFEST, "seg-000001.del-000003", "seg-000001.wseg", "seg-000002.wseg"]
    assert LOCK not in names
    assert EXPECTED["keys"] == sorted(EXPECTED["documents"])
    assert len(EXPECTED["keys"]) == 7 and EXPECTED["deleted"] == ["epsilon"]
    assert {spec["label"] for spec in EXPECTED["searches"]} >= {"text", "hybrid-rrf", "graph", "vector"}


def test_fixture_opens_with_its_keys_and_settings() -> None:
    index = open_fixture()
    if index is None:
        return
    assert index.keys() == EXPECTED["keys"]
    assert len(index) == len(EXPECTED["keys"])
    assert index.analyzer.name == EXPECTED["analyzer"]
    assert index.vector_dim == EXPECTED["vector_dim"]
    assert index.segment_count == 2
    for key in EXPECTED["deleted"]:
        assert key not in index


@pytest.mark.parametrize("key", EXPECTED["keys"])
def test_fixture_documents(key: str) -> None:
    index = open_fixture()
    if index is None:
        return
    expected = EXPECTED["documents"][key]
    stored = index.get(key)
    assert stored.key == key
    assert stored.text == expected["text"]
    assert list(stored.links) == expected["links"]
    assert stored.timestamp == expected["time"]
    assert dict(stored.fields) == expected["fields"]
    for name, value in expected["fields"].items():
        assert type(stored.fields[name]) is type(value)
    if expected["vector"] is None:
        assert stored.vector is None
    else:
        assert stored.vector is not None
        assert [float(x) for x in stored.vector.tolist()] == expected["vector"]


#: Scores are compared to a few float32 ulps: vector similarities are float32 sums whose last
#: bit depends on the kernel's summation order (SIMD width, the library computing them), and
#: score fusion carries that into fused scores. Ranks and keys are compared exactly.
SCORE_REL, SCORE_ABS = 1e-6, 1e-9


def assert_same_hits(found: list[dict[str, Any]], recorded: list[dict[str, Any]]) -> None:
    """Keys, ranks, fields and signal ranks exactly; scores to float32 precision (SCORE_REL, SCORE_ABS)."""
    assert [(h["key"], h["rank"]) for h in found] == [(h["key"], h["rank"]) for h in recorded]
    for hit, old in zip(found, recorded, strict=True):
        assert hit["fields"] == old["fields"]
        if len(old["signals"]) == 1:
            # One stream passes through (docs/ARCHITECTURE.md, ordering rule): the hit's score
            # and its one contribution are the signal's own score. The fixture was recorded
            # when one stream was fused by RRF, so its fused scores are 1 / (60 + rank); the
            # raw signal score it recorded is what the hit must carry now.
            old = {**old, "score": old["signals"][0]["score"]}
            old["signals"] = [{**old["signals"][0], "contribution": old["signals"][0]["score"]}]
        assert hit["score"] == pytest.approx(old["score"], rel=SCORE_REL, abs=SCORE_ABS)
        assert [(s["signal"], s["rank"]) for s in hit["signals"]] == [
            (s["signal"], s["rank"]) for s in old["signals"]
        ]
        for signal, old_signal in zip(hit["signals"], old["signals"], strict=True):
            if old_signal["score"] is None:
                assert signal["score"] is None
            else:
                assert signal["score"] == pytest.approx(old_signal["score"], rel=SCORE_REL, abs=SCORE_ABS)
            contribution = pytest.approx(old_signal["contribution"], rel=SCORE_REL, abs=SCORE_ABS)
            assert signal["contribution"] == contribution


def run_recorded(index: Index, label: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    [spec] = [s for s in EXPECTED["searches"] if s["label"] == label]
    query, k, fuser, scorers = SCRIPT_MODULE.make_search(spec)
    results = index.search(query, k, fuser, *scorers)
    assert list(results.signals) == spec["signal_labels"]
    assert results.fuser == ("passthrough" if len(scorers) == 1 else fuser.name)
    return [hit.to_dict() for hit in results], spec


@pytest.mark.parametrize("label", SEARCH_LABELS)
def test_fixture_search_answers(label: str) -> None:
    index = open_fixture()
    if index is None:
        return
    found, spec = run_recorded(index, label)
    assert_same_hits(found, spec["hits"])
    if label == "deleted-term":
        assert found == []
    elif label == "k-larger-than-corpus":
        assert len(found) == len(EXPECTED["keys"])
    else:
        assert found


def test_fixture_scrubs_clean() -> None:
    index = open_fixture()
    if index is None:
        return
    report = index.scrub()
    assert report.ok, report.problems
    assert report.files == 3  # two segments and one tombstone file


def test_fixture_upgrades_in_place(fixture_copy: Path) -> None:
    """A writer on the old index: merge it, add to it, commit; the old answers still hold."""
    try:
        writer = Index.open(fixture_copy)
    except FormatVersionError:
        if CURRENT:
            raise
        return
    with writer:
        assert writer.merge(force=True) == 2
        for label in SEARCH_LABELS:
            found, spec = run_recorded(writer, label)
            assert_same_hits(found, spec["hits"])
        writer.add(Document("omega", "a document added after the upgrade"))
        writer.commit()
    reopened = Index.open(fixture_copy, readonly=True)
    assert reopened.keys() == sorted([*EXPECTED["keys"], "omega"])
    assert reopened.get("alpha").text == EXPECTED["documents"]["alpha"]["text"]


# ---------------------------------------------------------------------------- determinism


@pytest.mark.parametrize("hash_seed", ["0", "4242"])
def test_fixture_rebuilds_byte_for_byte(tmp_path: Path, hash_seed: str) -> None:
    if not CURRENT:
        pytest.skip("this version writes another format; the v1 fixture is read-only history")
    out = tmp_path / "format_v1"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHONHASHSEED": hash_seed}
    subprocess.run([sys.executable, str(SCRIPT), str(out)], check=True, env=env, cwd=tmp_path, timeout=120)
    rebuilt = tree_hashes(out)
    assert set(rebuilt) == {"expected.json", *(f"index/{p.name}" for p in INDEX_DIR.iterdir())}
    # The index files must be byte-identical. expected.json holds computed
    # scores, whose last bits depend on the CPU's SIMD width (numpy's
    # reductions unroll differently on AVX2 and AVX-512): compare it as data.
    recorded = tree_hashes(FIXTURE)
    assert {p: h for p, h in rebuilt.items() if p != "expected.json"} == {
        p: h for p, h in recorded.items() if p != "expected.json"
    }
    fresh = json.loads((out / "expected.json").read_text(encoding="utf-8"))
    assert {k: v for k, v in fresh.items() if k != "searches"} == {
        k: v for k, v in EXPECTED.items() if k != "searches"
    }
    assert [s["label"] for s in fresh["searches"]] == SEARCH_LABELS
    for new, old in zip(fresh["searches"], EXPECTED["searches"], strict=True):
        assert_same_hits(new["hits"], old["hits"])


# ---------------------------------------------------------------------------- newer versions are refused


def rewrite_manifest(path: Path, **changes: Any) -> None:
    """Change manifest body fields and re-seal its CRC32C (docs/FORMAT.md, Manifest.to_bytes)."""
    outer = json.loads((path / MANIFEST).read_text())
    outer["body"].update(changes)
    canonical = json.dumps(outer["body"], sort_keys=True, separators=(",", ":")).encode("utf-8")
    outer["crc32c"] = checksum(canonical)
    (path / MANIFEST).write_text(json.dumps(outer, sort_keys=True, indent=1))


def set_header_version(path: Path, version: int, *, reseal: bool = True) -> None:
    """Write ``version`` into a section file's header; re-seal the header CRC32C unless told not to."""
    data = bytearray(path.read_bytes())
    struct.pack_into("<I", data, 8, version)
    if reseal:
        struct.pack_into("<I", data, 28, checksum(bytes(data[:28]) + bytes(data[32:64])))
    path.write_bytes(bytes(data))


def test_resealed_but_unchanged_copies_still_open(fixture_copy: Path) -> None:
    """The re-sealing helpers are faithful: with the version unchanged, everything opens."""
    rewrite_manifest(fixture_copy, version=EXPECTED["index_version"])
    for name in ("seg-000001.wseg", "seg-000002.wseg", "seg-000001.del-000003"):
        before = (fixture_copy / name).read_bytes()
        set_header_version(fixture_copy / name, EXPECTED["format_version"])
        assert (fixture_copy / name).read_bytes() == before
    index = open_fixture(fixture_copy)
    if index is not None:
        assert index.keys() == EXPECTED["keys"]


@pytest.mark.parametrize("version", [99, 2, 0])
def test_manifest_of_another_version_is_refused(fixture_copy: Path, version: int) -> None:
    rewrite_manifest(fixture_copy, version=version)
    with pytest.raises(FormatVersionError) as info:
        Index.open(fixture_copy, readonly=True)
    assert not isinstance(info.value, CorruptIndexError)
    assert str(version) in str(info.value)
    with pytest.raises(FormatVersionError):
        Index.open(fixture_copy)


@pytest.mark.parametrize("name", ["seg-000001.wseg", "seg-000002.wseg", "seg-000001.del-000003"])
@pytest.mark.parametrize("version", [99, 2, 0])
def test_file_of_another_version_is_refused(fixture_copy: Path, name: str, version: int) -> None:
    set_header_version(fixture_copy / name, version)
    with pytest.raises(FormatVersionError) as info:
        Index.open(fixture_copy, readonly=True)
    assert not isinstance(info.value, CorruptIndexError)
    assert name in str(info.value)


def test_version_changed_without_resealing_is_corruption(fixture_copy: Path) -> None:
    set_header_version(fixture_copy / "seg-000002.wseg", 99, reseal=False)
    with pytest.raises(CorruptIndexError):
        Index.open(fixture_copy, readonly=True)


def test_newer_version_is_refused_by_scrub_too(fixture_copy: Path) -> None:
    index = open_fixture(fixture_copy)
    if index is None:
        return
    set_header_version(fixture_copy / "seg-000002.wseg", 99)
    report = index.scrub()
    assert not report.ok
    assert any("seg-000002.wseg" in problem for problem in report.problems)
