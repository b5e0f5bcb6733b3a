"""The checked-in format fixtures: the current version's (4) opens with the recorded answers
and rebuilds byte for byte; the older layouts' (1, 2 and 3) are refused with
FormatVersionError saying to rebuild; newer version numbers in the manifest or a file header are refused,
not misread.

The current fixture is built by ``tests/fixtures/make_format_v4.py`` (from the documents and
searches of ``make_format_v1.py``);
never regenerate one to make these tests pass after a format change (see the scripts'
docstrings): a new version gets a new fixture beside them.
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
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from weftsearch import Document, Index
from weftsearch.errors import CorruptIndexError, FormatVersionError
from weftsearch.storage import (
    FORMAT_VERSION,
    INDEX_VERSION,
    LOCK,
    MANIFEST,
    SectionFile,
    checksum,
)
from weftsearch.storage.segment import POSTINGS_BLOCK, SegmentReader

ROOT = Path(__file__).resolve().parents[2]


def load_script(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class Fixture:
    """One checked-in fixture: its script, directory and recorded answers."""

    version: int
    script: Path
    root: Path
    expected: dict[str, Any]
    module: ModuleType

    @property
    def index(self) -> Path:
        return self.root / "index"

    @property
    def current(self) -> bool:
        """This code wrote the fixture's version, so it must open it (a later version may refuse it)."""
        return bool(
            self.expected["format_version"] == FORMAT_VERSION
            and self.expected["index_version"] == INDEX_VERSION
        )

    @property
    def labels(self) -> list[str]:
        return [str(spec["label"]) for spec in self.expected["searches"]]


def _fixture(version: int) -> Fixture:
    root = ROOT / "tests" / "fixtures" / f"format_v{version}"
    script = ROOT / "tests" / "fixtures" / f"make_format_v{version}.py"
    expected = json.loads((root / "expected.json").read_text(encoding="utf-8"))
    return Fixture(version, script, root, expected, load_script(script))


FIXTURES = {version: _fixture(version) for version in (4,)}
#: The zstd level each fixture's stored blocks were written at. The level is not part of the
#: format (a reader decodes any level), so when the writer's level changes (3 -> 1 at stop 38)
#: the fixture stays, an index written before, and is rebuilt at its own level: every other
#: byte must still match.
FIXTURE_STORED_LEVEL = {4: 3}
#: Runs a fixture script (argv[1]) with ``argv[2:]``, the stored blocks at level ``argv[0]``.
_AT_LEVEL = (
    "import runpy, sys\n"
    "from weftsearch.storage import docstore\n"
    "docstore.STORED_LEVEL = int(sys.argv[1])\n"
    "sys.argv = sys.argv[2:]\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n"
)
VERSIONS = sorted(FIXTURES)
#: (version, search label) for every recorded search of every fixture.
SEARCH_CASES = [(v, label) for v in VERSIONS for label in FIXTURES[v].labels]
#: (version, key) for every recorded document of every fixture.
KEY_CASES = [(v, key) for v in VERSIONS for key in FIXTURES[v].expected["keys"]]


def open_fixture(fixture: Fixture, path: Path | None = None) -> Index | None:
    """The fixture opened read-only, or None when this version refuses it as too old."""
    try:
        return Index.open(path or fixture.index, readonly=True)
    except FormatVersionError:
        if fixture.current:
            raise
        return None


