"""Every file of an index is its own: substituted, foreign, duplicated, widened, inflated or
rolled-back files are refused with a typed error naming the file (issue 13, items 6-10, 13).

Each case crafts the substitution with every checksum valid (``tests/storage/crafting.py``),
so only the identity rules of docs/FORMAT.md ("Identity") can notice it; without them, each
of these opened and served deleted, duplicated or foreign documents.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tracemalloc
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.storage.crafting import (
    edit_manifest,
    edit_meta,
    refresh_identities,
    restamp,
    rewrite_sections,
    stamp_of,
)
from weftsearch import Document, Index
from weftsearch.cli import main
from weftsearch.errors import (
    CorruptIndexError,
    IndexNotFoundError,
    InvalidParameterError,
    ManifestRollbackError,
)
from weftsearch.storage import MANIFEST, Manifest, SegmentReader, scrub_directory
from weftsearch.storage.directory import is_index_id
from weftsearch.storage.segment_merge import merge_columns
from weftsearch.storage.segment_writer import encode_segment

DIM = 4


def doc(i: int, text: str = "", vector: bool = True) -> Document:
    return Document(
        f"k{i:03d}",
        text or f"text of document {i} graph words",
        vector=np.full(DIM, 1.0 + i, dtype=np.float32) if vector else None,
        links=(f"k{(i + 1) % 30:03d}",),
        fields={"n": i},
    )


def build(path: Path, index_id: str | None = None) -> Path:
    """Three segments (10 documents each), tombstones on segments 1 and 2."""
    with Index.create(path, vector_dim=DIM, index_id=index_id) as index:
        for start in (0, 10, 20):
            index.add_many([doc(i) for i in range(start, start + 10)])
            index.commit()
        index.delete_many(["k003", "k014"])
        index.commit()
    return path


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("identity") / "index")


@pytest.fixture(scope="module")
def foreign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Another index of the very same documents (so same names, counts and sizes)."""
    return build(tmp_path_factory.mktemp("foreign") / "index")


@pytest.fixture
def copy(pristine: Path, tmp_path: Path) -> Path:
    target = tmp_path / "index"
    shutil.copytree(pristine, target)
    return target


def names(path: Path) -> dict[str, Any]:
    body: dict[str, Any] = json.loads((path / MANIFEST).read_text())["body"]
    return body


def assert_refused(path: Path, *fragments: str) -> None:
    """Open (read-only and writer) refuses, naming the file; scrub reports it; the CLI exits 1."""
    for readonly in (True, False):
        with pytest.raises(CorruptIndexError) as info:
            Index.open(path, readonly=readonly)
        for fragment in fragments:
            assert fragment in str(info.value)
    report = scrub_directory(path)
    assert not report.ok
    assert any(all(fragment in problem for fragment in fragments) for problem in report.problems), (
        report.problems
    )
    assert main(["scrub", str(path)]) == 1


def segment_files(path: Path) -> list[str]:
    return [entry["name"] for entry in names(path)["segments"]]


# ---------------------------------------------------------------------------- item 6: substitutions


def test_pristine_index_opens_and_scrubs(pristine: Path) -> None:
    index = Index.open(pristine, readonly=True)
    assert len(index) == 28
    assert index.scrub().ok
    body = names(pristine)
    assert len(body["index_id"]) == 32
    for entry in body["segments"]:
        assert stamp_of(pristine / entry["name"]).index_id == body["index_id"]
        assert entry["size"] == (pristine / entry["name"]).stat().st_size


def test_two_segments_swapped(copy: Path) -> None:
    first, second = segment_files(copy)[:2]
    (copy / first).rename(copy / "swap")
    (copy / second).rename(copy / first)
    (copy / "swap").rename(copy / second)
    assert_refused(copy, first, "segment number")


def test_segment_replaced_by_a_copy_of_another(copy: Path) -> None:
    first, _, third = segment_files(copy)
    shutil.copyfile(copy / first, copy / third)
    assert_refused(copy, third)


def test_segment_replaced_by_the_same_segment_of_another_index(copy: Path, foreign: Path) -> None:
    name = segment_files(copy)[2]
    shutil.copyfile(foreign / name, copy / name)
    assert_refused(copy, name, "belongs to index")


def test_forged_stamp_on_a_file_of_the_same_size(copy: Path, foreign: Path) -> None:
    """A file with this index's stamp and the right size but other content: its checksum differs."""
    name = segment_files(copy)[2]
    shutil.copyfile(foreign / name, copy / name)
    restamp(copy / name, index_id=names(copy)["index_id"])

    def edit(sections: dict[str, Any]) -> None:
        sections["doc.lengths"][0] += 1  # same size, other content, every checksum valid

    rewrite_sections(copy / name, edit)
    assert (copy / name).stat().st_size == names(copy)["segments"][2]["size"]
    assert_refused(copy, name, "checksum")


