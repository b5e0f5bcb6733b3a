"""Loaders that turn corpus files into :class:`Document` and :class:`Query` values.

Two corpus layouts are read:

``jsonl``
    One JSON object a line::

        {"key": "d1", "title": "BM25", "text": "...", "links": ["d2"],
         "time": "2021-06-01", "fields": {"topic": "lexical"}}

    ``key`` may also be spelled ``_id`` or ``id`` (a string, or an integer
    that is turned into one). ``title``, ``text``, ``links``, ``time`` and
    ``fields`` are optional. ``time`` is an ISO-8601 string (a trailing ``Z``
    and offsets are understood; no offset means UTC) or POSIX seconds.
    ``fields`` is an object of scalars (string, number, boolean) or lists
    of strings or of numbers (list fields: ``"tags": ["a", "b"]``); ``null``
    values are skipped. Other keys are ignored. An object that names a
    member twice, or gives its key under two names (``key`` and ``_id``), is
    refused: which one would win is not the reader's guess to make.
``beir``
    The BEIR layout, given as its folder: ``corpus.jsonl`` (``_id``,
    ``title``, ``text``, ``metadata``), ``queries.jsonl`` (``_id``, ``text``)
    and ``qrels/<split>.tsv``. Scalar ``metadata`` values become fields;
    nested ones are dropped.

In both, a document's text is ``title.strip() + " " + text.strip()`` when the
title is non-empty (the rule the frozen vectors of the shared datasets were
embedded with), and the title is also kept in ``fields["title"]`` for display.

Named text fields (``text_fields=("title",)``, the CLI's ``--text-field title``):
each named key of a record (a string) becomes ``Document.text_fields[name]``
instead; a ``title`` read so is neither joined to the text nor kept in
``fields``.

Frozen vectors are a 2-D ``.npy`` matrix whose row order is given by a sibling
ids file, one id a line (``corpus.npy`` with ``corpus_ids.txt`` by default).
They are attached to documents (or queries) by key. A document without a row
simply has no vector; a row whose id is not in the corpus is an error.

Every format problem raises :class:`~weftsearch.errors.CorpusFormatError`
whose message starts ``<file>:<line>:``: bad JSON, JSON nested deeper than
:data:`MAX_JSON_DEPTH`, bytes that are not UTF-8, a number out of range, a
string that UTF-8 cannot encode, or a key that breaks the key rule
(:func:`~weftsearch.documents.check_key`). Files are read line by line, and a
progress bar appears (on a terminal) for reads that take more than a second.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, TextIO, Union

import numpy as np
from numpy.typing import NDArray
from tqdm.auto import tqdm

from weftsearch.documents import Document, FieldValue, TimeLike, key_problem
from weftsearch.engine.query import Query
from weftsearch.engine.search import SearchResults
from weftsearch.errors import CorpusFormatError, InvalidParameterError, WeftError

__all__ = [
    "CorpusFormat",
    "CORPUS_FORMATS",
    "FrozenVectors",
    "NamedQuery",
    "Qrels",
    "PROGRESS_DELAY",
    "MAX_JSON_DEPTH",
    "parse_json_object",
    "text_lines",
    "detect_format",
    "corpus_file",
    "iter_documents",
    "load_documents",
    "iter_queries",
    "load_queries",
    "load_qrels",
    "load_vectors",
    "load_query_vector",
    "default_ids_path",
    "parse_time",
    "trec_run_lines",
    "write_trec_run",
]

#: The layouts :func:`load_documents` reads; ``auto`` picks one from the path.
CorpusFormat = Literal["auto", "jsonl", "beir"]
#: Accepted values of ``format`` (and ``--format`` on the command line).
CORPUS_FORMATS: tuple[str, ...] = ("auto", "jsonl", "beir")
#: Relevance judgements: query id -> document id -> grade.
Qrels = dict[str, dict[str, int]]
#: Seconds a step must run before its progress bar appears.
PROGRESS_DELAY = 1.0

#: The deepest nesting of arrays and objects a JSON line may have. A document needs 3
#: (the record, ``fields``, a value); the bound keeps the parser's recursion far from
#: Python's limit, so a crafted line is a format error rather than a ``RecursionError``.
MAX_JSON_DEPTH = 64

StrPath = Union[str, os.PathLike[str]]
_KEY_NAMES = ("key", "_id", "id")
_VECTOR_CHECK_ROWS = 65536


# ---------------------------------------------------------------------- small helpers


def _where(path: Path, line: int | None = None) -> str:
    return f"{path}:{line}" if line is not None else str(path)


def _progress(total: int | None, desc: str, unit: str, progress: bool | None) -> tqdm[Any]:
    """A tqdm bar that appears after :data:`PROGRESS_DELAY` seconds (``None``: on a terminal)."""
    disable = None if progress is None else not progress
    return tqdm(
        total=total,
        desc=desc,
        unit=unit,
        unit_scale=unit == "B",
        disable=disable,
        delay=PROGRESS_DELAY,
        leave=False,
    )


class _RepeatedMemberError(ValueError):
    """A JSON object names a member twice (raised inside the decoder, reported with the line)."""


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    record = dict(pairs)
    if len(record) != len(pairs):
        seen: set[str] = set()
        for name, _ in pairs:
            if name in seen:
                raise _RepeatedMemberError(name)
            seen.add(name)
    return record


def _json_depth(line: str) -> int:
    """The deepest nesting of ``[`` and ``{`` outside strings, or a bound on it. O(len(line)).

    A line with no more brackets than :data:`MAX_JSON_DEPTH` cannot nest
    deeper: two counts in C answer for it (nearly every line); only other
    lines are scanned character by character.
    """
    brackets = line.count("[") + line.count("{")
    if brackets <= MAX_JSON_DEPTH:
        return brackets
    depth = deepest = 0
    in_string = escaped = False
    for char in line:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def parse_json_object(line: bytes | str, where: str) -> dict[str, Any]:
    """One JSONL line as a JSON object, or :class:`~weftsearch.errors.CorpusFormatError` naming ``where``.

    Refused, each with the reason: bytes that are not UTF-8, invalid JSON, a
    value that is not an object, an object naming a member twice (at any
    depth), nesting deeper than :data:`MAX_JSON_DEPTH`, and an integer too
    long for Python to read (over 4,300 digits). ``NaN`` and ``Infinity``
    are read as floats, for the caller to refuse where a finite number is
    needed. O(len(line)).
    """
    if isinstance(line, bytes):
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CorpusFormatError(f"{where}: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    else:
        text = line
    # Checked before decoding: the decoder recurses once per level.
    if _json_depth(text) > MAX_JSON_DEPTH:
        raise CorpusFormatError(f"{where}: JSON nested deeper than {MAX_JSON_DEPTH} levels")
    try:
        record = json.loads(text, object_pairs_hook=_unique_members)
    except _RepeatedMemberError as exc:
        raise CorpusFormatError(f"{where}: the JSON object names member {exc.args[0]!r} twice") from None
    except RecursionError:  # unreachable after the depth check; kept so no RecursionError escapes
        raise CorpusFormatError(f"{where}: JSON nested too deeply") from None
    except ValueError as exc:
        raise CorpusFormatError(f"{where}: invalid JSON ({exc})") from None
    if not isinstance(record, dict):
        raise CorpusFormatError(f"{where}: expected a JSON object, got {type(record).__name__}")
    return record


def text_lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` for each line of a UTF-8 text file, line ends removed, streaming.

    Raises:
        CorpusFormatError: a line that is not UTF-8 (the message names file and line).
        OSError: the file cannot be read.

    """
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise CorpusFormatError(
                    f"{_where(path, number)}: not UTF-8 ({exc.reason} at byte {exc.start} of the line)"
                ) from None
            yield number, line.rstrip("\r\n")


def _json_lines(path: Path, desc: str, progress: bool | None) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line number, object)`` for each non-blank line of a JSONL file, streaming."""
    size = path.stat().st_size
    with open(path, "rb") as handle, _progress(size, desc, "B", progress) as bar:
        for number, raw in enumerate(handle, start=1):
            bar.update(len(raw))
            if not raw.strip():
                continue
            yield number, parse_json_object(raw, _where(path, number))


def _key(record: Mapping[str, Any], where: str, what: str, *, check: bool = False) -> str:
    """The record's key under its one key name; ``check``: also apply the key rule."""
    names = [name for name in _KEY_NAMES if name in record]
    if len(names) > 1:
        raise CorpusFormatError(
            f"{where}: {what} gives its key twice ({' and '.join(map(repr, names))}); give exactly one"
        )
    for name in names:
        value = record[name]
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str) or not value:
            raise CorpusFormatError(f"{where}: {what} {name!r} must be a non-empty string, got {value!r}")
        if check:  # (a document's key is checked by Document itself)
            problem = key_problem(value)
            if problem is not None:
                raise CorpusFormatError(f"{where}: {what} {name!r} {problem}, got {value!r}")
        return value
    raise CorpusFormatError(f"{where}: {what} has no key (expected one of {', '.join(_KEY_NAMES)})")


