"""Helpers that craft index files with valid checksums: edited manifests, re-stamped files.

Used by the identity, corruption and fuzz tests to make substitutions that only the
identity checks (docs/FORMAT.md, "Identity") can notice, never the checksums.
"""

from __future__ import annotations

import bisect
import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from weftsearch.storage import MANIFEST, checksum
from weftsearch.storage.codec import FileStamp, SectionFile, read_stamp, stamped_header
from weftsearch.storage.segment import SegmentReader


def edit_manifest(path: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    """Apply ``edit`` to the manifest body of the index at ``path`` and re-seal its CRC32C."""
    outer = json.loads((path / MANIFEST).read_text())
    edit(outer["body"])
    canonical = json.dumps(outer["body"], sort_keys=True, separators=(",", ":")).encode("utf-8")
    outer["crc32c"] = checksum(canonical)
    (path / MANIFEST).write_text(json.dumps(outer, sort_keys=True, indent=1))


def refresh_identities(path: Path) -> None:
    """Record every listed file's current size and checksum in the manifest (as if it were the original)."""

    def edit(body: dict[str, Any]) -> None:
        for entry in body["segments"]:
            segment = SectionFile(path / entry["name"])
            entry["size"], entry["checksum"] = segment.length, segment.identity
            if entry["deletes"] is not None:
                deletes = SectionFile(path / entry["deletes"])
                entry["deletes_size"], entry["deletes_checksum"] = deletes.length, deletes.identity

    edit_manifest(path, edit)


def restamp(
    file: Path, *, index_id: str | None = None, number: int | None = None, generation: int | None = None
) -> None:
    """Rewrite the stamp of section file ``file`` (header CRC re-sealed): a crafted, valid header."""
    data = file.read_bytes()
    old = read_stamp(data[:64])
    stamp = FileStamp(
        old.index_id if index_id is None else index_id,
        old.number if number is None else number,
        old.generation if generation is None else generation,
    )
    file.write_bytes(stamped_header(data, stamp) + data[64:])


def stamp_of(file: Path) -> FileStamp:
    """The stamp in ``file``'s header."""
    return read_stamp(file.read_bytes()[:64])


def set_version(file: Path, version: int) -> None:
    """Write ``version`` into a section file's header and re-seal the header CRC32C."""
    data = bytearray(file.read_bytes())
    struct.pack_into("<I", data, 8, version)
    struct.pack_into("<I", data, 28, checksum(bytes(data[:28]) + bytes(data[32:64])))
    file.write_bytes(bytes(data))


def sections_of(file: Path) -> dict[str, Any]:
    """Every section of ``file`` as a writable numpy copy."""
    source = SectionFile(file)
    return {name: source.array(name).copy() for name in source.names}


def rewrite_sections(file: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    """Re-encode ``file`` with its sections edited by ``edit``: every checksum valid, its stamp kept."""
    from weftsearch.storage.codec import encode_sections

    stamp = stamp_of(file)
    sections = sections_of(file)
    edit(sections)
    data = encode_sections(sections)
    file.write_bytes(stamped_header(data, stamp) + data[64:])


def edit_meta(file: Path, **changes: Any) -> None:
    """Change a segment's ``meta`` JSON (re-encoded with valid checksums, stamp kept)."""
    import numpy as np

    def edit(sections: dict[str, Any]) -> None:
        meta = json.loads(bytes(sections["meta"]))
        meta.update(changes)
        raw = json.dumps(meta, sort_keys=True, separators=(",", ":")).encode("ascii")
        sections["meta"] = np.frombuffer(raw, dtype=np.uint8)

    rewrite_sections(file, edit)


def damage_record(reader: SegmentReader, local: int) -> None:
    """Make the stored record of ``local`` fail its checksum, as the reader reads it."""
    sound, block_verdicts = reader._checked_record, reader._block_verdicts
    home = bisect.bisect_right(reader._stored_table()[1], local) - 1

    def checked(doc: int) -> bytes | None:
        return None if doc == local else sound(doc)

    def verdicts(block: int, state: NDArray[np.uint8]) -> None:  # a search's verdicts, a block at a time
        block_verdicts(block, state)
        if block == home:
            state[local] = 2

    setattr(reader, "_checked_record", checked)  # noqa: B010 - an instance's own, for this reader only
    setattr(reader, "_block_verdicts", verdicts)  # noqa: B010