def test_same_count_tombstones_from_another_index(copy: Path, foreign: Path) -> None:
    entry = names(copy)["segments"][0]
    assert entry["deletes"] is not None
    shutil.copyfile(foreign / entry["deletes"], copy / entry["deletes"])
    assert_refused(copy, entry["deletes"], "belongs to index")


def test_tombstones_of_another_generation_or_segment(copy: Path) -> None:
    first, second = names(copy)["segments"][:2]
    # Same counts, this index, but segment 2's tombstone file under segment 1's name.
    shutil.copyfile(copy / second["deletes"], copy / first["deletes"])
    assert_refused(copy, first["deletes"], "segment number")


def test_tombstones_restamped_with_another_generation(copy: Path) -> None:
    first = names(copy)["segments"][0]
    restamp(copy / first["deletes"], generation=1)
    assert_refused(copy, first["deletes"], "generation")


def test_duplicate_manifest_entries(copy: Path) -> None:
    edit_manifest(copy, lambda body: body["segments"].append(dict(body["segments"][2])))
    assert_refused(copy, "listed more than once")


def test_manifest_of_another_index_over_these_files(copy: Path, foreign: Path) -> None:
    shutil.copyfile(foreign / MANIFEST, copy / MANIFEST)
    assert_refused(copy, "belongs to index")


def test_older_manifest_whose_files_were_replaced(copy: Path) -> None:
    """The manifest of an earlier generation names a tombstone file that has since been swept."""
    old = (copy / MANIFEST).read_bytes()
    with Index.open(copy) as writer:
        writer.delete("k001")  # segment 1's tombstones move to a new file; the old one is swept
        writer.commit()
    (copy / MANIFEST).write_bytes(old)
    with pytest.raises(CorruptIndexError):
        Index.open(copy, readonly=True)
    assert not scrub_directory(copy).ok


def test_merge_refuses_duplicate_keys(tmp_path: Path) -> None:
    from weftsearch.storage.segment_writer import SegmentDocument

    data = encode_segment([SegmentDocument(doc(1), {"a": 1}, 1)], DIM)
    readers = [SegmentReader(tmp_path / name, data) for name in ("x", "y")]
    with pytest.raises(CorruptIndexError, match="more than one segment"):
        merge_columns([(reader, np.ones(1, dtype=bool)) for reader in readers])


# ---------------------------------------------------------------------------- item 6: generations


def test_reader_refuses_an_older_manifest_on_refresh(copy: Path) -> None:
    old = (copy / MANIFEST).read_bytes()
    reader = Index.open(copy, readonly=True)
    with Index.open(copy) as writer:
        writer.add(doc(99))
        writer.commit()
    assert reader.refresh()
    (copy / MANIFEST).write_bytes(old)  # the whole directory's manifest restored from a backup
    with pytest.raises(ManifestRollbackError, match="went back"):
        reader.refresh()
    assert "k099" in reader  # and it keeps showing what it showed


def test_reader_refuses_the_same_generation_with_other_content(copy: Path) -> None:
    reader = Index.open(copy, readonly=True)
    edit_manifest(copy, lambda body: body["segments"].pop())
    with pytest.raises(ManifestRollbackError):
        reader.refresh()


def test_reader_refuses_another_index_on_refresh(copy: Path, foreign: Path) -> None:
    reader = Index.open(copy, readonly=True)
    for child in copy.iterdir():
        child.unlink()
    for child in foreign.iterdir():
        shutil.copyfile(child, copy / child.name)
    with pytest.raises(ManifestRollbackError, match="index"):
        reader.refresh()


def test_a_merge_publishes_a_new_generation(copy: Path) -> None:
    reader = Index.open(copy, readonly=True)
    with Index.open(copy) as writer:
        before = writer.generation
        assert writer.merge(force=True) == 3
    assert names(copy)["generation"] > before
    assert reader.refresh()  # a merge is a new generation, not a rollback
    assert reader.segment_count == 1 and len(reader) == 28


# ---------------------------------------------------------------------------- item 7: vector width


@pytest.mark.parametrize("width", [DIM + 4, DIM - 2])
def test_segment_of_another_vector_width(copy: Path, tmp_path: Path, width: int) -> None:
    name = segment_files(copy)[2]
    other = tmp_path / "other"
    with Index.create(other, vector_dim=width, index_id=names(copy)["index_id"]) as index:
        index.add_many(
            [Document(d.key, d.text, vector=np.ones(width, np.float32)) for d in map(doc, range(20, 30))]
        )
        index.commit()
    shutil.copyfile(other / "seg-000001.wseg", copy / name)
    restamp(copy / name, number=int(name[4:10]))
    refresh_identities(copy)  # a manifest that agrees with the file's size and checksum
    assert_refused(copy, name, "wide")