def _string(record: Mapping[str, Any], name: str, where: str) -> str:
    value = record.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise CorpusFormatError(f"{where}: {name!r} must be a string, got {type(value).__name__}")
    return value


def parse_time(value: object, where: str = "time") -> TimeLike | None:
    """Read a corpus ``time`` value: ISO-8601 string, POSIX seconds, or ``None``.

    A trailing ``Z`` means UTC, as does a string without an offset.

    Raises:
        CorpusFormatError: any other value, or a string that is not ISO-8601.

    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise CorpusFormatError(f"{where}: time must be an ISO-8601 string or POSIX seconds, got {value!r}")
    if isinstance(value, (int, float)):
        try:
            seconds = float(value)
        except OverflowError:  # an integer beyond float's range
            raise CorpusFormatError(f"{where}: time {value!r} is out of range for seconds") from None
        if not math.isfinite(seconds):
            raise CorpusFormatError(f"{where}: time must be finite, got {value!r}")
        return seconds
    if isinstance(value, str):
        text = value.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            return datetime.fromisoformat(text)
        except ValueError:
            raise CorpusFormatError(f"{where}: time {value!r} is not an ISO-8601 date or datetime") from None
    raise CorpusFormatError(
        f"{where}: time must be an ISO-8601 string or POSIX seconds, got {type(value).__name__}"
    )


def _links(value: object, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise CorpusFormatError(f"{where}: 'links' must be a list of keys, got {type(value).__name__}")
    links = []
    for item in value:
        if isinstance(item, int) and not isinstance(item, bool):
            item = str(item)
        if not isinstance(item, str) or not item:
            raise CorpusFormatError(f"{where}: 'links' must hold non-empty strings, got {item!r}")
        links.append(item)
    return tuple(links)


def _fields(value: object, where: str, name: str, *, strict: bool) -> dict[str, FieldValue]:
    """Scalar fields of ``value``; ``strict`` rejects nested values, otherwise they are dropped."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise CorpusFormatError(f"{where}: {name!r} must be an object, got {type(value).__name__}")
    fields: dict[str, FieldValue] = {}
    for field_name, item in value.items():
        if item is None:
            continue
        if isinstance(item, (str, int, float, bool)):
            if isinstance(item, float) and not math.isfinite(item):
                raise CorpusFormatError(f"{where}: {name}.{field_name} is not finite")
            fields[field_name] = item
        elif strict and isinstance(item, list):
            fields[field_name] = tuple(item)  # a list field: Document checks its values
        elif strict:
            raise CorpusFormatError(
                f"{where}: {name}.{field_name} must be a string, number, boolean or list, got "
                f"{type(item).__name__}"
            )
    return fields


