"""Query and document vectors: the frozen vector sets beside the collections, and a user's own folder."""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

import weftsearch.eval.pins as pin_table
from weftsearch.errors import (
    CorpusFormatError,
    DatasetIntegrityError,
    PairingError,
)
from weftsearch.eval.collection import (
    Collection,
    CollectionVectors,
    _lines,
    _verify_files,
    sha256_bytes,
)
from weftsearch.eval.pins import (
    _VECTOR_FILES,
    DEFAULT_VECTORS,
    FROZEN_MODEL,
    CollectionPins,
    StrPath,
)


def _record_get(record: Mapping[str, Any], where: str, *path: str) -> Any:
    value: Any = record
    for step in path:
        if not isinstance(value, Mapping) or step not in value:
            raise CorpusFormatError(f"{where}: missing {'.'.join(path)}")
        value = value[step]
    return value


def _vector_ids(data: bytes, path: str, written: Mapping[str, str] | None) -> list[str]:
    """Row ids of an ids file; a second tab-separated column must be the id as written."""
    ids: list[str] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(_lines(data, path), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        columns = line.strip().split("\t")
        key = columns[0].strip()
        if len(columns) > 2:
            raise CorpusFormatError(f"{where}: expected one id (or id and id as written), got {line!r}")
        if len(columns) == 2:
            as_written = columns[1].strip()
            if written is None or written.get(key) != as_written:
                expected = None if written is None else written.get(key)
                raise CorpusFormatError(
                    f"{where}: row {key!r} says the file wrote it {as_written!r}, "
                    f"the collection says {expected!r}"
                )
        if key in seen:
            raise CorpusFormatError(f"{where}: id {key!r} repeats (first on line {seen[key]})")
        seen[key] = number
        ids.append(key)
    return ids


def _aligned(
    matrix: NDArray[np.float32], ids: Sequence[str], keys: Sequence[str], where: str, what: str
) -> NDArray[np.float32]:
    rows = {key: row for row, key in enumerate(ids)}
    missing = [key for key in keys if key not in rows]
    wanted = set(keys)
    extra = [key for key in ids if key not in wanted]
    if missing or extra:
        problems = []
        if missing:
            problems.append(f"{len(missing)} {what} without a row (e.g. {', '.join(map(repr, missing[:3]))})")
        if extra:
            problems.append(f"{len(extra)} rows for no {what} (e.g. {', '.join(map(repr, extra[:3]))})")
        raise CorpusFormatError(f"{where}: the ids do not match the collection: {'; '.join(problems)}")
    order = np.fromiter((rows[key] for key in keys), dtype=np.int64, count=len(keys))
    aligned = np.ascontiguousarray(matrix[order], dtype=np.float32)
    aligned.setflags(write=False)
    return aligned


def load_frozen_vectors(
    collection: Collection,
    *,
    variant: str = DEFAULT_VECTORS,
    folder: StrPath | None = None,
    model: str = FROZEN_MODEL,
    any_snapshot: bool = False,
    pins: Mapping[str, CollectionPins] | None = None,
) -> CollectionVectors:
    """Load and check the frozen vectors of ``collection``, aligned to its documents and queries.

    Checks, in order: the five files against their pins (when the variant is
    pinned); ``record.json``'s collection, model and width; the ``.npy`` and
    ids files against the hashes in ``record.json``; the source files named in
    ``record.json`` against the collection's manifest; the ids against the
    collection's keys and query ids; the SHA-256 of the input texts (joined by
    newlines, in row order) against the collection's texts.

    Args:
        collection: what the vectors must line up with.
        variant: the vector set, a folder under ``<collection folder>/vectors/``.
        folder: read from here instead of ``<collection folder>/vectors/<variant>``.
        model: the model name ``record.json`` must give.
        any_snapshot: waive file-hash mismatches (not structural ones, and not
            query texts); the result is then unpublishable.
        pins: the pins to verify against; ``None`` means :data:`PINS`.

    Raises:
        FileNotFoundError: a file is missing.
        DatasetIntegrityError: a hash differs (unless ``any_snapshot``).
        PairingError: the query vectors were embedded from other texts than
            the collection's queries: they belong to other queries, so this is
            refused even with ``any_snapshot`` (re-embed with ``weft-search embed``).
        CorpusFormatError: the record names another collection or model, the
            width or row counts disagree, or the ids do not match the
            collection's.

    """
    table = pin_table.PINS if pins is None else pins
    base = Path(folder) if folder is not None else collection.folder / "vectors" / variant
    pinned = table[collection.name].vectors.get(variant) if collection.name in table else None
    what = f"{collection.name} vectors {variant}"
    if pinned is None:
        blobs, manifest = _verify_files(base, _VECTOR_FILES, {}, what, True)
    else:
        blobs, manifest = _verify_files(base, _VECTOR_FILES, {p.path: p for p in pinned}, what, any_snapshot)
    reading = _Reading(
        base,
        blobs,
        {record.path: record.sha256 for record in manifest},
        any_snapshot,
        publishable=collection.publishable and (pinned is None or all(r.verified for r in manifest)),
    )
    recorded_model, dims = _check_identity(reading, collection, model)
    _check_sources(reading, collection)
    matrices = {part: _read_part(reading, collection, part, rows, dims) for part, rows in _PARTS}
    return CollectionVectors(
        collection=collection.name,
        variant=variant,
        model=str(recorded_model),
        dims=dims,
        documents=matrices["corpus"],
        queries=matrices["queries"],
        document_keys=collection.document_keys,
        query_ids=collection.query_ids,
        record=reading.record,
        manifest=manifest,
        publishable=reading.publishable,
    )


class _Reading:
    """One vector folder being read: its files, ``record.json``, and whether it is still publishable."""

    def __init__(
        self,
        base: Path,
        blobs: Mapping[str, bytes],
        actual: Mapping[str, str],
        any_snapshot: bool,
        publishable: bool,
    ) -> None:
        self.base = base
        self.blobs = blobs
        self.actual = actual  # file name -> the SHA-256 of its bytes
        self.any_snapshot = any_snapshot
        self.publishable = publishable
        self.where = str(base / "record.json")
        try:
            record = json.loads(blobs["record.json"].decode("utf-8"))
        except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
            raise CorpusFormatError(f"{self.where}: not JSON ({exc})") from None
        if not isinstance(record, dict):
            raise CorpusFormatError(f"{self.where}: expected a JSON object")
        self.record: dict[str, Any] = record

    def get(self, *path: str) -> Any:
        """The value at ``path`` in ``record.json`` (a clear error when absent)."""
        return _record_get(self.record, self.where, *path)

    def waive(self, message: str) -> None:
        """A mismatch ``any_snapshot`` may waive (the vectors are then unpublishable); else refused."""
        if not self.any_snapshot:
            raise DatasetIntegrityError(
                message + "; pass any_snapshot=True to use them anyway, unpublishable"
            )
        self.publishable = False


def _check_identity(reading: _Reading, collection: Collection, model: str) -> tuple[Any, int]:
    """The recorded model and width, once the record names this collection and ``model``."""
    where = reading.where
    named = reading.get("collection")
    if named != collection.name:
        raise CorpusFormatError(f"{where}: vectors of collection {named!r}, not {collection.name!r}")
    recorded_model = reading.get("model", "name")
    if recorded_model != model:
        raise CorpusFormatError(f"{where}: vectors made with model {recorded_model!r}, expected {model!r}")
    dims = reading.get("dims")
    if not isinstance(dims, int) or isinstance(dims, bool) or dims <= 0:
        raise CorpusFormatError(f"{where}: dims must be a positive integer, got {dims!r}")
    return recorded_model, dims


def _check_sources(reading: _Reading, collection: Collection) -> None:
    """The source files the record names are the collection's, with the same hashes (or waived)."""
    where = reading.where
    manifest_sha = {entry.path: entry.sha256 for entry in collection.manifest}
    sources = reading.get("source_files")
    if not isinstance(sources, Mapping):
        raise CorpusFormatError(f"{where}: source_files must be an object")
    for source, digest in sources.items():
        if source not in manifest_sha:
            raise CorpusFormatError(f"{where}: made from {source!r}, which the collection does not read")
        if digest != manifest_sha[source]:
            reading.waive(
                f"{where}: made from {source} with SHA-256 {digest}, but the collection's "
                f"{source} has SHA-256 {manifest_sha[source]}"
            )


def _load_matrix(data: bytes, path: Path, dims: int) -> NDArray[np.float32]:
    """A ``.npy`` file's 2-D float32 matrix of width ``dims``, every value finite."""
    try:
        matrix = np.load(io.BytesIO(data), allow_pickle=False)
    except (ValueError, EOFError, OSError) as exc:
        raise CorpusFormatError(f"{path}: not a readable .npy array ({exc})") from None
    if not isinstance(matrix, np.ndarray) or matrix.ndim != 2 or matrix.dtype != np.float32:
        shape = getattr(matrix, "shape", None)
        dtype = getattr(matrix, "dtype", None)
        raise CorpusFormatError(f"{path}: expected a 2-D float32 matrix, got {shape} {dtype}")
    if matrix.shape[1] != dims:
        raise CorpusFormatError(f"{path}: width {matrix.shape[1]}, record.json says {dims}")
    if not np.isfinite(matrix).all():
        raise CorpusFormatError(f"{path}: holds a non-finite value")
    return matrix


def _read_part(
    reading: _Reading, collection: Collection, part: str, what_rows: str, dims: int
) -> NDArray[np.float32]:
    """The ``corpus`` or ``queries`` matrix, its files and texts checked, rows in the collection's order."""
    where, base = reading.where, reading.base
    npy_name = reading.get(part, "npy")
    ids_name = reading.get(part, "ids_file")
    if (npy_name, ids_name) != (f"{part}.npy", f"{part}_ids.txt"):
        raise CorpusFormatError(f"{where}: {part} files are {npy_name!r} and {ids_name!r}, not the usual")
    for name, key in ((npy_name, "npy_sha256"), (ids_name, "ids_sha256")):
        expected = reading.get(part, key)
        if expected != reading.actual[name]:
            reading.waive(
                f"{base / name}: record.json gives SHA-256 {expected}, the file has {reading.actual[name]}"
            )
    matrix = _load_matrix(reading.blobs[npy_name], base / npy_name, dims)
    written = collection.query_file_ids if part == "queries" else None
    ids = _vector_ids(reading.blobs[ids_name], str(base / ids_name), written)
    if len(ids) != matrix.shape[0]:
        raise CorpusFormatError(f"{base / npy_name}: {matrix.shape[0]} rows, but {len(ids)} ids")
    count = reading.get(part, "count")
    if count != len(ids):
        raise CorpusFormatError(f"{where}: {part} count {count!r}, but {len(ids)} rows")
    keys = collection.query_ids if part == "queries" else collection.document_keys
    aligned = _aligned(matrix, ids, keys, str(base / ids_name), what_rows)
    _check_texts(reading, collection, part, what_rows, ids)
    return aligned


def _check_texts(
    reading: _Reading, collection: Collection, part: str, what_rows: str, ids: list[str]
) -> None:
    """The rows were embedded from this collection's texts (query texts are never waived)."""
    texts: Mapping[str, str] = (
        collection.queries
        if part == "queries"
        else {document.key: document.text for document in collection.documents}
    )
    digest = sha256_bytes("\n".join(texts[key] for key in ids).encode("utf-8"))
    expected_texts = reading.get(part, "input_texts_sha256")
    if digest == expected_texts:
        return
    message = (
        f"{reading.where}: the {what_rows} were embedded from texts with SHA-256 {expected_texts}, "
        f"but this collection's {what_rows} texts hash to {digest}"
    )
    if part == "queries":
        # Vectors of other query texts answer other questions: no snapshot waiver makes
        # them this collection's query vectors.
        fresh = collection.folder / "vectors" / "NEW"
        raise PairingError(
            f"{message}: the query vectors belong to other queries, refused even with "
            f"any_snapshot (--any-snapshot); re-embed them with `weft-search embed "
            f"--collection {collection.name} --data {collection.folder} --out {fresh}` and "
            "evaluate with --vectors NEW, or evaluate without vectors (--vectors none)"
        )
    reading.waive(message)


_PARTS = (("corpus", "documents"), ("queries", "queries"))


def _part_records(base: Path, blobs: Mapping[str, bytes]) -> dict[str, tuple[str, Mapping[str, Any]]]:
    """Per part, (where, its record entry) from ``record.json`` or ``<part>.json``, when present."""
    out: dict[str, tuple[str, Mapping[str, Any]]] = {}
    for file in ("record.json", "corpus.json", "queries.json"):
        if file not in blobs:
            continue
        where = str(base / file)
        try:
            record = json.loads(blobs[file].decode("utf-8"))
        except (ValueError, UnicodeDecodeError, RecursionError) as exc:  # RecursionError: nested too deeply
            raise CorpusFormatError(f"{where}: not a JSON record ({exc})") from None
        if not isinstance(record, dict):
            raise CorpusFormatError(f"{where}: expected a JSON object")
        if file == "record.json":  # weft-search embed --collection: one record, a section per part
            for part, _ in _PARTS:
                entry = record.get(part)
                if isinstance(entry, Mapping):
                    out[part] = (where, {**entry, "model": record.get("model")})
        else:  # weft-search embed --texts: one record per .npy
            out[file.removesuffix(".json")] = (where, record)
    return out


def load_vector_folder(
    collection: Collection,
    folder: StrPath,
    *,
    model: str | None = None,
) -> CollectionVectors:
    """Load a user's own vectors for ``collection`` from ``folder``, checked against it.

    ``folder`` holds ``corpus.npy`` + ``corpus_ids.txt`` and ``queries.npy`` +
    ``queries_ids.txt`` (a 2-D float32 matrix, and one id a line in row
    order; a second tab-separated column of the ids file is ignored). When
    ``weft-search embed`` wrote them, its records are read too and checked:
    ``record.json`` (``embed --collection``) or ``corpus.json`` and
    ``queries.json`` (``embed --texts corpus.jsonl`` and ``--texts
    queries.jsonl`` into the same folder): each file must have the SHA-256 its
    record gives, and the rows must have been embedded from these very texts
    (``input_texts_sha256``, over the texts in row order).

    A document or query without a row gets no vector (the set is then
    :attr:`CollectionVectors.partial`, and evaluation reports how many queries
    have a vector); a row whose id is not in the collection is an error.
    Nothing pins these files: their SHA-256 are recorded in the manifest.

    Args:
        collection: what the rows must belong to.
        folder: the vectors folder.
        model: the model name to require of the records (``None``: not checked).

    Raises:
        FileNotFoundError: a ``.npy`` or ids file is missing.
        CorpusFormatError: a file does not parse, widths disagree, an id
            repeats or names nothing in the collection, or a file differs
            from the hash its record gives.
        PairingError: the rows were embedded from other texts than the
            collection's (or by another model than ``model``).

    """
    base = Path(folder)
    if not base.is_dir():
        raise FileNotFoundError(f"{collection.name}: vectors folder {base} does not exist")
    files = ["corpus.npy", "corpus_ids.txt", "queries.npy", "queries_ids.txt"]
    files += [name for name in ("record.json", "corpus.json", "queries.json") if (base / name).is_file()]
    blobs, manifest = _verify_files(base, files, {}, f"{collection.name} vectors", True)
    records = _part_records(base, blobs)
    texts = {
        "corpus": {document.key: document.text for document in collection.documents},
        "queries": collection.queries,
    }
    order = {"corpus": collection.document_keys, "queries": collection.query_ids}
    matrices: dict[str, NDArray[np.float32]] = {}
    kept: dict[str, tuple[str, ...]] = {}
    models: set[str] = set()
    dims: int | None = None
    for part, what in _PARTS:
        npy_name, ids_name = f"{part}.npy", f"{part}_ids.txt"
        try:
            matrix = np.load(io.BytesIO(blobs[npy_name]), allow_pickle=False)
        except (ValueError, EOFError, OSError) as exc:
            raise CorpusFormatError(f"{base / npy_name}: not a readable .npy array ({exc})") from None
        if not isinstance(matrix, np.ndarray) or matrix.ndim != 2 or matrix.dtype.kind != "f":
            shape, dtype = getattr(matrix, "shape", None), getattr(matrix, "dtype", None)
            raise CorpusFormatError(f"{base / npy_name}: expected a 2-D float matrix, got {shape} {dtype}")
        matrix = matrix.astype(np.float32)
        if not np.isfinite(matrix).all():
            raise CorpusFormatError(f"{base / npy_name}: holds a non-finite value")
        if dims is not None and matrix.shape[1] != dims:
            raise CorpusFormatError(f"{base / npy_name}: width {matrix.shape[1]}, corpus.npy has {dims}")
        dims = int(matrix.shape[1])
        ids = [line.split("\t", 1)[0] for line in _vector_ids_loose(blobs[ids_name], str(base / ids_name))]
        if len(ids) != matrix.shape[0]:
            raise CorpusFormatError(f"{base / npy_name}: {matrix.shape[0]} rows, but {len(ids)} ids")
        known = set(order[part])
        stray = [key for key in ids if key not in known]
        if stray:
            raise CorpusFormatError(
                f"{base / ids_name}: {len(stray)} rows for no {what} of {collection.name} "
                f"(first: {', '.join(map(repr, stray[:3]))})"
            )
        if part in records:
            where, entry = records[part]
            for name, key in ((npy_name, "npy_sha256"), (ids_name, "ids_sha256")):
                actual = sha256_bytes(blobs[name])
                if entry.get(key) != actual:
                    raise CorpusFormatError(
                        f"{base / name}: {where} gives SHA-256 {entry.get(key)}, the file has {actual}"
                    )
            digest = sha256_bytes("\n".join(texts[part][key] for key in ids).encode("utf-8"))
            if entry.get("input_texts_sha256") != digest:
                raise PairingError(
                    f"{where}: the {what} were embedded from texts with SHA-256 "
                    f"{entry.get('input_texts_sha256')}, but {collection.name}'s {what} texts (in row "
                    f"order) hash to {digest}: the vectors belong to other texts; re-embed them with "
                    f"`weft-search embed --texts {collection.folder / (part + '.jsonl')} --out {base}`"
                )
            recorded = entry.get("model")
            named = recorded.get("name") if isinstance(recorded, Mapping) else None
            if isinstance(named, str):
                models.add(named)
        rows = {key: row for row, key in enumerate(ids)}
        present = tuple(key for key in order[part] if key in rows)
        picked = np.fromiter((rows[key] for key in present), dtype=np.int64, count=len(present))
        aligned = np.ascontiguousarray(matrix[picked], dtype=np.float32)
        aligned.setflags(write=False)
        matrices[part], kept[part] = aligned, present
    assert dims is not None
    if len(models) > 1:
        raise PairingError(
            f"{base}: the corpus and query vectors come from different models: {sorted(models)}"
        )
    found_model = models.pop() if models else "unknown"
    if model is not None and found_model != model:
        raise PairingError(f"{base}: vectors made with model {found_model!r}, expected {model!r}")
    partial = kept["corpus"] != collection.document_keys or kept["queries"] != collection.query_ids
    return CollectionVectors(
        collection=collection.name,
        variant=base.name,
        model=found_model,
        dims=dims,
        documents=matrices["corpus"],
        queries=matrices["queries"],
        document_keys=kept["corpus"],
        query_ids=kept["queries"],
        record={"folder": str(base), "records": sorted(name for name in files if name.endswith(".json"))},
        manifest=manifest,
        publishable=True,
        partial=partial,
    )


def _vector_ids_loose(data: bytes, path: str) -> list[str]:
    """Row ids, one a line (blank lines skipped), refusing a repeated id."""
    ids: list[str] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(_lines(data, path), start=1):
        if not line.strip():
            continue
        key = line.strip().split("\t", 1)[0].strip()
        if key in seen:
            raise CorpusFormatError(f"{path}:{number}: id {key!r} repeats (first on line {seen[key]})")
        seen[key] = number
        ids.append(key)
    return ids