def test_segment_of_another_vector_precision(copy: Path, tmp_path: Path) -> None:
    name = segment_files(copy)[2]
    other = tmp_path / "half"
    with Index.create(
        other, vector_dim=DIM, vector_dtype="float16", index_id=names(copy)["index_id"]
    ) as index:
        index.add_many([doc(i) for i in range(20, 30)])
        index.commit()
    shutil.copyfile(other / "seg-000001.wseg", copy / name)
    restamp(copy / name, number=int(name[4:10]))
    refresh_identities(copy)
    assert_refused(copy, name, "float16")


def test_vector_matrix_disagreeing_with_meta(copy: Path) -> None:
    name = segment_files(copy)[2]
    edit_meta(copy / name, vector_dim=DIM * 2, vectors=5)  # 5 x 8 = 40 values, as the matrix holds
    refresh_identities(copy)
    assert_refused(copy, name)


# ---------------------------------------------------------------------------- item 8: counts


def _peak_bytes(call: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        with contextlib.suppress(CorruptIndexError):
            call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("documents", [10**8, 10**10, 10**12])
def test_inflated_document_count_allocates_nothing(copy: Path, documents: int) -> None:
    name = segment_files(copy)[2]
    edit_meta(copy / name, documents=documents)
    refresh_identities(copy)
    edit_manifest(copy, lambda body: body["segments"][2].update(documents=documents))
    assert len((copy / name).read_bytes()) < 16_000
    for readonly in (True, False):
        assert _peak_bytes(partial(Index.open, copy, readonly=readonly)) < 32 << 20
    assert _peak_bytes(lambda: SegmentReader(copy / name)) < 32 << 20
    assert _peak_bytes(lambda: scrub_directory(copy)) < 32 << 20
    assert_refused(copy, name, "elements")


@pytest.mark.parametrize("field", ["terms", "postings", "links", "vectors"])
def test_inflated_counts_are_refused_at_open(copy: Path, field: str) -> None:
    name = segment_files(copy)[1]
    edit_meta(copy / name, **{field: 10**11})
    refresh_identities(copy)
    assert _peak_bytes(lambda: Index.open(copy, readonly=True)) < 32 << 20
    assert_refused(copy, name)


def test_inflated_counts_in_a_section_and_in_meta_agreeing(copy: Path) -> None:
    """Counts that agree with each other but not with the file: bounded by the file's length."""
    name = segment_files(copy)[1]

    def edit(sections: dict[str, Any]) -> None:
        sections["doc.times"] = np.zeros(1000, dtype=np.float64)  # 1000 times, 10 documents elsewhere

    rewrite_sections(copy / name, edit)
    refresh_identities(copy)
    assert_refused(copy, name, "doc.times")


# ---------------------------------------------------------------------------- item 9: many entries


def test_thousands_of_duplicate_entries_are_refused_and_scrub_reads_each_file_once(copy: Path) -> None:
    edit_manifest(copy, lambda body: body["segments"].extend([dict(body["segments"][0])] * 6000))
    with pytest.raises(CorruptIndexError, match="more than once"):
        Index.open(copy, readonly=True)
    report = scrub_directory(copy)
    present = [p for p in copy.iterdir() if p.name.startswith("seg-")]
    assert report.files == len(present)  # every file once, whatever the manifest says
    assert len(report.problems) == 1


def test_thousands_of_entries_naming_missing_files(copy: Path) -> None:
    def edit(body: dict[str, Any]) -> None:
        template = {**body["segments"][2], "deletes": None, "deleted": 0}
        template.update(deletes_size=0, deletes_checksum=0)
        body["segments"] += [{**template, "name": f"seg-{n:06d}.wseg"} for n in range(4, 6001)]
        body["next_segment"] = 6001

    edit_manifest(copy, edit)
    with pytest.raises(CorruptIndexError, match="missing"):
        Index.open(copy, readonly=True)
    report = scrub_directory(copy)
    assert report.files == len([p for p in copy.iterdir() if p.name.startswith("seg-")])
    assert sum("No such file" in problem for problem in report.problems) == 6000 - 3


# ---------------------------------------------------------------------------- item 10: next_segment


@pytest.mark.parametrize("next_segment", [1, 2, 3])
def test_next_segment_at_or_below_a_listed_one_is_refused(copy: Path, next_segment: int) -> None:
    edit_manifest(copy, lambda body: body.update(next_segment=next_segment))
    assert_refused(copy, "next_segment")


@pytest.mark.parametrize("fork", [False, True])
def test_commit_never_writes_over_a_listed_file(copy: Path, fork: bool) -> None:
    """Even if the writer's next number went wrong after open, the commit refuses, the file intact."""
    before = (copy / "seg-000002.wseg").read_bytes()
    writer = Index.open(copy)
    writer._next_segment = 2
    writer._fork_encode_min = 1 if fork else None
    writer.add(doc(77))
    with pytest.raises(CorruptIndexError, match=r"seg-000002\.wseg"):
        writer.commit()
    writer.close(discard=True)  # the refused commit left the write uncommitted
    assert (copy / "seg-000002.wseg").read_bytes() == before
    assert Index.open(copy, readonly=True).scrub().ok


# ---------------------------------------------------------------------------- item 13: scrub


def damage_header(file: Path) -> None:
    data = bytearray(file.read_bytes())
    data[16] ^= 0xFF  # the file length field
    file.write_bytes(bytes(data))


def damage_table(file: Path) -> None:
    data = bytearray(file.read_bytes())
    data[64 + 40] ^= 0xFF  # the first entry's offset
    file.write_bytes(bytes(data))


def damage_meta(file: Path) -> None:
    data = bytearray(file.read_bytes())
    at = data.index(b'"documents"')  # the meta JSON (sorted keys, so not always its first key)
    data[at + 1] ^= 0x01
    file.write_bytes(bytes(data))


def test_scrub_reports_every_damaged_file(copy: Path) -> None:
    first, second, third = segment_files(copy)
    tombstones = names(copy)["segments"][0]["deletes"]
    damage_header(copy / first)
    damage_table(copy / second)
    damage_meta(copy / third)
    damage_table(copy / tombstones)
    with pytest.raises(CorruptIndexError):
        Index.open(copy, readonly=True)
    report = scrub_directory(copy)
    for name in (first, second, third, tombstones):
        assert any(name in problem for problem in report.problems), (name, report.problems)
    assert main(["scrub", str(copy)]) == 1


def test_scrub_without_a_readable_manifest_checks_every_file(copy: Path) -> None:
    third = segment_files(copy)[2]
    (copy / MANIFEST).write_bytes(b"{not json")
    damage_table(copy / third)
    report = scrub_directory(copy)
    assert any(MANIFEST in problem for problem in report.problems)
    assert any(third in problem for problem in report.problems)
    assert report.files == len([p for p in copy.iterdir() if p.name.startswith("seg-")])
    (copy / MANIFEST).unlink()
    assert any("missing" in problem for problem in scrub_directory(copy).problems)
    assert main(["scrub", str(copy)]) == 1


def test_scrub_exit_status(copy: Path, tmp_path: Path) -> None:
    assert main(["scrub", str(copy)]) == 0
    assert Index.open(copy, readonly=True).scrub() == scrub_directory(copy)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["scrub", str(empty)]) == 2  # not an index at all: a usage error
    assert main(["scrub", str(tmp_path / "nowhere")]) == 2
    with pytest.raises(IndexNotFoundError):
        scrub_directory(empty)