def _document_text(title: str, text: str) -> str:
    title, text = title.strip(), text.strip()
    return f"{title} {text}" if title else text


# ---------------------------------------------------------------------- frozen vectors


def default_ids_path(vectors: StrPath) -> Path:
    """The ids file that goes with a vector file by default: ``X.npy`` -> ``X_ids.txt``."""
    path = Path(vectors)
    return path.with_name(f"{path.stem}_ids.txt")


@dataclass(frozen=True, slots=True)
class FrozenVectors:
    """Precomputed vectors and the ids that give their row order.

    Attributes:
        ids: one id per row, in row order.
        matrix: float32 array ``(len(ids), dim)``, possibly memory-mapped.
        path: the ``.npy`` file.
        ids_path: the ids file.

    """

    ids: tuple[str, ...]
    matrix: NDArray[np.float32]
    path: Path
    ids_path: Path

    @property
    def dim(self) -> int:
        """The width of every vector."""
        return int(self.matrix.shape[1])

    def __len__(self) -> int:
        return len(self.ids)

    def rows(self) -> dict[str, int]:
        """Map from id to row number."""
        return {key: row for row, key in enumerate(self.ids)}


def _read_ids(path: Path) -> tuple[str, ...]:
    ids: list[str] = []
    first_line: dict[str, int] = {}
    for number, raw in text_lines(path):
        key = raw.strip()
        if not key:
            raise CorpusFormatError(f"{_where(path, number)}: empty id")
        problem = key_problem(key)
        if problem is not None:
            raise CorpusFormatError(f"{_where(path, number)}: id {problem}, got {key!r}")
        if key in first_line:
            raise CorpusFormatError(
                f"{_where(path, number)}: id {key!r} repeats (first on line {first_line[key]})"
            )
        first_line[key] = number
        ids.append(key)
    return tuple(ids)


