"""A loaded collection and its manifest, and reading a collection's files checked against their pins."""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from weftsearch.documents import Document
from weftsearch.errors import (
    CorpusFormatError,
    DatasetIntegrityError,
    InvalidParameterError,
)
from weftsearch.eval.pins import _USED, COLLECTIONS, FilePin, Judgements, Provenance, StrPath


def provenance_of(records: Iterable[FileRecord]) -> Provenance:
    """Where ``records`` stand against their pins.

    ``"pinned"``: every file has a pin and matches it (a published
    collection, byte for byte). ``"unpinned"``: no file has a pin (your own
    data: nothing public to compare with, so nothing is contradicted; the
    files' SHA-256 are recorded instead). ``"mismatched"``: at least one file
    differs from its pin, or a pinned collection holds a file without one (not
    the published snapshot: numbers made from it are unpublishable).
    """
    records = list(records)
    pinned = [record for record in records if record.pinned]
    if not pinned:
        return "unpinned"
    if len(pinned) == len(records) and all(record.verified for record in records):
        return "pinned"
    return "mismatched"


def sha256_bytes(data: bytes) -> str:
    """The SHA-256 of ``data``, lowercase hex."""
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True, slots=True)
class FileRecord:
    """One file as it was found, and what it was pinned to be.

    Attributes:
        path: the path inside the collection (or vectors) folder.
        size: its actual size in bytes.
        sha256: its actual SHA-256.
        expected_size: the pinned size, ``None`` when unpinned.
        expected_sha256: the pinned SHA-256, ``None`` when unpinned.

    """

    path: str
    size: int
    sha256: str
    expected_size: int | None
    expected_sha256: str | None

    @property
    def pinned(self) -> bool:
        """Whether a pin exists for this file."""
        return self.expected_sha256 is not None

    @property
    def verified(self) -> bool:
        """Whether the file has exactly its pinned size and SHA-256."""
        return self.size == self.expected_size and self.sha256 == self.expected_sha256

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready record (for reports)."""
        return {
            "path": self.path,
            "size": self.size,
            "sha256": self.sha256,
            "expected_size": self.expected_size,
            "expected_sha256": self.expected_sha256,
            "verified": self.verified,
        }


@dataclass(frozen=True, eq=False)
class CollectionVectors:
    """Frozen vectors of one collection, with rows in the collection's order.

    Attributes:
        collection: the collection's name.
        variant: the vector set (folder name under ``vectors/``).
        model: the model name from ``record.json``.
        dims: the vector width.
        documents: float32 ``(len(documents), dims)``, row ``i`` for
            ``collection.documents[i]``; read-only.
        queries: float32 ``(len(queries), dims)``, row ``i`` for
            ``collection.query_ids[i]``; read-only.
        document_keys: the keys of :attr:`documents`' rows.
        query_ids: the ids of :attr:`queries`' rows.
        record: the parsed ``record.json``.
        manifest: the vector files with their sizes and hashes.
        publishable: ``False`` when the collection is unpublishable or any
            check was waived with ``any_snapshot=True``.
        partial: ``True`` when some documents or queries have no row (a
            user's own vectors, :func:`load_vector_folder`): then
            :attr:`document_keys` and :attr:`query_ids` are the ones with a
            row, in the collection's order, and the others get no vector.

    """

    collection: str
    variant: str
    model: str
    dims: int
    documents: NDArray[np.float32]
    queries: NDArray[np.float32]
    document_keys: tuple[str, ...]
    query_ids: tuple[str, ...]
    record: Mapping[str, Any]
    manifest: tuple[FileRecord, ...]
    publishable: bool
    partial: bool = False

    @property
    def provenance(self) -> Provenance:
        """``"mismatched"`` when unpublishable, else :func:`provenance_of` the vector files."""
        return "mismatched" if not self.publishable else provenance_of(self.manifest)

    def document_vector(self, key: str) -> NDArray[np.float32]:
        """The vector of document ``key``.

        Raises:
            KeyError: no such document.

        """
        row: NDArray[np.float32] = self.documents[self.document_keys.index(key)]
        return row

    def query_vector(self, qid: str) -> NDArray[np.float32]:
        """The vector of query ``qid``.

        Raises:
            KeyError: no such query.

        """
        rows = self._query_rows()
        if qid not in rows:
            raise KeyError(qid)
        row: NDArray[np.float32] = self.queries[rows[qid]]
        return row

    def attach(self, documents: Iterable[Document]) -> list[Document]:
        """``documents`` with their vectors set (a key without a row is an error unless :attr:`partial`).

        Raises:
            CorpusFormatError: a document has no vector here (and the set is not partial).

        """
        rows = {key: row for row, key in enumerate(self.document_keys)}
        out: list[Document] = []
        for document in documents:
            row = rows.get(document.key)
            if row is None and self.partial:
                out.append(document)  # a document of a partial set without a row has no vector
                continue
            if row is None:
                raise CorpusFormatError(
                    f"{self.collection}/{self.variant}: no vector for document {document.key!r}"
                )
            out.append(replace(document, vector=self.documents[row]))
        return out

    def has_query_vector(self, qid: str) -> bool:
        """Whether query ``qid`` has a row (always, unless :attr:`partial`)."""
        return qid in self._query_rows()

    def _query_rows(self) -> dict[str, int]:
        rows: dict[str, int] | None = self.__dict__.get("_rows")
        if rows is None:
            rows = {qid: row for row, qid in enumerate(self.query_ids)}
            self.__dict__["_rows"] = rows  # frozen dataclass: a cache, not state
        return rows


#: How :func:`derive_split` recognises a duplicate query text.
DUPLICATE_RULE = "equal after NFKC, casefold and whitespace collapse"

#: The name of the development split :meth:`Collection.with_derived_split` adds by default.
DEV_SPLIT = "dev"


def normalised_query_text(text: str) -> str:
    """``text`` as :data:`DUPLICATE_RULE` compares it: NFKC, casefolded, whitespace runs as one space."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


@dataclass(frozen=True, slots=True)
class DerivedSplit:
    """A split made from another: ``source``'s judged queries minus any that duplicate an ``against`` query.

    Attributes:
        name: the derived split's name (``dev``).
        source: the split it was taken from (``train``).
        against: the split it was deduplicated against (``test``).
        qids: the kept query ids, in the query file's order.
        removed: each removed ``source`` query id -> its twin in ``against``
            (the query whose text it duplicates, or itself when the same id
            is judged in both splits), in file order.
        rule: how a duplicate is recognised (:data:`DUPLICATE_RULE`).

    """

    name: str
    source: str
    against: str
    qids: tuple[str, ...] = field(repr=False)
    removed: Mapping[str, str]
    rule: str = DUPLICATE_RULE

    def record(self) -> dict[str, Any]:
        """JSON-ready provenance, for reports and saved profiles."""
        return {
            "name": self.name,
            "derived_from": self.source,
            "deduplicated_against": self.against,
            "queries": len(self.qids),
            "removed": [{"id": qid, "twin": twin} for qid, twin in self.removed.items()],
            "rule": self.rule,
        }


def derive_split(collection: Collection, *, name: str, source: str, against: str) -> DerivedSplit:
    """``source``'s judged queries minus those whose text (or id) duplicates a judged ``against`` query.

    A ``source`` query is removed when its text equals a judged ``against``
    query's under :data:`DUPLICATE_RULE`, or when the same id is judged in
    both splits; its twin is the first such ``against`` query in file order.

    Raises:
        InvalidParameterError: ``source`` or ``against`` is not a split of the
            collection (the message lists its splits), they are the same split,
            or no query is left.

    """
    if source == against:
        raise InvalidParameterError(
            f"{collection.name}: split {name!r} cannot be deduplicated against its own source {source!r}"
        )
    source_ids = collection.judged_query_ids(source)
    against_ids = collection.judged_query_ids(against)
    by_text: dict[str, str] = {}
    for qid in against_ids:
        by_text.setdefault(normalised_query_text(collection.queries[qid]), qid)
    against_set = set(against_ids)
    kept: list[str] = []
    removed: dict[str, str] = {}
    for qid in source_ids:
        twin = by_text.get(normalised_query_text(collection.queries[qid]))
        if twin is None and qid in against_set:
            twin = qid  # the same query judged in both splits: a duplicate whatever its text
        if twin is None:
            kept.append(qid)
        else:
            removed[qid] = twin
    if not kept:
        raise InvalidParameterError(
            f"{collection.name}: every judged query of {source!r} duplicates one of {against!r}; "
            f"split {name!r} would be empty"
        )
    return DerivedSplit(name, source, against, tuple(kept), removed)


@dataclass(frozen=True, eq=False)
class Collection:
    """A judged test collection, as loaded by :func:`load_collection` or :func:`load_beir`.

    Attributes:
        name: ``scifact``, ``cacm``, ``cisi`` or ``cranfield`` (or the name
            given to :func:`load_beir`).
        folder: the folder its files were read from.
        documents: the documents in file order; ``links`` and ``time`` are set
            where the collection has them (CACM, CISI).
        queries: query id -> text, in file order (all queries, judged or not).
        qrels: query id -> document key -> grade; only queries with at least
            one judgement appear. For SciFact this is the ``test`` split.
        splits: split name -> judgements (SciFact: ``train`` and ``test``);
            empty when the collection has no splits.
        link_sets: link-set name -> document key -> neighbour key -> weight,
            symmetric, self entries dropped (see the module docstring).
        query_file_ids: query id -> the id as written in the query file
            (``cran.qry``'s ``001`` ... ``365``; the same id elsewhere).
        manifest: every file read, with its size and hashes.
        publishable: ``False`` when a file did not match its pin (loaded with
            ``any_snapshot=True``): numbers made from it are not publishable.
            Data nobody pinned (your own) is publishable: see :attr:`provenance`.
        parameters: the loader's choices that change the data
            (``cranfield_grades``), for reports.
        vectors: vectors attached by the loader (:func:`load_beir`'s
            ``vectors``), which :func:`~weftsearch.eval.harness.build_testbed`
            uses when it is given none; ``None`` otherwise.
        derived: split name -> how it was derived, for the splits of
            :attr:`splits` made by :meth:`with_derived_split` (e.g. SciFact's
            ``dev``); the files' own splits are not here.

    """

    name: str
    folder: Path
    documents: list[Document]
    queries: dict[str, str]
    qrels: Judgements
    splits: dict[str, Judgements]
    link_sets: dict[str, dict[str, dict[str, int]]]
    query_file_ids: dict[str, str]
    manifest: tuple[FileRecord, ...]
    publishable: bool
    parameters: dict[str, str] = field(default_factory=dict)
    vectors: CollectionVectors | None = None
    derived: Mapping[str, DerivedSplit] = field(default_factory=dict)

    @property
    def provenance(self) -> Provenance:
        """``"pinned"``, ``"unpinned"`` or ``"mismatched"``: :func:`provenance_of` the manifest."""
        return provenance_of(self.manifest)

    def with_derived_split(
        self, name: str = DEV_SPLIT, *, source: str = "train", against: str = "test"
    ) -> Collection:
        """The collection with one more split, ``name``: ``source`` minus duplicates of ``against``.

        The new split's judgements are ``source``'s for the kept queries; its
        provenance is :meth:`derivation`. ``build_testbed(collection,
        split="dev")`` then evaluates on it like any other split. Example::

            scifact = load_collection("scifact", data).with_derived_split()   # dev: 807 queries

        Raises:
            InvalidParameterError: ``name`` is already a split (a file's, or
                derived), or :func:`derive_split` refuses.

        """
        if name in self.splits:
            where = "derived" if name in self.derived else "read from the files"
            raise InvalidParameterError(f"{self.name} already has a split {name!r} ({where})")
        split = derive_split(self, name=name, source=source, against=against)
        judged = self.splits[source]
        splits = {**self.splits, name: {qid: dict(judged[qid]) for qid in split.qids}}
        return replace(self, splits=splits, derived={**self.derived, name: split})

    def derivation(self, split: str | None) -> DerivedSplit | None:
        """How ``split`` was derived (:meth:`with_derived_split`), or ``None`` for a file's own split."""
        return None if split is None else self.derived.get(split)

    @property
    def document_keys(self) -> tuple[str, ...]:
        """The document keys, in file order."""
        return tuple(document.key for document in self.documents)

    @property
    def query_ids(self) -> tuple[str, ...]:
        """The query ids, in file order."""
        return tuple(self.queries)

    def judged_query_ids(self, split: str | None = None) -> tuple[str, ...]:
        """Ids of the queries with at least one relevant (grade > 0) document, in file order.

        Args:
            split: a name from :attr:`splits`; ``None`` means :attr:`qrels`.

        Raises:
            InvalidParameterError: an unknown split.

        """
        qrels = self.judgements(split)
        return tuple(qid for qid in self.queries if any(grade > 0 for grade in qrels.get(qid, {}).values()))

    def judgements(self, split: str | None = None) -> Judgements:
        """The judgements of ``split`` (``None``: :attr:`qrels`).

        Raises:
            InvalidParameterError: an unknown split.

        """
        if split is None:
            return self.qrels
        if split not in self.splits:
            known = ", ".join(sorted(self.splits)) or "none"
            raise InvalidParameterError(f"{self.name} has no split {split!r} (splits: {known})")
        return self.splits[split]

    def relevant_pairs(self, split: str | None = None) -> int:
        """How many (query, document) pairs have a grade above zero."""
        return sum(grade > 0 for docs in self.judgements(split).values() for grade in docs.values())

    def manifest_dicts(self) -> list[dict[str, Any]]:
        """The manifest as JSON-ready records (for reports)."""
        return [record.as_dict() for record in self.manifest]


def collection_folder(name: str, data_dir: StrPath) -> Path:
    """The folder holding collection ``name``: ``data_dir`` itself, or ``data_dir/<name>``.

    Raises:
        InvalidParameterError: an unknown collection.
        FileNotFoundError: neither folder holds the collection's first file.

    """
    _check_name(name)
    base = Path(data_dir)
    first = _USED[name][0]
    for folder in (base, base / name):
        if (folder / first).is_file():
            return folder
    raise FileNotFoundError(
        f"{name}: {first} is neither in {base} nor in {base / name} "
        f"(download it with weftsearch.eval.datasets.fetch({name!r}, ...))"
    )


def _check_name(name: str) -> None:
    if name not in COLLECTIONS:
        raise InvalidParameterError(f"unknown collection {name!r} (known: {', '.join(COLLECTIONS)})")


def _mismatch_message(where: str, size: int, sha256: str, pin: FilePin) -> str:
    return (
        f"{where}: expected {pin.size} bytes with SHA-256 {pin.sha256}, "
        f"found {size} bytes with SHA-256 {sha256}"
    )


def _verify_files(
    folder: Path,
    paths: Sequence[str],
    pins: Mapping[str, FilePin],
    what: str,
    any_snapshot: bool,
) -> tuple[dict[str, bytes], tuple[FileRecord, ...]]:
    """Read every file of ``paths`` and check it against ``pins`` before anything is parsed.

    Raises:
        FileNotFoundError: a file is missing.
        DatasetIntegrityError: a file differs from its pin (or has none),
            unless ``any_snapshot``.

    """
    blobs: dict[str, bytes] = {}
    records: list[FileRecord] = []
    for path in paths:
        file = folder / path
        if not file.is_file():
            raise FileNotFoundError(f"{what}: missing file {file}")
        data = file.read_bytes()
        digest = sha256_bytes(data)
        pin = pins.get(path)
        record = FileRecord(
            path, len(data), digest, None if pin is None else pin.size, None if pin is None else pin.sha256
        )
        if not record.verified and not any_snapshot:
            hint = (
                "; pass any_snapshot=True (--any-snapshot) to load it anyway, "
                "and every number made from it is unpublishable"
            )
            if pin is None:
                raise DatasetIntegrityError(
                    f"{file}: no pinned SHA-256 for {what} file {path!r} (found {len(data)} bytes "
                    f"with SHA-256 {digest}){hint}"
                )
            raise DatasetIntegrityError(
                f"{_mismatch_message(str(file), len(data), digest, pin)}: "
                f"not the pinned snapshot of {what}{hint}"
            )
        blobs[path] = data
        records.append(record)
    return blobs, tuple(records)


def _lines(data: bytes, path: str) -> list[str]:
    """Decode ``data`` as UTF-8 and split on LF, removing a trailing CR from each line."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorpusFormatError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return [line[:-1] if line.endswith("\r") else line for line in text.split("\n")]


def _int_id(token: str, where: str, what: str) -> str:
    """A numeric id in canonical form (``"01"`` -> ``"1"``)."""
    if not token.isdigit() or not token.isascii():
        raise CorpusFormatError(f"{where}: {what} {token!r} is not a number")
    return str(int(token))


def _join(*parts: str) -> str:
    return " ".join(part for part in parts if part)