def test_manifest_decoding_is_bounded_by_entries_not_by_claims() -> None:
    """The manifest decoder refuses an id that is not 128 bits of hex."""
    body = Manifest(1, "english", DIM, index_id="ab" * 16).to_bytes()
    assert Manifest.from_bytes(body, Path("MANIFEST")).index_id == "ab" * 16
    bad = Manifest(1, "english", DIM, index_id="AB" * 16).to_bytes()
    with pytest.raises(CorruptIndexError, match="index id"):
        Manifest.from_bytes(bad, Path("MANIFEST"))


@pytest.mark.parametrize("index_id", ["ab" * 16 + "\n", "ab" * 15, "ab" * 17, " " + "ab" * 16])
def test_an_index_id_is_exactly_32_hex_digits_nothing_around_them(index_id: str, tmp_path: Path) -> None:
    """A trailing newline once passed the manifest's check (a regex ending in ``$``, which allows one)."""
    body = Manifest(1, "english", DIM, index_id=index_id).to_bytes()
    with pytest.raises(CorruptIndexError, match="index id"):
        Manifest.from_bytes(body, Path("MANIFEST"))
    assert not is_index_id(index_id)
    with pytest.raises(InvalidParameterError, match="32 lowercase hex"):
        Index.create(tmp_path / "index", index_id=index_id)
    assert not (tmp_path / "index").exists()


def test_scrub_racing_a_commit_that_sweeps_is_not_damage(copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A lock-free scrub whose files a writer's merge sweeps mid-scrub starts again on the new manifest."""
    from weftsearch.storage import integrity

    writer = Index.open(copy)
    original = integrity._scrub_segment
    merged: list[int] = []

    def racing(*args: Any) -> list[str]:
        if not merged:
            merged.append(writer.merge(force=True))  # new manifest, the old segments swept
        return original(*args)

    monkeypatch.setattr(integrity, "_scrub_segment", racing)
    report = scrub_directory(copy)
    writer.close()
    assert merged == [3]
    assert report.ok, report.problems
    assert report.files == 1