def load_vectors(vectors: StrPath, ids: StrPath | None = None) -> FrozenVectors:
    """Read a 2-D ``.npy`` vector matrix and the ids file that orders its rows.

    Args:
        vectors: the ``.npy`` file (float32 preferred; any real dtype is converted).
        ids: the ids file, one id a line; ``None`` means :func:`default_ids_path`.

    Raises:
        CorpusFormatError: not a 2-D numeric matrix, a non-finite value, a
            repeated or empty id, or a row count that differs from the id count.
        OSError: a file cannot be read.

    """
    path = Path(vectors)
    ids_path = default_ids_path(path) if ids is None else Path(ids)
    if not ids_path.exists():
        raise CorpusFormatError(f"{path}: no ids file {ids_path} (give one with --vector-ids)")
    try:
        matrix = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, EOFError) as exc:
        raise CorpusFormatError(f"{path}: not a readable .npy array ({exc})") from None
    if not isinstance(matrix, np.ndarray):
        raise CorpusFormatError(f"{path}: expected a single .npy array, not an archive")
    if matrix.ndim != 2 or matrix.shape[1] == 0:
        raise CorpusFormatError(f"{path}: expected a 2-D matrix (rows, dim), got shape {matrix.shape}")
    if not (np.issubdtype(matrix.dtype, np.floating) or np.issubdtype(matrix.dtype, np.integer)):
        raise CorpusFormatError(f"{path}: expected real numbers, got dtype {matrix.dtype}")
    if matrix.dtype != np.float32:
        matrix = np.asarray(matrix, dtype=np.float32)
    keys = _read_ids(ids_path)
    if len(keys) != matrix.shape[0]:
        raise CorpusFormatError(
            f"{path} has {matrix.shape[0]} rows but {ids_path} lists {len(keys)} ids; they must match"
        )
    for start in range(0, matrix.shape[0], _VECTOR_CHECK_ROWS):
        block = np.asarray(matrix[start : start + _VECTOR_CHECK_ROWS])
        finite = np.isfinite(block).all(axis=1)
        if not finite.all():
            row = start + int(np.flatnonzero(~finite)[0])
            raise CorpusFormatError(f"{path}: row {row} (id {keys[row]!r}) has a non-finite value")
    return FrozenVectors(ids=keys, matrix=matrix, path=path, ids_path=ids_path)


def load_query_vector(path: StrPath) -> NDArray[np.float32]:
    """Read one query vector from a ``.npy`` file: a 1-D array (or a single row).

    Raises:
        CorpusFormatError: not a finite, 1-D numeric array.
        OSError: the file cannot be read.

    """
    file = Path(path)
    try:
        # Mapped, not read: a header claiming more rows than the file holds is a ValueError
        # here, not an allocation of whatever size the header names.
        array = np.load(file, mmap_mode="r", allow_pickle=False)
    except (ValueError, EOFError) as exc:
        raise CorpusFormatError(f"{file}: not a readable .npy array ({exc})") from None
    if not isinstance(array, np.ndarray):
        raise CorpusFormatError(f"{file}: expected a single .npy array, not an archive")
    if array.ndim == 2 and array.shape[0] == 1:
        array = array[0]
    if array.ndim != 1 or array.size == 0:
        raise CorpusFormatError(f"{file}: a query vector must be 1-D, got shape {array.shape}")
    if not (np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)):
        raise CorpusFormatError(f"{file}: expected real numbers, got dtype {array.dtype}")
    vector = np.array(array, dtype=np.float32)  # a copy: the map is not kept open
    if not np.isfinite(vector).all():
        raise CorpusFormatError(f"{file}: the query vector has a non-finite value")
    return vector


