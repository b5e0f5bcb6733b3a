"""Fetching a collection (and its frozen vectors) from its pinned sources, each file checked."""

from __future__ import annotations

import hashlib
import http.client
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO

import weftsearch.eval.pins as pin_table
from weftsearch._atomic import atomic_file
from weftsearch.errors import (
    CorpusFormatError,
    DatasetIntegrityError,
    InvalidParameterError,
)
from weftsearch.eval.collection import FileRecord, sha256_bytes
from weftsearch.eval.pins import _CHUNK, CollectionPins, FilePin, StrPath


@dataclass(frozen=True, slots=True)
class FetchResult:
    """What :func:`fetch` did.

    Attributes:
        folder: the collection folder the files are in (``<to_dir>/<name>``).
        files: every pinned file, verified.
        downloaded: the paths that were downloaded (the others were already
            present with the pinned size and SHA-256).

    """

    folder: Path
    files: tuple[FileRecord, ...]
    downloaded: tuple[str, ...]


def _rebase(url: str, base_url: str | None) -> str:
    """``url`` with its scheme and host replaced by ``base_url``'s (whose path is prefixed)."""
    parts = urllib.parse.urlsplit(url)
    if base_url is not None:
        base = urllib.parse.urlsplit(base_url)
        path = base.path.rstrip("/") + parts.path
        parts = urllib.parse.SplitResult(base.scheme, base.netloc, path, parts.query, "")
    if parts.scheme not in ("http", "https"):
        raise InvalidParameterError(f"only http and https downloads are allowed, not {parts.geturl()!r}")
    return parts.geturl()


def _matches(path: Path, size: int, sha256: str) -> FileRecord | None:
    """A record of ``path`` when it exists with exactly ``size`` bytes and ``sha256``."""
    if not path.is_file() or path.stat().st_size != size:
        return None
    data = path.read_bytes()
    digest = sha256_bytes(data)
    return FileRecord(path.name, len(data), digest, size, sha256) if digest == sha256 else None


def _copy_checked(source: IO[bytes], out: IO[bytes], size: int, sha256: str, where: str) -> None:
    """Copy ``source`` into ``out`` while hashing; refuse more than ``size`` bytes or another hash."""
    digest = hashlib.sha256()
    total = 0
    while True:
        chunk = source.read(_CHUNK)
        if not chunk:
            break
        total += len(chunk)
        if total > size:
            raise DatasetIntegrityError(
                f"{where}: expected {size} bytes with SHA-256 {sha256}, got more than {size} bytes; refused"
            )
        digest.update(chunk)
        out.write(chunk)
    actual = digest.hexdigest()
    if total != size or actual != sha256:
        raise DatasetIntegrityError(
            f"{where}: expected {size} bytes with SHA-256 {sha256}, got {total} bytes with SHA-256 "
            f"{actual}; refused"
        )