def tree_hashes(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def copy_of(fixture: Fixture, tmp_path: Path) -> Path:
    target = tmp_path / f"index-v{fixture.version}"
    shutil.copytree(fixture.index, target)
    return target


# ---------------------------------------------------------------------------- the recorded answers


@pytest.mark.parametrize("version", VERSIONS)
def test_fixture_is_what_it_claims(version: int) -> None:
    fixture = FIXTURES[version]
    names = sorted(path.name for path in fixture.index.iterdir())
    assert names == [MANIFEST, "seg-000001.del-000003", "seg-000001.wseg", "seg-000002.wseg"]
    assert LOCK not in names
    expected = fixture.expected
    assert expected["format_version"] == expected["index_version"] == version
    assert expected["keys"] == sorted(expected["documents"])
    assert len(expected["keys"]) == 7 and expected["deleted"] == ["epsilon"]
    assert {spec["label"] for spec in expected["searches"]} >= {"text", "hybrid-rrf", "graph", "vector"}
    for name in names[1:]:
        assert struct.unpack_from("<I", (fixture.index / name).read_bytes(), 8)[0] == version


def test_the_current_version_has_a_fixture() -> None:
    """A format change that bumps the version must add its fixture (make_format_vN.py)."""
    assert any(fixture.current for fixture in FIXTURES.values())


def check_keys_and_settings(index: Index, expected: dict[str, Any], segments: int | None = 2) -> None:
    assert index.keys() == expected["keys"]
    assert len(index) == len(expected["keys"])
    assert index.analyzer.name == expected["analyzer"]
    assert index.vector_dim == expected["vector_dim"]
    if segments is not None:
        assert index.segment_count == segments
    for key in expected["deleted"]:
        assert key not in index


@pytest.mark.parametrize("version", VERSIONS)
def test_fixture_opens_with_its_keys_and_settings(version: int) -> None:
    index = open_fixture(FIXTURES[version])
    if index is None:
        return
    check_keys_and_settings(index, FIXTURES[version].expected)


def check_document(index: Index, expected: dict[str, Any], key: str) -> None:
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


@pytest.mark.parametrize(("version", "key"), KEY_CASES)
def test_fixture_documents(version: int, key: str) -> None:
    index = open_fixture(FIXTURES[version])
    if index is None:
        return
    check_document(index, FIXTURES[version].expected["documents"][key], key)


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


def run_recorded(fixture: Fixture, index: Index, label: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    [spec] = [s for s in fixture.expected["searches"] if s["label"] == label]
    query, k, fuser, scorers = fixture.module.make_search(spec)
    results = index.search(query, k, fuser, *scorers)
    assert list(results.signals) == spec["signal_labels"]
    assert results.fuser == ("passthrough" if len(scorers) == 1 else fuser.name)
    return [hit.to_dict() for hit in results], spec


def check_search(fixture: Fixture, index: Index, label: str) -> None:
    found, spec = run_recorded(fixture, index, label)
    assert_same_hits(found, spec["hits"])
    if label == "deleted-term":
        assert found == []
    elif label == "k-larger-than-corpus":
        assert len(found) == len(fixture.expected["keys"])
    else:
        assert found


@pytest.mark.parametrize(("version", "label"), SEARCH_CASES)
def test_fixture_search_answers(version: int, label: str) -> None:
    index = open_fixture(FIXTURES[version])
    if index is None:
        return
    check_search(FIXTURES[version], index, label)


@pytest.mark.parametrize("version", VERSIONS)
def test_fixture_scrubs_clean(version: int) -> None:
    index = open_fixture(FIXTURES[version])
    if index is None:
        return
    report = index.scrub()
    assert report.ok, report.problems
    assert report.files == 3  # two segments and one tombstone file


@pytest.mark.parametrize("version", VERSIONS)
def test_fixture_takes_writes_in_place(version: int, tmp_path: Path) -> None:
    """A writer on the fixture: merge it, add to it, commit; the old answers still hold."""
    fixture = FIXTURES[version]
    path = copy_of(fixture, tmp_path)
    try:
        writer = Index.open(path)
    except FormatVersionError:
        if fixture.current:
            raise
        return
    with writer:
        assert writer.merge(force=True) == 2
        for label in fixture.labels:
            found, spec = run_recorded(fixture, writer, label)
            assert_same_hits(found, spec["hits"])
        writer.add(Document("omega", "a document added after the upgrade"))
        writer.commit()
    reopened = Index.open(path, readonly=True)
    assert reopened.keys() == sorted([*fixture.expected["keys"], "omega"])
    assert reopened.get("alpha").text == fixture.expected["documents"]["alpha"]["text"]


def assert_block_metadata(index: Path) -> None:
    """Every segment of ``index`` carries block metadata (``post.block_offsets``, ``post.blocks``,
    meta ``blocks``) equal to a plain per-block derivation from its (decoded) postings and lengths:
    last id, max tf, min length and the two bit widths of the packed block (docs/FORMAT.md)."""
    segments = sorted(index.glob("seg-*.wseg"))
    assert segments
    for file in segments:
        sections = SectionFile(file)
        assert {"post.block_offsets", "post.blocks", "post.data", "post.data_offsets"} <= set(sections.names)
        assert not {"post.ids", "post.tfs"} & set(sections.names), file  # compressed, not raw
        meta = json.loads(bytes(sections.array("meta")))
        reader = SegmentReader(file)
        lengths = sections.array("doc.lengths")
        want_offsets, want_blocks, words = [0], [], 0
        for term in reader.terms():
            ids, tfs = reader.postings(term)
            cuts = list(range(0, len(ids), POSTINGS_BLOCK))
            want_offsets.append(want_offsets[-1] + len(cuts))
            ends = [min(cut + POSTINGS_BLOCK, len(ids)) for cut in cuts]
            want_blocks += [int(ids[e - 1]) for e in ends]
            want_blocks += [int(tfs[c:e].max()) for c, e in zip(cuts, ends, strict=True)]
            want_blocks += [int(lengths[ids[c:e]].min()) for c, e in zip(cuts, ends, strict=True)]
            for c, e in zip(cuts, ends, strict=True):
                previous = [int(ids[c - 1]) if c else -1, *ids[c : e - 1].tolist()]
                width_id = max(
                    int(i) - p - 1 for i, p in zip(ids[c:e].tolist(), previous, strict=True)
                ).bit_length()
                width_tf = (int(tfs[c:e].max()) - 1).bit_length()
                want_blocks.append(width_id | width_tf << 8)
                words += (-(-(e - c) * width_id // 32)) + (-(-(e - c) * width_tf // 32))
        assert sections.array("post.block_offsets").tolist() == want_offsets, file
        assert sections.array("post.blocks").tolist() == want_blocks, file
        assert meta["blocks"] == want_offsets[-1]
        assert meta["words"] == words == sections.array("post.data").shape[0]


def test_current_fixture_carries_block_metadata() -> None:
    """Format version 3 on holds the block metadata, widths included, and packed postings (FORMAT.md)."""
    current = [fixture for fixture in FIXTURES.values() if fixture.current]
    assert current
    for fixture in current:
        assert_block_metadata(fixture.index)


# ---------------------------------------------------------------------------- pre-release layouts: refused


#: The committed fixtures of older layouts: 1 and 2 lived hours before 0.1.0 (issue 27); 3 stored
#: its records uncompressed (version 4 compresses them in blocks, issue 31). Kept, and refused.
PRE_RELEASE = {version: ROOT / "tests" / "fixtures" / f"format_v{version}" / "index" for version in (1, 2, 3)}


@pytest.mark.parametrize("version", sorted(PRE_RELEASE))
def test_a_pre_release_fixture_is_refused_saying_to_rebuild(version: int, tmp_path: Path) -> None:
    """Formats 1, 2 and 3 are no longer read or upgraded: opening one names its version and says rebuild."""
    path = tmp_path / "index"
    shutil.copytree(PRE_RELEASE[version], path)  # a writer's open creates write.lock
    for readonly in (True, False):
        with pytest.raises(FormatVersionError) as info:
            Index.open(path, readonly=readonly)
        message = str(info.value)
        assert not isinstance(info.value, CorruptIndexError)
        assert f"version {version}" in message and "rebuild" in message, message
        assert "upgrade" not in message, message


@pytest.mark.parametrize("hash_seed", ["0", "4242"])
@pytest.mark.parametrize("version", VERSIONS)
def test_fixture_rebuilds_byte_for_byte(tmp_path: Path, hash_seed: str, version: int) -> None:
    fixture = FIXTURES[version]
    if not fixture.current:
        pytest.skip("this version writes another format; the fixture is read-only history")
    out = tmp_path / fixture.root.name
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHONHASHSEED": hash_seed}
    level = str(FIXTURE_STORED_LEVEL[version])
    subprocess.run(
        [sys.executable, "-c", _AT_LEVEL, level, str(fixture.script), str(out)],
        check=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    rebuilt = tree_hashes(out)
    assert set(rebuilt) == {"expected.json", *(f"index/{p.name}" for p in fixture.index.iterdir())}
    # The index files must be byte-identical. expected.json holds computed
    # scores, whose last bits depend on the CPU's SIMD width (numpy's
    # reductions unroll differently on AVX2 and AVX-512): compare it as data.
    recorded = tree_hashes(fixture.root)
    assert {p: h for p, h in rebuilt.items() if p != "expected.json"} == {
        p: h for p, h in recorded.items() if p != "expected.json"
    }
    fresh = json.loads((out / "expected.json").read_text(encoding="utf-8"))
    assert {k: v for k, v in fresh.items() if k != "searches"} == {
        k: v for k, v in fixture.expected.items() if k != "searches"
    }
    assert [s["label"] for s in fresh["searches"]] == fixture.labels
    for new, old in zip(fresh["searches"], fixture.expected["searches"], strict=True):
        assert_same_hits(new["hits"], old["hits"])


# ---------------------------------------------------------------------------- other versions are refused


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


FILES = ["seg-000001.wseg", "seg-000002.wseg", "seg-000001.del-000003"]
#: Version numbers no fixture is written in, relative to each fixture: newer, zero and, for
#: the current one, every older one.
OTHER = [99, 0, FORMAT_VERSION + 1]


@pytest.mark.parametrize("version", VERSIONS)
def test_resealed_but_unchanged_copies_still_open(version: int, tmp_path: Path) -> None:
    """The re-sealing helpers are faithful: with the version unchanged, everything opens."""
    fixture = FIXTURES[version]
    path = copy_of(fixture, tmp_path)
    rewrite_manifest(path, version=fixture.expected["index_version"])
    for name in FILES:
        before = (path / name).read_bytes()
        set_header_version(path / name, fixture.expected["format_version"])
        assert (path / name).read_bytes() == before
    index = open_fixture(fixture, path)
    if index is not None:
        assert index.keys() == fixture.expected["keys"]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("other", OTHER)
def test_manifest_of_another_version_is_refused(tmp_path: Path, version: int, other: int) -> None:
    path = copy_of(FIXTURES[version], tmp_path)
    rewrite_manifest(path, version=other)
    with pytest.raises(FormatVersionError) as info:
        Index.open(path, readonly=True)
    assert not isinstance(info.value, CorruptIndexError)
    assert str(other) in str(info.value)
    with pytest.raises(FormatVersionError):
        Index.open(path)


@pytest.mark.parametrize("name", FILES)
@pytest.mark.parametrize("other", [*OTHER, *range(1, FORMAT_VERSION)])
def test_file_of_another_version_is_refused(tmp_path: Path, name: str, other: int) -> None:
    [current] = [fixture for fixture in FIXTURES.values() if fixture.current]
    path = copy_of(current, tmp_path)
    set_header_version(path / name, other)
    with pytest.raises(FormatVersionError) as info:
        Index.open(path, readonly=True)
    assert not isinstance(info.value, CorruptIndexError)
    assert name in str(info.value)


@pytest.mark.parametrize("version", VERSIONS)
def test_version_changed_without_resealing_is_corruption(tmp_path: Path, version: int) -> None:
    path = copy_of(FIXTURES[version], tmp_path)
    set_header_version(path / "seg-000002.wseg", 99, reseal=False)
    # An older version's index is refused by its manifest before any segment is read.
    with pytest.raises(CorruptIndexError if FIXTURES[version].current else FormatVersionError):
        Index.open(path, readonly=True)


@pytest.mark.parametrize("version", VERSIONS)
def test_newer_version_is_refused_by_scrub_too(tmp_path: Path, version: int) -> None:
    from weftsearch.storage import scrub_directory

    path = copy_of(FIXTURES[version], tmp_path)
    index = open_fixture(FIXTURES[version], path)
    set_header_version(path / "seg-000002.wseg", 99)
    report = None if index is None else index.scrub()

    for found in (report, scrub_directory(path)):
        if found is not None:
            assert not found.ok
            assert any("seg-000002.wseg" in problem for problem in found.problems)