# ---------------------------------------------------------------------- documents


def detect_format(path: StrPath) -> Literal["jsonl", "beir"]:
    """The layout of ``path``: a folder holding ``corpus.jsonl`` is BEIR, a ``.jsonl`` file is JSONL.

    Raises:
        CorpusFormatError: neither.
        FileNotFoundError: ``path`` does not exist.

    """
    file = Path(path)
    if not file.exists():
        raise FileNotFoundError(f"no such file or folder: {file}")
    if file.is_dir():
        if (file / "corpus.jsonl").is_file():
            return "beir"
        raise CorpusFormatError(f"{file}: a folder, but without corpus.jsonl (the BEIR layout)")
    if file.name.endswith(".jsonl"):
        return "jsonl"
    raise CorpusFormatError(f"{file}: cannot tell the format; pass --format jsonl or --format beir")


def corpus_file(path: StrPath, format: CorpusFormat = "auto") -> tuple[Path, Literal["jsonl", "beir"]]:
    """The file to read for corpus ``path`` in ``format``, and the resolved format.

    A BEIR corpus may be given as its folder or as its ``corpus.jsonl``.

    Raises:
        CorpusFormatError: unknown format, or ``path`` does not fit it.
        FileNotFoundError: ``path`` does not exist.

    """
    file = Path(path)
    if format not in CORPUS_FORMATS:
        raise CorpusFormatError(f"unknown corpus format {format!r}; choose from {', '.join(CORPUS_FORMATS)}")
    resolved = detect_format(file) if format == "auto" else format
    if not file.exists():
        raise FileNotFoundError(f"no such file or folder: {file}")
    if file.is_dir():
        if resolved == "jsonl":
            raise CorpusFormatError(f"{file}: a folder; the jsonl format takes a .jsonl file")
        file = file / "corpus.jsonl"
        if not file.is_file():
            raise CorpusFormatError(f"{file.parent}: no corpus.jsonl (the BEIR layout)")
    return file, resolved


def _document(
    record: Mapping[str, Any],
    where: str,
    resolved: Literal["jsonl", "beir"],
    vector: NDArray[np.float32] | None,
    text_fields: Sequence[str] = (),
) -> Document:
    key = _key(record, where, "document")
    named = {name: value for name in text_fields if (value := _string(record, name, where).strip())}
    title = "" if "title" in text_fields else _string(record, "title", where)
    text = _string(record, "text", where)
    if resolved == "beir":
        fields = _fields(record.get("metadata"), where, "metadata", strict=False)
        links: tuple[str, ...] = ()
        time = parse_time(record.get("time"), where) if "time" in record else None
    else:
        fields = _fields(record.get("fields"), where, "fields", strict=True)
        links = _links(record.get("links"), where)
        time = parse_time(record.get("time"), where)
    if title.strip():
        fields["title"] = title.strip()
    try:
        return Document(
            key=key,
            text=_document_text(title, text),
            vector=vector,
            links=links,
            time=time,
            fields=fields,
            text_fields=named,
        )
    except WeftError as exc:
        raise CorpusFormatError(f"{where}: {exc}") from None