def _download(url: str, out: IO[bytes], size: int, sha256: str, where: str, timeout: float) -> None:
    request = urllib.request.Request(url, headers={"User-Agent": "weft-search"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            length = response.headers.get("Content-Length")
            if length is not None and length.isdigit() and int(length) != size:
                raise DatasetIntegrityError(
                    f"{where}: expected {size} bytes with SHA-256 {sha256}, the server offers "
                    f"{int(length)} bytes; refused"
                )
            _copy_checked(response, out, size, sha256, where)
    except urllib.error.HTTPError as exc:
        exc.close()
        raise OSError(f"{where}: download from {url} failed: HTTP {exc.code} {exc.reason}") from exc
    except urllib.error.URLError as exc:
        raise OSError(f"{where}: download from {url} failed: {exc.reason}") from exc
    except http.client.HTTPException as exc:
        raise OSError(f"{where}: download from {url} failed: {exc!r}") from exc


def _member(archive: tarfile.TarFile, basename: str, where: str) -> tarfile.TarInfo:
    found = [m for m in archive.getmembers() if m.isfile() and m.name.rsplit("/", 1)[-1] == basename]
    if len(found) != 1:
        raise CorpusFormatError(f"{where}: expected one member named {basename!r}, found {len(found)}")
    return found[0]


def fetch(
    name: str,
    to_dir: StrPath,
    *,
    base_url: str | None = None,
    pins: Mapping[str, CollectionPins] | None = None,
    timeout: float = 60.0,
) -> FetchResult:
    """Download collection ``name`` from its public upstream into ``<to_dir>/<name>/``.

    Every file is checked against its pinned size and SHA-256 while it
    streams in; it is written to a temporary file beside its target and
    renamed into place only when it matches, so a failed download leaves no
    partial file and never replaces a good one. Files already present with
    the pinned size and hash are not downloaded again. Files that come from an
    archive are extracted from the (verified) archive, which is not kept.
    :func:`load_collection` reads the result with ``data_dir=to_dir``.

    Args:
        name: a collection in ``pins``.
        to_dir: the parent folder; the files go into ``<to_dir>/<name>/``.
        base_url: replace the scheme and host of every upstream URL with this
            one (a mirror, or a local server in tests); its path is prefixed.
        pins: the pins (and URLs); ``None`` means :data:`PINS`.
        timeout: seconds to wait on the network for each request.

    Returns:
        The folder and the verified files.

    Raises:
        InvalidParameterError: an unknown collection, a file without an
            upstream, or a URL that is not http(s).
        DatasetIntegrityError: a download differs from its pin; nothing is written.
        CorpusFormatError: an archive lacks a member.
        OSError: the download failed.

    """
    table = pin_table.PINS if pins is None else pins
    if name not in table:
        raise InvalidParameterError(f"unknown collection {name!r} (known: {', '.join(sorted(table))})")
    collection = table[name]
    folder = Path(to_dir) / name
    records: list[FileRecord] = []
    downloaded: list[str] = []
    pending: dict[str, list[FilePin]] = {}
    for pin in collection.files:
        target = folder / pin.path
        present = _matches(target, pin.size, pin.sha256)
        if present is not None:
            records.append(replace(present, path=pin.path))
            continue
        if pin.url is not None:
            url = _rebase(pin.url, base_url)
            with atomic_file(target) as out:
                _download(url, out, pin.size, pin.sha256, f"{name}/{pin.path}", timeout)
            downloaded.append(pin.path)
            records.append(FileRecord(pin.path, pin.size, pin.sha256, pin.size, pin.sha256))
        elif pin.archive is not None:
            if collection.archive(pin.archive) is None:
                raise InvalidParameterError(f"{name}/{pin.path}: unknown archive {pin.archive!r}")
            pending.setdefault(pin.archive, []).append(pin)
        else:
            raise InvalidParameterError(f"{name}/{pin.path}: no upstream URL to fetch it from")
    for archive_name, members in pending.items():
        archive = collection.archive(archive_name)
        assert archive is not None
        url = _rebase(archive.url, base_url)
        with tempfile.TemporaryFile() as spool:
            _download(url, spool, archive.size, archive.sha256, f"{name}/{archive_name}", timeout)
            spool.seek(0)
            with tarfile.open(fileobj=spool, mode="r:*") as tar:
                for pin in members:
                    where = f"{name}/{archive_name}:{pin.path}"
                    member = _member(tar, pin.path.rsplit("/", 1)[-1], where)
                    source = tar.extractfile(member)
                    if source is None:
                        raise CorpusFormatError(f"{where}: member {member.name!r} cannot be read")
                    with source, atomic_file(folder / pin.path) as out:
                        _copy_checked(source, out, pin.size, pin.sha256, where)
                    downloaded.append(pin.path)
                    records.append(FileRecord(pin.path, pin.size, pin.sha256, pin.size, pin.sha256))
    order = {pin.path: index for index, pin in enumerate(collection.files)}
    records.sort(key=lambda record: order[record.path])
    return FetchResult(folder, tuple(records), tuple(downloaded))
