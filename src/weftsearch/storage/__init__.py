"""Storage: the segment format and the index directory. Knows documents and bytes, never scoring.

See docs/FORMAT.md for every byte.
"""

from __future__ import annotations

from weftsearch.storage.codec import FORMAT_VERSION, SectionFile, checksum, encode_sections
from weftsearch.storage.directory import (
    INDEX_VERSION,
    LOCK,
    MANIFEST,
    IndexDirectory,
    Manifest,
    SegmentEntry,
    WriterLock,
)
from weftsearch.storage.integrity import ScrubReport, scrub_directory
from weftsearch.storage.segment import SegmentReader
from weftsearch.storage.segment_writer import SegmentDocument, encode_segment

__all__ = [
    "FORMAT_VERSION",
    "INDEX_VERSION",
    "MANIFEST",
    "LOCK",
    "SectionFile",
    "checksum",
    "encode_sections",
    "IndexDirectory",
    "Manifest",
    "SegmentEntry",
    "WriterLock",
    "SegmentDocument",
    "SegmentReader",
    "encode_segment",
    "ScrubReport",
    "scrub_directory",
]