def iter_documents(
    path: StrPath,
    format: CorpusFormat = "auto",
    *,
    vectors: FrozenVectors | None = None,
    progress: bool | None = None,
    text_fields: Sequence[str] = (),
) -> Iterator[Document]:
    """Stream the documents of the corpus at ``path``, attaching ``vectors`` by key.

    The checks that need the whole corpus (a key repeated on two lines, a
    vector id matching no document) run as the file is read; the second is
    raised after the last document, so consume the iterator fully (as
    ``Index.add_many`` does) before trusting it.

    Args:
        path: a ``.jsonl`` file, or a BEIR folder (or its ``corpus.jsonl``).
        format: ``"auto"``, ``"jsonl"`` or ``"beir"``.
        vectors: frozen vectors to attach; documents without a row get none.
        progress: progress bar; ``None`` shows one on a terminal after a second.
        text_fields: record keys read as named text fields (see the module docstring).

    Raises:
        CorpusFormatError: a malformed line (the message names file and line),
            a repeated key, or a vector id that is no document's key.

    """
    file, resolved = corpus_file(path, format)
    rows = vectors.rows() if vectors is not None else {}
    matrix = vectors.matrix if vectors is not None else None
    first_line: dict[str, int] = {}
    for number, record in _json_lines(file, "reading corpus", progress):
        where = _where(file, number)
        key = _key(record, where, "document")
        if key in first_line:
            raise CorpusFormatError(f"{where}: key {key!r} repeats (first on line {first_line[key]})")
        first_line[key] = number
        row = rows.get(key)
        vector = None if row is None or matrix is None else np.asarray(matrix[row], dtype=np.float32)
        yield _document(record, where, resolved, vector, text_fields)
    if vectors is not None:
        missing = [key for key in vectors.ids if key not in first_line]
        if missing:
            examples = ", ".join(repr(key) for key in missing[:3])
            raise CorpusFormatError(
                f"{vectors.ids_path}: {len(missing)} vector id(s) are not in the corpus {file} "
                f"(for example {examples})"
            )


def load_documents(
    path: StrPath,
    format: CorpusFormat = "auto",
    *,
    vectors: FrozenVectors | None = None,
    progress: bool | None = None,
    text_fields: Sequence[str] = (),
) -> list[Document]:
    """All documents of the corpus at ``path``; see :func:`iter_documents`."""
    return list(iter_documents(path, format, vectors=vectors, progress=progress, text_fields=text_fields))


# ---------------------------------------------------------------------- queries and judgements


@dataclass(frozen=True, slots=True)
class NamedQuery:
    """A query with the id it has in its file (a TREC run needs it).

    Attributes:
        qid: the query id (``_id`` in BEIR).
        query: the query itself.

    """

    qid: str
    query: Query


def _queries_file(path: Path) -> Path:
    if path.is_dir():
        file = path / "queries.jsonl"
        if not file.is_file():
            raise CorpusFormatError(f"{path}: a folder, but without queries.jsonl (the BEIR layout)")
        return file
    return path


def iter_queries(
    path: StrPath,
    *,
    vectors: FrozenVectors | None = None,
    only: Iterable[str] | None = None,
    progress: bool | None = None,
) -> Iterator[NamedQuery]:
    """Stream the queries of a BEIR-style ``queries.jsonl`` (``_id``, ``text``).

    Args:
        path: the queries file, or a BEIR folder holding ``queries.jsonl``.
        vectors: query vectors to attach by id. Rows whose id is not in the
            file are ignored (a vector file may cover more queries than a split).
        only: keep only these query ids (e.g. those judged in one qrels file).
        progress: progress bar; ``None`` shows one on a terminal after a second.

    Raises:
        CorpusFormatError: a malformed line or a repeated query id.

    """
    file = _queries_file(Path(path))
    rows = vectors.rows() if vectors is not None else {}
    matrix = vectors.matrix if vectors is not None else None
    wanted = None if only is None else set(only)
    first_line: dict[str, int] = {}
    for number, record in _json_lines(file, "reading queries", progress):
        where = _where(file, number)
        qid = _key(record, where, "query", check=True)  # query ids are written to runs and ids files
        if qid in first_line:
            raise CorpusFormatError(f"{where}: query id {qid!r} repeats (first on line {first_line[qid]})")
        first_line[qid] = number
        if "text" not in record:
            raise CorpusFormatError(f"{where}: query {qid!r} has no 'text'")
        text = _string(record, "text", where)
        if wanted is not None and qid not in wanted:
            continue
        row = rows.get(qid)
        vector = None if row is None or matrix is None else np.asarray(matrix[row], dtype=np.float32)
        try:
            query = Query(text=text, vector=vector)
        except WeftError as exc:
            raise CorpusFormatError(f"{where}: {exc}") from None
        yield NamedQuery(qid, query)


def load_queries(
    path: StrPath,
    *,
    vectors: FrozenVectors | None = None,
    only: Iterable[str] | None = None,
    progress: bool | None = None,
) -> list[NamedQuery]:
    """All queries of a queries file; see :func:`iter_queries`.

    Raises:
        CorpusFormatError: as :func:`iter_queries`, and also when ``vectors``
            are given but none of their ids is a query id of the file (the
            wrong vector file).

    """
    queries = list(iter_queries(path, vectors=vectors, only=only, progress=progress))
    if vectors is not None and queries and all(named.query.vector is None for named in queries):
        raise CorpusFormatError(f"{vectors.ids_path}: no id matches a query in {_queries_file(Path(path))}")
    return queries


