"""Interim on-disk form of an index: a manifest, a JSONL file of documents, a vector file.

This is the simple form the core-engine milestone allows; the segment format
(checksummed, memory-mapped, incremental) replaces it without changing the
``Index.create`` / ``Index.open`` / ``commit`` API or the CLI.

Layout of an index directory::

    weft-index.json        manifest: format name and version, analyzer, vector
                           width, document count, names and SHA-256 of the
                           data files of the current commit
    documents-<n>.jsonl    one stored document a line (commit number n)
    vectors-<n>.npy        float32 rows, referenced by the "vector" field

A commit writes new data files under the next commit number, then replaces the
manifest atomically (temporary name, fsync, rename, fsync of the directory),
then removes the previous commit's files. A crash at any point leaves the last
manifest and the files it names intact. Storage knows nothing of scoring.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from weftsearch.engine.documents import Document
from weftsearch.errors import (
    CorruptIndexError,
    FormatVersionError,
    IndexNotFoundError,
    IndexStorageError,
    WeftError,
)

__all__ = ["IndexMeta", "write_index", "read_index", "MANIFEST", "FORMAT_NAME", "FORMAT_VERSION"]

MANIFEST = "weft-index.json"
FORMAT_NAME = "weft-search-interim"
FORMAT_VERSION = 1


@dataclass(frozen=True, slots=True)
class IndexMeta:
    """What an index records about itself besides its documents."""

    analyzer: str
    vector_dim: int | None


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_file(path: Path, data: bytes) -> None:
    with open(path, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def _document_record(document: Document, vector_row: int | None) -> dict[str, Any]:
    return {
        "key": document.key,
        "text": document.text,
        "links": list(document.links),
        "time": document.timestamp,
        "fields": dict(document.fields),
        "vector": vector_row,
    }


def _read_manifest(path: Path) -> dict[str, Any]:
    manifest_path = path / MANIFEST
    if not path.exists():
        raise IndexNotFoundError(f"no index at {path}: the directory does not exist")
    if not path.is_dir():
        raise IndexStorageError(f"{path} is a file, not an index directory")
    if not manifest_path.exists():
        raise IndexNotFoundError(f"no index at {path}: {MANIFEST} is missing")
    try:
        manifest = json.loads(manifest_path.read_bytes())
    except (OSError, ValueError) as exc:
        raise CorruptIndexError(f"{manifest_path}: unreadable manifest ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_NAME:
        raise CorruptIndexError(f"{manifest_path}: not a weft-search index manifest")
    version = manifest.get("version")
    if version != FORMAT_VERSION:
        raise FormatVersionError(
            f"{manifest_path}: format version {version!r}; this code reads version {FORMAT_VERSION}"
        )
    return manifest


def write_index(
    path: Path,
    meta: IndexMeta,
    documents: Sequence[Document],
    *,
    create: bool = False,
    overwrite: bool = False,
) -> None:
    """Write ``documents`` as the index's next commit (see the module docstring).

    Raises:
        IndexStorageError: the directory cannot be created or written, or
            ``create`` was asked and a non-empty directory is in the way.

    """
    try:
        if create:
            if path.exists() and not path.is_dir():
                raise IndexStorageError(f"{path} is a file, not a directory")
            if path.exists() and any(path.iterdir()) and not overwrite:
                raise IndexStorageError(f"{path} is not empty; pass overwrite=True to replace it")
            path.mkdir(parents=True, exist_ok=True)
            previous: dict[str, Any] = {"commit": 0, "files": {}}
            if (path / MANIFEST).exists():
                previous = json.loads((path / MANIFEST).read_bytes())
        else:
            previous = _read_manifest(path)
        commit = int(previous.get("commit", 0)) + 1
        vectors = [d.vector for d in documents if d.vector is not None]
        rows = iter(range(len(vectors)))
        lines = [
            json.dumps(_document_record(d, next(rows) if d.vector is not None else None), ensure_ascii=False)
            for d in documents
        ]
        doc_bytes = ("\n".join(lines) + ("\n" if lines else "")).encode("utf-8")
        files = {f"documents-{commit}.jsonl": doc_bytes}
        if vectors:
            buffer = io.BytesIO()
            np.save(buffer, np.stack(vectors).astype(np.float32), allow_pickle=False)
            files[f"vectors-{commit}.npy"] = buffer.getvalue()
        for name, data in files.items():
            _write_file(path / name, data)
        manifest = {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "commit": commit,
            "analyzer": meta.analyzer,
            "vector_dim": meta.vector_dim,
            "documents": len(documents),
            "files": {name: _sha256(data) for name, data in files.items()},
        }
        temporary = path / (MANIFEST + ".tmp")
        _write_file(temporary, json.dumps(manifest, indent=2, sort_keys=True).encode("utf-8"))
        os.replace(temporary, path / MANIFEST)
        _fsync_dir(path)
        for name in previous.get("files", {}):
            if name not in files:
                (path / name).unlink(missing_ok=True)
    except WeftError:
        raise
    except (OSError, ValueError) as exc:
        raise IndexStorageError(f"cannot write index at {path}: {exc}") from exc


def read_index(path: Path) -> tuple[IndexMeta, list[Document]]:
    """Read the committed documents of the index at ``path``, verifying checksums.

    Raises:
        IndexNotFoundError, FormatVersionError, CorruptIndexError.

    """
    manifest = _read_manifest(path)
    contents: dict[str, bytes] = {}
    for name, digest in manifest.get("files", {}).items():
        try:
            data = (path / name).read_bytes()
        except OSError as exc:
            raise CorruptIndexError(f"{path / name}: cannot read ({exc})") from None
        if _sha256(data) != digest:
            raise CorruptIndexError(f"{path / name}: checksum mismatch")
        contents[name] = data
    commit = manifest["commit"]
    vectors = None
    vector_bytes = contents.get(f"vectors-{commit}.npy")
    if vector_bytes is not None:
        vectors = np.load(io.BytesIO(vector_bytes), allow_pickle=False)
    documents = []
    try:
        for line in contents.get(f"documents-{commit}.jsonl", b"").decode("utf-8").splitlines():
            record = json.loads(line)
            row = record.pop("vector")
            vector = None if row is None or vectors is None else vectors[row]
            documents.append(Document(vector=vector, links=tuple(record.pop("links")), **record))
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise CorruptIndexError(f"{path}: stored documents do not decode ({exc})") from None
    if len(documents) != manifest.get("documents"):
        raise CorruptIndexError(
            f"{path}: manifest lists {manifest.get('documents')} documents, found {len(documents)}"
        )
    return IndexMeta(analyzer=manifest["analyzer"], vector_dim=manifest.get("vector_dim")), documents
