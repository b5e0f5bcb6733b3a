"""File identity checks and the storage-level scrub.

:func:`check_segment` is what opening an index checks of each segment the
manifest lists: the header's stamp (this index, this segment number), the
file's size and header-and-table checksum as the manifest records them, its
document count and its vector width. O(1) per segment: nothing beyond the
header and table is read.

:func:`scrub_directory` reads every file of an index directory in full and
reports every problem it finds, one message each. It needs no ``Index`` and
no lock, so it works on an index that cannot be opened (a damaged manifest,
a damaged header): it checks the manifest if it is readable, each file it
names, and every other file in the directory that matches the index's file
name patterns. Each file is read at most once, so its work is bounded by the
distinct files that exist, whatever the manifest claims.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from weftsearch.errors import CorruptIndexError, IndexNotFoundError, IndexStorageError, WeftError
from weftsearch.storage.codec import FileStamp, SectionFile
from weftsearch.storage.directory import (
    MANIFEST,
    IndexDirectory,
    Manifest,
    SegmentEntry,
    check_file,
    read_tombstones,
)
from weftsearch.storage.files import read_regular
from weftsearch.storage.segment import SegmentReader

__all__ = ["ScrubReport", "check_segment", "scrub_directory"]

_SEGMENT_FILE = re.compile(r"^seg-\d{6}\.wseg$")
_DELETES_FILE = re.compile(r"^seg-\d{6}\.del-\d{6}$")


@dataclass(frozen=True, slots=True)
class ScrubReport:
    """What a scrub checked and what it found damaged.

    Attributes:
        files: files read in full.
        bytes: bytes read.
        problems: one message per damaged file, section, posting list or record,
            and per disagreement between a file and the manifest.

    """

    files: int
    bytes: int
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """True when nothing is damaged."""
        return not self.problems


def check_segment(reader: SegmentReader, entry: SegmentEntry, manifest: Manifest) -> None:
    """Check that ``reader`` is the segment ``entry`` of ``manifest`` names. O(1), no section read.

    Raises:
        CorruptIndexError: naming the file and what disagrees: another index's
            file, another segment's, another size or checksum, another
            document count or vector width than the manifest records.

    """
    check_file(reader.section_file, FileStamp(manifest.index_id, entry.number), entry.size, entry.checksum)
    if reader.n_docs != entry.documents:
        raise CorruptIndexError(
            f"{reader.path}: holds {reader.n_docs} documents, manifest says {entry.documents}"
        )
    if reader.vector_dim is not None and reader.vector_dim != manifest.vector_dim:
        raise CorruptIndexError(
            f"{reader.path}: vectors are {reader.vector_dim} wide, the index's are {manifest.vector_dim}"
        )
    wanted = str(manifest.extra.get("vector_dtype", "float32"))
    if reader.n_vectors and reader.vector_dtype != wanted:
        raise CorruptIndexError(f"{reader.path}: vectors are {reader.vector_dtype}, the index's are {wanted}")


def _scrub_segment(path: Path, entry: SegmentEntry | None, manifest: Manifest | None) -> list[str]:
    reader = SegmentReader(path)
    problems = reader.verify()
    if entry is not None and manifest is not None:
        try:
            check_segment(reader, entry, manifest)
        except CorruptIndexError as exc:
            problems.append(str(exc))
    return problems


def _scrub_tombstones(path: Path) -> list[str]:
    """An unnamed tombstone file: its sections and their agreement with each other."""
    section_file = SectionFile(path)
    problems = section_file.verify()
    if not problems:
        counts = section_file.array("count")
        bits = section_file.array("bits")
        if (
            counts.dtype.str != "<u8"
            or bits.dtype.str != "|u1"
            or counts.shape[0] != 2
            or bits.shape[0] != (int(counts[0]) + 7) // 8
        ):
            problems.append(f"{path}: tombstone sections disagree")
    return problems


#: How many times a scrub starts again when a writer's commit replaced the manifest under it.
_ATTEMPTS = 3


def scrub_directory(path: Path) -> ScrubReport:
    """Read every file of the index at ``path`` and report each problem (docs/FORMAT.md, "Scrub").

    Takes no lock: if a writer commits meanwhile and sweeps a file the scrub
    was about to read, the scrub starts again on the new manifest (a few
    times at most), so a busy index is not reported damaged. A file the
    manifest does not name that vanishes meanwhile was swept, not lost.
    Complexity: O(bytes of the distinct files present); each file is read once.

    Raises:
        IndexNotFoundError: ``path`` is not a directory, or holds neither a
            manifest nor any file named like an index's (not an index at all).

    """
    report, raced = _scrub_once(path)
    for _ in range(_ATTEMPTS - 1):
        if not raced:
            break
        report, raced = _scrub_once(path)
    return report


def _manifest_bytes(path: Path) -> bytes | None:
    try:
        return read_regular(path / MANIFEST)
    except OSError:  # CorruptIndexError included: read_manifest reports what it is
        return None


def _scrub_once(path: Path) -> tuple[ScrubReport, bool]:
    """One scrub, and whether a named file was missing while the manifest changed (a racing commit)."""
    listed = _manifest_bytes(path)
    directory = IndexDirectory(path)
    if not path.is_dir():
        raise IndexNotFoundError(f"no index at {path}: not a directory")
    try:
        present = sorted(
            child.name
            for child in path.iterdir()
            if _SEGMENT_FILE.match(child.name) or _DELETES_FILE.match(child.name)
        )
    except OSError as exc:
        raise IndexStorageError(f"{path}: cannot list ({exc})") from None
    problems: list[str] = []
    manifest: Manifest | None = None
    if not (path / MANIFEST).exists():
        if not present:
            raise IndexNotFoundError(f"no index at {path}: neither {MANIFEST} nor any segment file")
        problems.append(f"{path / MANIFEST}: missing")
    else:
        try:
            manifest = directory.read_manifest()
        except WeftError as exc:
            problems.append(str(exc))
    files, size = 0, 0
    seen: set[str] = set()

    missing = False

    def read(name: str, check: Callable[[], list[str]], named: bool = True) -> None:
        nonlocal files, size, missing
        if name in seen:
            return
        seen.add(name)
        target = path / name
        try:
            length = target.lstat().st_size
            found = check()
        except FileNotFoundError as exc:
            # Gone: a named file is damage (unless a racing commit swept it; then
            # the scrub starts again), an unnamed one was swept, not lost.
            if named:
                missing = True
                problems.append(f"{target}: listed in the manifest, {exc.strerror or 'missing'}")
            return
        except WeftError as exc:
            found = [str(exc)]
            length = target.lstat().st_size if target.is_symlink() or target.exists() else 0
        except OSError as exc:
            problems.append(f"{target}: {exc.strerror or exc}")
            return
        files += 1
        size += length
        problems.extend(found)

    if manifest is not None:
        for entry in manifest.segments:
            read(entry.name, partial(_scrub_segment, path / entry.name, entry, manifest))
            if entry.deletes is not None:
                read(entry.deletes, partial(_tombstone_problems, path, entry, manifest))
    for name in present:
        if name in seen:
            continue
        suffix = "" if manifest is None else " (a file the manifest does not name)"
        before = len(problems)
        if _SEGMENT_FILE.match(name):
            read(name, partial(_scrub_segment, path / name, None, None), named=False)
        else:
            read(name, partial(_scrub_tombstones, path / name), named=False)
        problems[before:] = [problem + suffix for problem in problems[before:]]
    raced = missing and _manifest_bytes(path) != listed
    return ScrubReport(files, size, tuple(problems)), raced


def _tombstone_problems(path: Path, entry: SegmentEntry, manifest: Manifest) -> list[str]:
    assert entry.deletes is not None
    read_tombstones(
        path / entry.deletes, entry.documents, entry.deleted, entry=entry, index_id=manifest.index_id
    )
    return []