def load_qrels(path: StrPath) -> Qrels:
    """Read a qrels file: BEIR's TSV (``query-id corpus-id score``, header optional) or four columns.

    Four columns come in two layouts, told apart by the whole file: TREC's
    ``qid iteration docid grade``, whose second column is the same on every
    line (the iteration, usually ``0``), and the SMART collections' (CACM,
    CISI) ``qid docid 0 0``, whose second column varies while the last two
    are constant (such files carry no grades: every listed pair is graded 1).
    A file that fits neither, or a single line that could be either (unless
    its second column is ``0`` or ``Q0``), is refused rather than guessed.

    Raises:
        CorpusFormatError: a line with the wrong number of columns, a non-integer
            grade, four columns in neither layout, or bytes that are not UTF-8
            (each naming file and line).
        OSError: the file cannot be read.

    """
    file = Path(path)
    rows: list[tuple[int, list[str]]] = []
    for number, raw in text_lines(file):
        line = raw.strip()
        if not line:
            continue
        parts = line.split()
        if number == 1 and parts[-1].lower() == "score":
            continue
        if len(parts) not in (3, 4):
            raise CorpusFormatError(f"{_where(file, number)}: expected 3 or 4 columns, got {len(parts)}")
        if rows and len(parts) != len(rows[0][1]):
            raise CorpusFormatError(
                f"{_where(file, number)}: {len(parts)} columns, but line {rows[0][0]} has {len(rows[0][1])}"
            )
        rows.append((number, parts))
    smart = False
    if rows and len(rows[0][1]) == 4:
        seconds = {parts[1] for _, parts in rows}
        tails = {(parts[2], parts[3]) for _, parts in rows}
        if len(seconds) == 1 and (len(rows) > 1 or seconds <= {"0", "Q0"}):
            smart = False  # TREC: one iteration value throughout
        elif len(seconds) > 1 and len(tails) == 1:
            smart = True  # qid docid 0 0
        else:
            raise CorpusFormatError(
                f"{file}: four columns in neither known layout (TREC's 'qid iteration docid grade' has "
                "one iteration value throughout; CACM/CISI's 'qid docid 0 0' has constant last columns)"
            )
    qrels: Qrels = {}
    for number, parts in rows:
        if smart:
            qid, docid, grade = parts[0], parts[1], "1"
        elif len(parts) == 4:
            qid, docid, grade = parts[0], parts[2], parts[3]
        else:
            qid, docid, grade = parts
        try:
            qrels.setdefault(qid, {})[docid] = int(grade)
        except ValueError:
            raise CorpusFormatError(f"{_where(file, number)}: grade {grade!r} is no integer") from None
    return qrels


# ---------------------------------------------------------------------- run files


def _check_run_token(value: str, what: str) -> str:
    if not value or any(ch.isspace() for ch in value):
        raise InvalidParameterError(f"{what} {value!r} cannot be written to a TREC run (empty or whitespace)")
    return value


def trec_run_lines(qid: str, results: SearchResults, tag: str = "weft") -> Iterator[str]:
    """The TREC run lines of one query: ``qid Q0 docid rank score tag``.

    Ranks are 1-based and follow the fused order; scores are written in full
    precision (``repr``), so distinct scores stay distinct. Note that
    trec_eval re-sorts by score and breaks ties by document id (descending),
    which can differ from weft-search's key-ascending tie-break.

    Raises:
        InvalidParameterError: an id or tag is empty or holds whitespace.

    """
    _check_run_token(qid, "query id")
    _check_run_token(tag, "run tag")
    for hit in results:
        _check_run_token(hit.key, "document key")
        yield f"{qid} Q0 {hit.key} {hit.rank} {hit.score!r} {tag}\n"


def write_trec_run(handle: TextIO, qid: str, results: SearchResults, tag: str = "weft") -> int:
    """Write the run lines of one query to ``handle``; return how many were written."""
    count = 0
    for line in trec_run_lines(qid, results, tag):
        handle.write(line)
        count += 1
    return count
