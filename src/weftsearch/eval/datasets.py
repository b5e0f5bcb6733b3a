"""Judged test collections, verified byte for byte before they are read.

Four collections are known: ``scifact`` (BEIR layout), ``cacm``, ``cisi`` and
``cranfield`` (the SMART format of the Glasgow IR group's distribution).
:func:`load_collection` returns a :class:`Collection`: documents as
:class:`~weftsearch.documents.Document` values, queries, relevance
judgements, splits where the collection has them, alternative link sets, and
the manifest of the files it was built from.

Integrity
    Every file a loader reads is checked against the size and SHA-256 compiled
    into this module (:data:`PINS`, copied from each collection's
    ``SOURCE.md``) before any of it is parsed. The bytes are read once,
    hashed, and parsed from memory, so what was verified is what is used. A
    mismatch raises :class:`~weftsearch.errors.DatasetIntegrityError` naming
    the file, the expected and the actual hash. ``any_snapshot=True`` loads the
    copy anyway and sets :attr:`Collection.publishable` to ``False``: every
    number made from it must be marked unpublishable.

    Data nobody pinned is another matter (:func:`provenance_of`): a folder of
    your own loaded with :func:`load_beir`, or vectors read by
    :func:`load_vector_folder`, has nothing public to differ from. It loads
    as it is, its provenance is ``"unpinned"`` (publishable, and reports say
    no public pin exists), and its manifest records every file's SHA-256 so
    numbers can be tied to those exact bytes. ``"mismatched"`` (a pinned file
    that differs, or a pinned collection holding an unpinned file) is what
    makes numbers unpublishable.

Text rules
    They are the rules the frozen vectors were embedded with (their
    ``record.json`` states them), so vectors and texts line up, and
    :func:`load_frozen_vectors` checks this by hashing the texts.

    * SMART files: a record starts at ``.I <id>``; a line that holds only a
      field marker (``.T``, ``.W``, ...; trailing blanks allowed) starts that
      field, and a field given twice in one record is concatenated. A trailing
      CR is removed from every line (CISI and ``cran.qry`` have CRLF line
      ends). A field's text is its lines, each stripped, empty ones dropped,
      joined by one space. Document text is ``.T + " " + .W`` (the title alone
      when there is no ``.W``).
    * SciFact: document text is ``title.strip() + " " + text.strip()`` (the
      stripped text alone when the title is empty); query text is the
      ``text`` field exactly as stored.

CACM
    * ``.B`` ("CACM December, 1958") gives :attr:`Document.time`: the **first
      day of that month, 00:00 UTC** (the source gives only year and month),
      and ``fields["year"]`` / ``fields["month"]``.
    * ``.X`` lines are ``other <TAB> type <TAB> this``. Type 5 ("links": X
      cites Y or Y cites X; the direction is not recorded, every link is
      listed from both ends) becomes :attr:`Document.links`, self-links
      dropped. All three types are in :attr:`Collection.link_sets`:
      ``"links"`` (type 5), ``"coupling"`` (type 4, bibliographic coupling)
      and ``"cocitation"`` (type 6); a weight is the number of times the line
      is repeated, which for types 4 and 6 is the number of shared references
      or citing documents.
    * ``query.text`` ends with an empty ``.I 0`` record, which is skipped.
      ``qrels.text`` pads query ids (``01``); ids are compared as integers and
      written without padding, as ``query.text`` writes them.

CISI
    ``.X`` lines are ``other <TAB> weight <TAB> this``: a symmetric, weighted
    association (co-citation or coupling counts; the archive does not say).
    The neighbours become :attr:`Document.links` (self entries dropped) and
    the weights are kept in ``link_sets["associations"]``. A line repeated
    with the same weight counts once.

Cranfield
    ``cran.qry`` numbers its queries ``001`` ... ``365`` with gaps, but
    ``cranqrel`` numbers them ``1`` ... ``225`` in file order: query ids here
    are those ordinals, and :attr:`Collection.query_file_ids` keeps the
    ``.I`` value as written. ``cranqrel``'s codes are mapped to grades by
    ``cranfield_grades``:

    ``"cleverdon"`` (the default)
        code 1 -> grade 4, 2 -> 3, 3 -> 2, 4 -> 1: lower codes are more
        relevant. Reasons: (1) ``cranqrel.readme``, shipped with the file,
        quotes Cleverdon's scale, 1 = "a complete answer to the question" ...
        4 = "of minimum interest"; (2) an independent check agrees: ranking
        all 1,400 documents by cosine with the frozen all-MiniLM-L6-v2
        vectors, the judged documents' median rank is 10.5 for code 1, 19 for
        code 2, 24.5 for code 3 and 47 for code 4 (in the top 10: 50 %, 39 %,
        35 %, 23 %), monotone in the readme's direction; (3) code 1 is the
        rarest (128 of 1,612), as the strictest grade should be.
    ``"ir_datasets"``
        code c -> grade c (4 = complete answer), the reading of the
        ir_datasets loader, for comparison with tools that use it.
    ``"binary"``
        codes 1-4 -> grade 1; the direction does not matter.

    Under every mapping code -1 becomes grade 0 (judged, not relevant). Each
    query has exactly one -1 document, unexplained by the readme; it is the
    document closest to the query by cosine (median rank 4), consistent
    with it being the paper the question was written from.

Frozen vectors
    :func:`load_frozen_vectors` reads ``<collection folder>/vectors/<variant>/``
    (``corpus.npy``, ``corpus_ids.txt``, ``queries.npy``, ``queries_ids.txt``,
    ``record.json``), verifies them against the pins and against the hashes in
    ``record.json``, checks the model name, width, the source files' hashes
    and the hash of the input texts against the collection, and returns the
    rows in the collection's order. ``any_snapshot`` waives file-hash
    mismatches (and marks the vectors unpublishable) but never query texts:
    query vectors embedded from other texts belong to other queries, and are
    a :class:`~weftsearch.errors.PairingError`.

Fetching
    :func:`fetch` downloads a collection's files from the public upstream named
    in its pins (raw files at a fixed commit of a public repository, or a
    pinned archive whose members are extracted), with the same size and
    SHA-256 checks, writing each file atomically (temporary file, then
    rename). Frozen vectors have no upstream and are not fetched.
"""

from __future__ import annotations

import hashlib
import http.client
import io
import json
import os
import re
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, Literal, Union

import numpy as np
from numpy.typing import NDArray

from weftsearch._atomic import atomic_file
from weftsearch.corpus import _fields as corpus_fields  # the JSONL rules of weft-search index
from weftsearch.corpus import _links as corpus_links
from weftsearch.corpus import parse_time
from weftsearch.documents import Document, FieldValue, TimeLike
from weftsearch.errors import (
    CorpusFormatError,
    DatasetIntegrityError,
    InvalidParameterError,
    PairingError,
    WeftError,
)

__all__ = [
    "COLLECTIONS",
    "CRANFIELD_GRADES",
    "DEFAULT_VECTORS",
    "FROZEN_MODEL",
    "PINS",
    "ArchivePin",
    "Collection",
    "CollectionPins",
    "CollectionVectors",
    "CranfieldGrades",
    "FetchResult",
    "FilePin",
    "FileRecord",
    "Judgements",
    "collection_folder",
    "fetch",
    "load_beir",
    "load_collection",
    "load_frozen_vectors",
    "load_vector_folder",
    "beir_splits",
    "provenance_of",
    "Provenance",
    "sha256_bytes",
]

StrPath = Union[str, os.PathLike[str]]
#: Relevance judgements: query id -> document key -> grade.
Judgements = dict[str, dict[str, int]]
#: How Cranfield's relevance codes become grades; see the module docstring.
CranfieldGrades = Literal["cleverdon", "ir_datasets", "binary"]
#: Where a collection's (or vector set's) bytes stand against the pins; see :func:`provenance_of`.
Provenance = Literal["pinned", "unpinned", "mismatched"]
#: Accepted values of ``cranfield_grades``.
CRANFIELD_GRADES: tuple[str, ...] = ("cleverdon", "ir_datasets", "binary")
#: The collections :func:`load_collection` and :func:`fetch` know.
COLLECTIONS: tuple[str, ...] = ("scifact", "cacm", "cisi", "cranfield")
#: The frozen vector set shipped with the shared collections.
DEFAULT_VECTORS = "all-minilm-l6-v2-int8"
#: The model the frozen vectors were made with, as ``record.json`` names it.
FROZEN_MODEL = "sentence-transformers/all-MiniLM-L6-v2"

_CHUNK = 1 << 16
_VECTOR_FILES = ("record.json", "corpus.npy", "corpus_ids.txt", "queries.npy", "queries_ids.txt")


# ---------------------------------------------------------------------- pins


@dataclass(frozen=True, slots=True)
class FilePin:
    """The size and SHA-256 a collection file must have, and where to download it.

    Attributes:
        path: the file's path inside the collection folder (``/``-separated).
        size: its size in bytes.
        sha256: its SHA-256, lowercase hex.
        url: where :func:`fetch` downloads it, or ``None`` when it comes from
            an archive (or has no public upstream).
        archive: the :attr:`ArchivePin.name` of the archive holding it; the
            member is the one whose base name equals this file's.

    """

    path: str
    size: int
    sha256: str
    url: str | None = None
    archive: str | None = None


@dataclass(frozen=True, slots=True)
class ArchivePin:
    """A pinned tar archive that :func:`fetch` downloads and extracts members from.

    Attributes:
        name: how file pins refer to it.
        url: where to download it.
        size: its size in bytes.
        sha256: its SHA-256, lowercase hex.

    """

    name: str
    url: str
    size: int
    sha256: str


@dataclass(frozen=True, slots=True)
class CollectionPins:
    """Everything pinned for one collection.

    Attributes:
        name: the collection's name.
        files: its data files (all of them, including documentation files the
            loader does not read, so :func:`fetch` mirrors the distribution).
        archives: archives that some of ``files`` are extracted from.
        vectors: frozen vector sets by variant name; paths are relative to
            ``vectors/<variant>/``. They have no upstream.

    """

    name: str
    files: tuple[FilePin, ...]
    archives: tuple[ArchivePin, ...] = ()
    vectors: Mapping[str, tuple[FilePin, ...]] = field(default_factory=dict)

    def file(self, path: str) -> FilePin | None:
        """The pin of ``path``, or ``None``."""
        for pin in self.files:
            if pin.path == path:
                return pin
        return None

    def archive(self, name: str) -> ArchivePin | None:
        """The archive called ``name``, or ``None``."""
        for pin in self.archives:
            if pin.name == name:
                return pin
        return None


def _raw(repo: str, commit: str, path: str) -> str:
    return f"https://raw.githubusercontent.com/{repo}/{commit}/{path}"


_CACM = ("N6Mehta/CPS842-A1", "7ff42642eeeb5fa009d187c1c05ef4fbade0dac5")
_CISI_TAR = _raw("PsychoProg/tf-idf", "beee251dd1356ee4ffb453ac60cf8f9112840f5d", "cisi.tar.gz")
_CRAN = ("stevinjs/CS7IS3-CA1", "43ab37069572a9e9719efe79ac8ae4d2c78c4588")
_CRAN_QRY = ("noramtboraas/information-retrieval", "4ea1b8e02da1db64b68b0364d50620b3c95528dc")
_SCIFACT = ("Kirloxious/CSI4107_Assignment2", "640c17fd9b4a27f3962d702351016bb677d74305")
_SCIFACT_QRELS = ("moorateeahtashil/Information-Retrieval", "00b74e83a48f52e6588946861a3bd6cfe9f7fede")


def _cacm(path: str, size: int, sha256: str) -> FilePin:
    return FilePin(path, size, sha256, _raw(*_CACM, f"cacm/{path}"))


def _vectors(*rows: tuple[str, int, str]) -> tuple[FilePin, ...]:
    return tuple(FilePin(path, size, sha256) for path, size, sha256 in rows)


#: The pinned files of every known collection, from each collection's SOURCE.md.
PINS: Mapping[str, CollectionPins] = {
    "cacm": CollectionPins(
        "cacm",
        (
            _cacm("README", 917, "7c33016bb97af2e8c72e0d7378fb4fb5d83d270d831794eec73017a8dc2ba801"),
            _cacm("cacm.all", 2187734, "34bdd3eb27a92e5f8068a785b53ef40b9dc0b800dbafc5bac79a80dd999cdc17"),
            _cacm("cite.info", 626, "3172af8ebe75be3916c8c5985920646b9f3a90a6ce1efa7b39ac6f7f87d99f5d"),
            _cacm("common_words", 2668, "764c71ff1764b7745dc0df87c97646b50c56c989284997ad5c5182f41366dec3"),
            _cacm("qrels.text", 9948, "da4202b0c70cad7d91c9a028eaf8cbd0a4ca981ebdc3955eb75ba7b6de6f185c"),
            _cacm("query.text", 13689, "2fe81273fd7db3beccad1090c84630dea561469b7c19ad03e71370c8c7399cc9"),
        ),
        vectors={
            DEFAULT_VECTORS: _vectors(
                ("record.json", 6932, "2c98f1ebbafb35b3fd0d11e97b7d46c578676b83972dba3c9a864d2d4d5582e9"),
                ("corpus.npy", 4921472, "580b6e1e56a459de94a3a286a0c467700f89db82ae9af5dea848dffa2bc898e2"),
                ("corpus_ids.txt", 14913, "c5029f95f8868042308b94021142894aff520c3215e1de69b5a43261e3b81bda"),
                ("queries.npy", 98432, "51fa67b4544276b6f03a4c09b11d4d7cdee3b8eb82a2db7024070c9ce5ce40bd"),
                ("queries_ids.txt", 183, "0f785a7ffa406498aafb14553966eaed0f52220fed0f7cc016b66921d104d194"),
            )
        },
    ),
    "cisi": CollectionPins(
        "cisi",
        (
            FilePin(
                "CISI.ALL",
                2228098,
                "df5af339fa4623ef33e315f39f3e13c050d17535c18360c727bf3c96ce60ba40",
                archive="cisi.tar",
            ),
            FilePin(
                "CISI.BLN",
                4581,
                "b20a05947145ef0b79d9dc15c1444541406dce17856bc1b8b945520c940706ce",
                archive="cisi.tar",
            ),
            FilePin(
                "CISI.QRY",
                68157,
                "a5ffad2b39445ca5f4091351466b3d70dad9b4eb9a713b8334d46abb291ffd3c",
                archive="cisi.tar",
            ),
            FilePin(
                "CISI.REL",
                80964,
                "deb203a0dc07628d14dbcbc9a9803bf3c1f86e855570edb29d907663de8d6ea9",
                archive="cisi.tar",
            ),
        ),
        archives=(
            # Named .tar.gz upstream, but an uncompressed POSIX tar.
            ArchivePin(
                "cisi.tar",
                _CISI_TAR,
                2385920,
                "a6c2c6ad6577cbed006720d408ee4c638da0f7d0c5bc7cc13ed1b32cdf3b1cab",
            ),
        ),
        vectors={
            DEFAULT_VECTORS: _vectors(
                ("record.json", 6822, "87ad9e21ef03311f940744724d131eee38937a4321cd9eaa172f62509682b251"),
                ("corpus.npy", 2242688, "b0dd950e084f7725c9d9e2235e66582cd5033cfee6438dfa0c6afc952070ce38"),
                ("corpus_ids.txt", 6193, "1c1871ced5c0d0e4b42c6712cc0584acc82f50a0d0388ca023429d1a247bf573"),
                ("queries.npy", 172160, "d83e7a9f098e83a699f5b9fb9b5570a59544fc457e2fe9bf2450689ec516f1ce"),
                ("queries_ids.txt", 340, "991ba21fa954f944c79ffdc810723922d577e61937f53fe1d85294eaa4187573"),
            )
        },
    ),
    "cranfield": CollectionPins(
        "cranfield",
        (
            FilePin(
                "cran.all.1400",
                1644706,
                "b234544b6ceccd131520df4a3cb6d42aee6576eb577933d047e722bbfe7b0b09",
                _raw(*_CRAN, "resources/cran.all.1400"),
            ),
            FilePin(
                "cran.qry",
                28957,
                "99578ceb88941ef89c14faf7c63c23776a376d8fba319b990f01d0c601d8b03f",
                _raw(*_CRAN_QRY, "cran.qry"),
            ),
            FilePin(
                "cranqrel",
                19541,
                "92e54b58dac0b980152178f350d892fae66c8a239b8a11715b835fb8d2f6bc0e",
                _raw(*_CRAN, "resources/cranqrel"),
            ),
            FilePin(
                "cranqrel.readme",
                1449,
                "8f4cb2e60ab2324bb3ad980bdc8b9cf6a9b98a08d097d90a351485dd6e25433f",
                _raw(*_CRAN, "resources/cranqrel.readme"),
            ),
        ),
        vectors={
            DEFAULT_VECTORS: _vectors(
                ("record.json", 6960, "2f383f994c29b4d891c1303c1098eedd2591e86afaac501e974c346db559a2d5"),
                ("corpus.npy", 2150528, "259ce553f3dd5dd0787eb22802062ba54f1157e476599adbdd5eeb9782323418"),
                ("corpus_ids.txt", 5893, "c4c19810a3566ec78b3de4d7925d5e4b678490465474e28a49127cc79aff025c"),
                ("queries.npy", 345728, "d78cc14170cbe274ea7d61a929e72e8e8c18cd1e1592bd138826e14f24e816a0"),
                ("queries_ids.txt", 1692, "40c5d0431e0e1fc49b8ad85f3fa29a56da2de6b803845c31acf4de497f0e4879"),
            )
        },
    ),
    "scifact": CollectionPins(
        "scifact",
        (
            FilePin(
                "corpus.jsonl",
                8106566,
                "dec31c8182f3d744c7d2c09423756fd1d17cbef75808db13ba01cc0aab4d1ac6",
                _raw(*_SCIFACT, "scifact/corpus.jsonl"),
            ),
            FilePin(
                "queries.jsonl",
                209731,
                "8ff84a7c903f722981cd8d595c022660140c51867b27608a6d4910db86080313",
                _raw(*_SCIFACT, "scifact/queries.jsonl"),
            ),
            FilePin(
                "qrels/test.tsv",
                5389,
                "0864bb985e0ca2367ba217977e72004d549054b2b06666ed9d4825ac7c21284c",
                _raw(*_SCIFACT_QRELS, "scifact/qrels/test.tsv"),
            ),
            FilePin(
                "qrels/train.tsv",
                14502,
                "a53f2114831916c096b6c37d9e54da68cef4efdcdbd5ed46533601af972acf1d",
                _raw(*_SCIFACT_QRELS, "scifact/qrels/train.tsv"),
            ),
        ),
        vectors={
            DEFAULT_VECTORS: _vectors(
                ("record.json", 6673, "165f6bd4d1e626c484735ad7f7a6df879a21a0027cfcf1320b0daa1e0534004c"),
                ("corpus.npy", 7961216, "a99a6fbcedf1b0aa41d57959223c287541d515f999c76cbdc0bbf5ea9499e186"),
                ("corpus_ids.txt", 44759, "bcb266241b6c749fe993de0353d1ce95cc3b9fbd47b86d356ba54acab09ccfd4"),
                ("queries.npy", 1703552, "6fef2214f315dafe0f79c5cb311035634b221927027c662289f638b27fd21443"),
                ("queries_ids.txt", 4662, "ea51cf9344671a67643b28fc0fc3277f9fec372e63a8785f53062ad0c9719cff"),
            )
        },
    ),
}

#: The files each loader reads, in reading order; all are verified first.
_USED: Mapping[str, tuple[str, ...]] = {
    "scifact": ("corpus.jsonl", "queries.jsonl", "qrels/train.tsv", "qrels/test.tsv"),
    "cacm": ("cacm.all", "query.text", "qrels.text"),
    "cisi": ("CISI.ALL", "CISI.QRY", "CISI.REL"),
    "cranfield": ("cran.all.1400", "cran.qry", "cranqrel"),
}


# ---------------------------------------------------------------------- manifest and values


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

    @property
    def provenance(self) -> Provenance:
        """``"pinned"``, ``"unpinned"`` or ``"mismatched"``: :func:`provenance_of` the manifest."""
        return provenance_of(self.manifest)

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


# ---------------------------------------------------------------------- reading verified bytes


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


# ---------------------------------------------------------------------- SMART format


_MARKER = re.compile(r"^\.([A-Z])(?:\s+(\S+))?\s*$")


@dataclass
class _Record:
    """One SMART record: its id, the line it starts on, and its fields' raw lines."""

    rid: str
    line: int
    fields: dict[str, list[tuple[int, str]]]

    def text(self, letter: str) -> str:
        return " ".join(line.strip() for _, line in self.fields.get(letter, ()) if line.strip())

    def has(self, letter: str) -> bool:
        return letter in self.fields


def _parse_smart(lines: Sequence[str], path: str) -> list[_Record]:
    records: list[_Record] = []
    current: _Record | None = None
    letter: str | None = None
    for number, line in enumerate(lines, start=1):
        match = _MARKER.match(line)
        if match and match.group(1) == "I" and match.group(2) is not None:
            current = _Record(match.group(2), number, {})
            records.append(current)
            letter = None
            continue
        if match and match.group(2) is None:
            letter = match.group(1)
            if current is not None:
                current.fields.setdefault(letter, [])
            continue
        if current is None or letter is None:
            if line.strip():
                raise CorpusFormatError(f"{path}:{number}: text outside a field: {line!r}")
            continue
        current.fields[letter].append((number, line))
    return records


def _smart_documents(records: Sequence[_Record], path: str) -> dict[str, _Record]:
    """Records by canonical document key, refusing repeated ids."""
    by_key: dict[str, _Record] = {}
    for record in records:
        key = _int_id(record.rid, f"{path}:{record.line}", "document id")
        if key in by_key:
            raise CorpusFormatError(
                f"{path}:{record.line}: document id {key} repeats (first on line {by_key[key].line})"
            )
        by_key[key] = record
    return by_key


_MONTHS = {
    name: number
    for number, name in enumerate(
        [
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
        ],
        start=1,
    )
}
_DATE = re.compile(r"([A-Za-z]+)\W*(\d{4})")


def _cacm_date(text: str, where: str) -> tuple[int, int]:
    """Year and month of a CACM ``.B`` field such as ``CACM December, 1958``."""
    for match in _DATE.finditer(text):
        month = _MONTHS.get(match.group(1).lower())
        if month is not None:
            return int(match.group(2)), month
    raise CorpusFormatError(f"{where}: cannot read a month and year from .B {text!r}")


def _x_lines(record: _Record, key: str, path: str) -> Iterator[tuple[str, int, int]]:
    """``(other, middle column, line number)`` of each ``.X`` line of ``record``."""
    for number, line in record.fields.get("X", ()):
        if not line.strip():
            continue
        parts = line.split()
        where = f"{path}:{number}"
        if len(parts) != 3:
            raise CorpusFormatError(f"{where}: a .X line has 3 columns, got {line!r}")
        other = _int_id(parts[0], where, "document id")
        this = _int_id(parts[2], where, "document id")
        if this != key:
            raise CorpusFormatError(f"{where}: .X line names document {this}, inside document {key}")
        if not parts[1].isdigit():
            raise CorpusFormatError(f"{where}: .X middle column {parts[1]!r} is not a number")
        yield other, int(parts[1]), number


def _check_resolves(
    links: Mapping[str, Mapping[str, int]], keys: Mapping[str, object], path: str, what: str
) -> None:
    for key, neighbours in links.items():
        for other in neighbours:
            if other not in keys:
                raise CorpusFormatError(f"{path}: {what} of document {key} names document {other}, not in it")


def _documents(
    records: Mapping[str, _Record],
    links: Mapping[str, Mapping[str, int]],
    extra: Mapping[str, tuple[datetime | None, dict[str, FieldValue]]] | None = None,
) -> list[Document]:
    documents: list[Document] = []
    for key, record in records.items():
        title = record.text("T")
        fields: dict[str, FieldValue] = {"title": title} if title else {}
        when: datetime | None = None
        if extra is not None and key in extra:
            when, more = extra[key]
            fields.update(more)
        neighbours = tuple(sorted(links.get(key, {}), key=int))
        documents.append(
            Document(key, _join(title, record.text("W")), links=neighbours, time=when, fields=fields)
        )
    return documents


def _smart_queries(
    lines: Sequence[str], path: str, text: str, *, sentinel: bool
) -> tuple[dict[str, str], dict[str, str]]:
    """Queries by canonical id, and the ids as written; ``text`` is ``"W"`` or ``"TW"``."""
    queries: dict[str, str] = {}
    written: dict[str, str] = {}
    first: dict[str, int] = {}
    for record in _parse_smart(lines, path):
        where = f"{path}:{record.line}"
        qid = _int_id(record.rid, where, "query id")
        if sentinel and qid == "0":
            if any(record.text(letter) for letter in record.fields):
                raise CorpusFormatError(f"{where}: the .I 0 sentinel record is not empty")
            continue
        if qid in first:
            raise CorpusFormatError(f"{where}: query id {qid} repeats (first on line {first[qid]})")
        first[qid] = record.line
        queries[qid] = _join(record.text("T"), record.text("W")) if text == "TW" else record.text("W")
        written[qid] = record.rid
    return queries, written


def _binary_qrels(
    lines: Sequence[str],
    path: str,
    queries: Mapping[str, str],
    documents: Mapping[str, object],
    columns: int,
) -> Judgements:
    """``qid docid ...`` lines (``columns`` wide), each a relevant pair (grade 1)."""
    qrels: Judgements = {}
    for number, line in enumerate(lines, start=1):
        parts = line.split()
        if not parts:
            continue
        where = f"{path}:{number}"
        if len(parts) != columns:
            raise CorpusFormatError(f"{where}: expected {columns} columns, got {line!r}")
        qid = _int_id(parts[0], where, "query id")
        docid = _int_id(parts[1], where, "document id")
        _check_pair(qid, docid, where, queries, documents)
        qrels.setdefault(qid, {})[docid] = 1
    return qrels


def _check_pair(
    qid: str, docid: str, where: str, queries: Mapping[str, object], documents: Mapping[str, object]
) -> None:
    if qid not in queries:
        raise CorpusFormatError(f"{where}: judged query {qid!r} is not in the query file")
    if docid not in documents:
        raise CorpusFormatError(f"{where}: judged document {docid!r} is not in the corpus")


# ---------------------------------------------------------------------- the four loaders


@dataclass
class _Parsed:
    documents: list[Document]
    queries: dict[str, str]
    qrels: Judgements
    splits: dict[str, Judgements] = field(default_factory=dict)
    link_sets: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    query_file_ids: dict[str, str] = field(default_factory=dict)
    parameters: dict[str, str] = field(default_factory=dict)


def _parse_cacm(blobs: Mapping[str, bytes]) -> _Parsed:
    path = "cacm.all"
    records = _smart_documents(_parse_smart(_lines(blobs[path], path), path), path)
    names = {4: "coupling", 5: "links", 6: "cocitation"}
    counts: dict[str, dict[str, Counter[str]]] = {name: {} for name in names.values()}
    extra: dict[str, tuple[datetime | None, dict[str, FieldValue]]] = {}
    for key, record in records.items():
        when: datetime | None = None
        fields: dict[str, FieldValue] = {}
        if record.has("B"):
            year, month = _cacm_date(record.text("B"), f"{path}:{record.line}")
            when = datetime(year, month, 1, tzinfo=timezone.utc)
            fields = {"year": year, "month": month}
        extra[key] = (when, fields)
        for other, kind, number in _x_lines(record, key, path):
            if kind not in names:
                raise CorpusFormatError(f"{path}:{number}: .X type {kind} is not 4, 5 or 6")
            if other != key:
                counts[names[kind]].setdefault(key, Counter())[other] += 1
    link_sets = {name: {k: dict(c) for k, c in by_doc.items()} for name, by_doc in counts.items()}
    for name, links in link_sets.items():
        _check_resolves(links, records, path, f".X {name}")
    documents = _documents(records, link_sets["links"], extra)
    keys = {document.key: None for document in documents}
    queries, written = _smart_queries(
        _lines(blobs["query.text"], "query.text"), "query.text", "W", sentinel=True
    )
    qrels = _binary_qrels(_lines(blobs["qrels.text"], "qrels.text"), "qrels.text", queries, keys, 4)
    return _Parsed(documents, queries, qrels, link_sets=link_sets, query_file_ids=written)


def _parse_cisi(blobs: Mapping[str, bytes]) -> _Parsed:
    path = "CISI.ALL"
    records = _smart_documents(_parse_smart(_lines(blobs[path], path), path), path)
    weights: dict[str, dict[str, int]] = {}
    for key, record in records.items():
        for other, weight, number in _x_lines(record, key, path):
            if other == key:
                continue
            known = weights.setdefault(key, {}).setdefault(other, weight)
            if known != weight:
                raise CorpusFormatError(
                    f"{path}:{number}: documents {key} and {other} are associated with weights "
                    f"{known} and {weight}"
                )
    _check_resolves(weights, records, path, ".X association")
    documents = _documents(records, weights)
    keys = {document.key: None for document in documents}
    queries, written = _smart_queries(_lines(blobs["CISI.QRY"], "CISI.QRY"), "CISI.QRY", "TW", sentinel=False)
    qrels = _binary_qrels(_lines(blobs["CISI.REL"], "CISI.REL"), "CISI.REL", queries, keys, 4)
    return _Parsed(documents, queries, qrels, link_sets={"associations": weights}, query_file_ids=written)


_CRANFIELD_MAPS: Mapping[str, Mapping[int, int]] = {
    "cleverdon": {1: 4, 2: 3, 3: 2, 4: 1, -1: 0},
    "ir_datasets": {1: 1, 2: 2, 3: 3, 4: 4, -1: 0},
    "binary": {1: 1, 2: 1, 3: 1, 4: 1, -1: 0},
}


def _parse_cranfield(blobs: Mapping[str, bytes], grades: str) -> _Parsed:
    path = "cran.all.1400"
    records = _smart_documents(_parse_smart(_lines(blobs[path], path), path), path)
    documents = _documents(records, {})
    keys = {document.key: None for document in documents}
    queries: dict[str, str] = {}
    written: dict[str, str] = {}
    for ordinal, record in enumerate(_parse_smart(_lines(blobs["cran.qry"], "cran.qry"), "cran.qry"), 1):
        queries[str(ordinal)] = record.text("W")
        written[str(ordinal)] = record.rid
    mapping = _CRANFIELD_MAPS[grades]
    qrels: Judgements = {}
    for number, line in enumerate(_lines(blobs["cranqrel"], "cranqrel"), start=1):
        parts = line.split()
        if not parts:
            continue
        where = f"cranqrel:{number}"
        if len(parts) != 3:
            raise CorpusFormatError(f"{where}: expected 3 columns (query, document, code), got {line!r}")
        qid = _int_id(parts[0], where, "query id")
        docid = _int_id(parts[1], where, "document id")
        _check_pair(qid, docid, where, queries, keys)
        try:
            grade = mapping[int(parts[2])]
        except (ValueError, KeyError):
            raise CorpusFormatError(f"{where}: relevance code {parts[2]!r} is not -1, 1, 2, 3 or 4") from None
        known = qrels.setdefault(qid, {}).setdefault(docid, grade)
        if known != grade:
            raise CorpusFormatError(f"{where}: query {qid}, document {docid} judged twice, differently")
    return _Parsed(documents, queries, qrels, query_file_ids=written, parameters={"cranfield_grades": grades})


def _json_records(data: bytes, path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    for number, line in enumerate(_lines(data, path), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            record = json.loads(line)
        except RecursionError:  # deeply nested: a format error, not a traceback
            raise CorpusFormatError(f"{where}: JSON nested too deeply") from None
        except ValueError as exc:
            raise CorpusFormatError(f"{where}: invalid JSON ({exc})") from None
        if not isinstance(record, dict):
            raise CorpusFormatError(f"{where}: expected a JSON object")
        yield where, record


def _json_str(record: Mapping[str, Any], name: str, where: str) -> str:
    value = record.get(name)
    if not isinstance(value, str):
        raise CorpusFormatError(f"{where}: {name!r} must be a string, got {type(value).__name__}")
    return value


def _beir_qrels(
    data: bytes, path: str, queries: Mapping[str, str], documents: Mapping[str, object]
) -> Judgements:
    qrels: Judgements = {}
    for number, line in enumerate(_lines(data, path), start=1):
        parts = line.split("\t")
        if not line.strip():
            continue
        where = f"{path}:{number}"
        if number == 1 and parts[-1].strip().lower() == "score":
            continue
        if len(parts) != 3:
            raise CorpusFormatError(f"{where}: expected 3 tab-separated columns, got {line!r}")
        qid, docid, score = (part.strip() for part in parts)
        _check_pair(qid, docid, where, queries, documents)
        try:
            grade = int(score)
        except ValueError:
            raise CorpusFormatError(f"{where}: score {score!r} is not an integer") from None
        known = qrels.setdefault(qid, {}).setdefault(docid, grade)
        if known != grade:
            raise CorpusFormatError(f"{where}: query {qid}, document {docid} judged twice, differently")
    return qrels


def _collection(name: str, folder: Path, parsed: _Parsed, manifest: tuple[FileRecord, ...]) -> Collection:
    """The loaded collection: what was parsed, with the manifest it was verified against."""
    return Collection(
        name=name,
        folder=folder,
        documents=parsed.documents,
        queries=parsed.queries,
        qrels=parsed.qrels,
        splits=parsed.splits,
        link_sets=parsed.link_sets,
        query_file_ids=parsed.query_file_ids,
        manifest=manifest,
        publishable=provenance_of(manifest) != "mismatched",
        parameters=parsed.parameters,
    )


def _beir_document(record: Mapping[str, Any], where: str, key: str) -> Document:
    """One ``corpus.jsonl`` record as a document, with the keys ``weft-search index`` reads.

    ``title`` and ``text`` make the text (the frozen vectors' rule);
    ``links`` (a list of keys), ``time`` (ISO-8601 or POSIX seconds) and
    ``fields`` (an object of scalars) as in :mod:`weftsearch.corpus`'s JSONL
    layout, and BEIR's ``metadata`` (scalar values kept, nested ones dropped,
    as ``weft-search index`` reads a BEIR folder); ``fields`` wins over
    ``metadata`` on a shared name, the title is ``fields["title"]``.
    """
    # BEIR corpora may omit the title; the text is required.
    title = _json_str(record, "title", where).strip() if "title" in record else ""
    text = _json_str(record, "text", where).strip()
    fields: dict[str, FieldValue] = {}
    fields.update(corpus_fields(record.get("metadata"), where, "metadata", strict=False))
    fields.update(corpus_fields(record.get("fields"), where, "fields", strict=True))
    if title:
        fields["title"] = title
    try:
        return Document(
            key,
            _join(title, text),
            links=corpus_links(record.get("links"), where),
            time=parse_time(record.get("time"), where),
            fields=fields,
        )
    except WeftError as exc:
        if isinstance(exc, CorpusFormatError):
            raise
        raise CorpusFormatError(f"{where}: {exc}") from None


def _parse_beir(blobs: Mapping[str, bytes], splits: Sequence[str], main: str) -> _Parsed:
    """BEIR's layout: ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv`` per split."""
    documents: list[Document] = []
    seen: dict[str, str] = {}
    for where, record in _json_records(blobs["corpus.jsonl"], "corpus.jsonl"):
        key = _json_str(record, "_id", where)
        if key in seen:
            raise CorpusFormatError(f"{where}: document id {key!r} repeats (first at {seen[key]})")
        seen[key] = where
        documents.append(_beir_document(record, where, key))
    queries: dict[str, str] = {}
    for where, record in _json_records(blobs["queries.jsonl"], "queries.jsonl"):
        qid = _json_str(record, "_id", where)
        if qid in queries:
            raise CorpusFormatError(f"{where}: query id {qid!r} repeats")
        queries[qid] = _json_str(record, "text", where)
    judged = {}
    for split in splits:
        path = f"qrels/{split}.tsv"
        judged[split] = _beir_qrels(blobs[path], path, queries, seen)
    return _Parsed(documents, queries, judged[main], splits=judged, query_file_ids={q: q for q in queries})


def _parse_scifact(blobs: Mapping[str, bytes]) -> _Parsed:
    return _parse_beir(blobs, ("train", "test"), "test")


def beir_splits(folder: StrPath) -> tuple[str, ...]:
    """The splits of a BEIR folder: the stems of ``qrels/*.tsv``, sorted (empty when there are none)."""
    qrels_folder = Path(folder) / "qrels"
    return tuple(sorted(path.stem for path in qrels_folder.glob("*.tsv"))) if qrels_folder.is_dir() else ()


def _main_split(name: str, folder: Path, found: Sequence[str], split: str | None) -> str:
    """The split :attr:`Collection.qrels` holds: ``split``, else ``test``, else the only one."""
    listed = ", ".join(found)
    if split is not None:
        if split not in found:
            raise InvalidParameterError(
                f"{name}: no split {split!r} in {folder / 'qrels'} (splits: {listed})"
            )
        return split
    if "test" in found:
        return "test"
    if len(found) == 1:
        return found[0]
    raise InvalidParameterError(
        f"{name}: splits {listed} and none named 'test' in {folder / 'qrels'}; choose one with "
        "split=... (--split NAME)"
    )


def _attach_links_and_times(
    documents: list[Document],
    links: Mapping[str, Iterable[str]] | None,
    times: Mapping[str, TimeLike | str | None] | None,
) -> list[Document]:
    """``documents`` with the links and times given by key (they replace the corpus's)."""
    if not links and not times:
        return documents
    keys = {document.key for document in documents}
    for what, table in (("links", links or {}), ("times", times or {})):
        unknown = sorted(key for key in table if key not in keys)
        if unknown:
            raise InvalidParameterError(
                f"{what} name {len(unknown)} documents not in the corpus (first: {unknown[:3]})"
            )
    out: list[Document] = []
    for document in documents:
        changes: dict[str, Any] = {}
        if links and document.key in links:
            neighbours = links[document.key]
            if isinstance(neighbours, str):
                raise InvalidParameterError(
                    f"links of {document.key!r}: expected a collection of keys, got the string {neighbours!r}"
                )
            changes["links"] = tuple(neighbours)
        if times and document.key in times:
            when = times[document.key]
            if isinstance(when, str):  # ISO-8601, read as weft-search index reads corpus.jsonl's time
                try:
                    when = parse_time(when, f"times[{document.key!r}]")
                except CorpusFormatError as exc:
                    raise InvalidParameterError(str(exc)) from None
            changes["time"] = when
        if changes:
            try:
                document = Document(
                    document.key,
                    document.text,
                    vector=document.vector,
                    links=changes.get("links", document.links),
                    time=changes.get("time", document.time),
                    fields=document.fields,
                )
            except WeftError as exc:
                raise InvalidParameterError(str(exc)) from None
        out.append(document)
    return out


def load_beir(
    folder: StrPath,
    *,
    name: str = "beir",
    split: str | None = None,
    vectors: StrPath | CollectionVectors | None = None,
    links: Mapping[str, Iterable[str]] | None = None,
    times: Mapping[str, TimeLike | str | None] | None = None,
    any_snapshot: bool = False,
    pins: Mapping[str, CollectionPins] | None = None,
) -> Collection:
    """Load any collection in BEIR's layout (your own, or SciFact), with vectors, links and times.

    The folder holds ``corpus.jsonl``, ``queries.jsonl`` (``_id``, ``text``)
    and ``qrels/<split>.tsv`` (query id, document id, integer grade; a header
    line is skipped). A ``corpus.jsonl`` record has ``_id`` and ``text``, and
    optionally ``title``, ``links`` (a list of document keys), ``time``
    (ISO-8601 or POSIX seconds), ``fields`` (an object of scalars) and BEIR's
    ``metadata``: the keys ``weft-search index`` reads (see
    :func:`_beir_document`). Every ``.tsv`` under ``qrels/`` is a split named
    after its file; :attr:`Collection.qrels` is ``split``, or else ``test``,
    or else the only split. Example (a folder of your own, with the vectors
    ``weft-search embed`` wrote for it)::

        collection = load_beir("my-folder", name="mine", split="dev", vectors="my-folder/vectors",
                               times={"d1": "2021-06-01"})
        testbed = build_testbed(collection)        # vectors, links and times attached

    Pins: when ``pins[name]`` (default :data:`PINS`, which pins SciFact) pins
    ``corpus.jsonl``, every file is checked against it, a mismatch raises
    (unless ``any_snapshot``, which makes the collection unpublishable), and
    ``load_beir(folder, name="scifact")`` verifies and parses exactly as
    ``load_collection("scifact", folder)`` does. Otherwise nothing public pins
    the data: it loads as it is, its :attr:`Collection.provenance` is
    ``"unpinned"`` (not unpublishable) and the manifest records every file's
    SHA-256.

    Args:
        folder: the BEIR folder.
        name: the collection's name in reports (and the key of its pins).
        split: the evaluation split (``None``: ``test``, else the only one).
        vectors: a folder of vectors for these documents and queries
            (:func:`load_vector_folder`), or vectors already loaded; set as
            :attr:`Collection.vectors`, which ``build_testbed`` attaches.
        links: document key -> neighbour keys, replacing those of ``corpus.jsonl``.
        times: document key -> time (seconds since the epoch, ``datetime``,
            or ISO-8601 string), replacing those of ``corpus.jsonl``.
        any_snapshot: load pinned files that differ from their pins anyway.
        pins: the pins to verify against; ``None`` means :data:`PINS`.

    Raises:
        FileNotFoundError: a file is missing, or ``qrels/`` holds no ``.tsv``.
        InvalidParameterError: an unknown ``split`` (the message lists the
            splits), several splits and none named ``test``, or links or times
            for keys not in the corpus.
        DatasetIntegrityError: a pinned file differs from its pin (unless ``any_snapshot``).
        CorpusFormatError: a file does not parse, or a judgement names an
            unknown query or document.
        PairingError: the vectors were embedded from other texts.

    """
    base = Path(folder)
    found = beir_splits(base)
    if not found:
        raise FileNotFoundError(f"{name}: no qrels/*.tsv in {base}")
    main = _main_split(name, base, found, split)
    paths = ("corpus.jsonl", "queries.jsonl", *(f"qrels/{each}.tsv" for each in found))
    table = PINS if pins is None else pins
    pinned = name in table and table[name].file("corpus.jsonl") is not None
    if pinned:
        by_path = {pin.path: pin for pin in table[name].files}
        blobs, manifest = _verify_files(base, paths, by_path, name, any_snapshot)
    else:
        # Nothing public pins this data: nothing to verify against, and nothing contradicted.
        blobs, manifest = _verify_files(base, paths, {}, name, True)
    parsed = _parse_beir(blobs, found, main)
    parsed.documents = _attach_links_and_times(parsed.documents, links, times)
    collection = _collection(name, base, parsed, manifest)
    if vectors is None:
        return collection
    if not isinstance(vectors, CollectionVectors):
        vectors = load_vector_folder(collection, vectors)
    return replace(collection, vectors=vectors)


def load_collection(
    name: str,
    data_dir: StrPath,
    *,
    any_snapshot: bool = False,
    cranfield_grades: CranfieldGrades = "cleverdon",
    pins: Mapping[str, CollectionPins] | None = None,
) -> Collection:
    """Load a judged collection after verifying every file it reads.

    Args:
        name: ``"scifact"``, ``"cacm"``, ``"cisi"`` or ``"cranfield"``.
        data_dir: the collection's folder, or a folder holding it as ``<name>/``.
        any_snapshot: load files that differ from their pins anyway; the
            collection is then marked ``publishable=False``.
        cranfield_grades: how Cranfield's codes become grades (ignored by the
            other collections); see the module docstring.
        pins: the pins to verify against; ``None`` means :data:`PINS`.

    Returns:
        The collection, with its manifest.

    Raises:
        InvalidParameterError: an unknown collection or grade mapping.
        FileNotFoundError: a file is missing.
        DatasetIntegrityError: a file differs from its pin (unless ``any_snapshot``).
        CorpusFormatError: a file does not parse, or a judgement names an
            unknown query or document.

    """
    _check_name(name)
    if cranfield_grades not in CRANFIELD_GRADES:
        raise InvalidParameterError(
            f"unknown cranfield_grades {cranfield_grades!r} (known: {', '.join(CRANFIELD_GRADES)})"
        )
    table = PINS if pins is None else pins
    if name not in table:
        raise InvalidParameterError(f"no pins for collection {name!r}")
    folder = collection_folder(name, data_dir)
    by_path = {pin.path: pin for pin in table[name].files}
    blobs, manifest = _verify_files(folder, _USED[name], by_path, name, any_snapshot)
    if name == "scifact":
        parsed = _parse_scifact(blobs)
    elif name == "cacm":
        parsed = _parse_cacm(blobs)
    elif name == "cisi":
        parsed = _parse_cisi(blobs)
    else:
        parsed = _parse_cranfield(blobs, cranfield_grades)
    return _collection(name, folder, parsed, manifest)


# ---------------------------------------------------------------------- frozen vectors


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
    table = PINS if pins is None else pins
    base = Path(folder) if folder is not None else collection.folder / "vectors" / variant
    pinned = table[collection.name].vectors.get(variant) if collection.name in table else None
    what = f"{collection.name} vectors {variant}"
    if pinned is None:
        blobs, manifest = _verify_files(base, _VECTOR_FILES, {}, what, True)
    else:
        blobs, manifest = _verify_files(base, _VECTOR_FILES, {p.path: p for p in pinned}, what, any_snapshot)
    publishable = collection.publishable and (pinned is None or all(r.verified for r in manifest))
    actual = {record.path: record.sha256 for record in manifest}

    def waive(message: str) -> None:
        nonlocal publishable
        if not any_snapshot:
            raise DatasetIntegrityError(
                message + "; pass any_snapshot=True to use them anyway, unpublishable"
            )
        publishable = False

    where = str(base / "record.json")
    try:
        record = json.loads(blobs["record.json"].decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
        raise CorpusFormatError(f"{where}: not JSON ({exc})") from None
    if not isinstance(record, dict):
        raise CorpusFormatError(f"{where}: expected a JSON object")
    named = _record_get(record, where, "collection")
    if named != collection.name:
        raise CorpusFormatError(f"{where}: vectors of collection {named!r}, not {collection.name!r}")
    recorded_model = _record_get(record, where, "model", "name")
    if recorded_model != model:
        raise CorpusFormatError(f"{where}: vectors made with model {recorded_model!r}, expected {model!r}")
    dims = _record_get(record, where, "dims")
    if not isinstance(dims, int) or isinstance(dims, bool) or dims <= 0:
        raise CorpusFormatError(f"{where}: dims must be a positive integer, got {dims!r}")

    manifest_sha = {entry.path: entry.sha256 for entry in collection.manifest}
    sources = _record_get(record, where, "source_files")
    if not isinstance(sources, Mapping):
        raise CorpusFormatError(f"{where}: source_files must be an object")
    for source, digest in sources.items():
        if source not in manifest_sha:
            raise CorpusFormatError(f"{where}: made from {source!r}, which the collection does not read")
        if digest != manifest_sha[source]:
            waive(
                f"{where}: made from {source} with SHA-256 {digest}, but the collection's "
                f"{source} has SHA-256 {manifest_sha[source]}"
            )

    texts = {
        "corpus": {document.key: document.text for document in collection.documents},
        "queries": collection.queries,
    }
    keys = {"corpus": collection.document_keys, "queries": collection.query_ids}
    matrices: dict[str, NDArray[np.float32]] = {}
    for part, what_rows in (("corpus", "documents"), ("queries", "queries")):
        npy_name = _record_get(record, where, part, "npy")
        ids_name = _record_get(record, where, part, "ids_file")
        if (npy_name, ids_name) != (f"{part}.npy", f"{part}_ids.txt"):
            raise CorpusFormatError(f"{where}: {part} files are {npy_name!r} and {ids_name!r}, not the usual")
        for name, key in ((npy_name, "npy_sha256"), (ids_name, "ids_sha256")):
            expected = _record_get(record, where, part, key)
            if expected != actual[name]:
                waive(f"{base / name}: record.json gives SHA-256 {expected}, the file has {actual[name]}")
        try:
            matrix = np.load(io.BytesIO(blobs[npy_name]), allow_pickle=False)
        except (ValueError, EOFError, OSError) as exc:
            raise CorpusFormatError(f"{base / npy_name}: not a readable .npy array ({exc})") from None
        if not isinstance(matrix, np.ndarray) or matrix.ndim != 2 or matrix.dtype != np.float32:
            shape = getattr(matrix, "shape", None)
            dtype = getattr(matrix, "dtype", None)
            raise CorpusFormatError(f"{base / npy_name}: expected a 2-D float32 matrix, got {shape} {dtype}")
        if matrix.shape[1] != dims:
            raise CorpusFormatError(f"{base / npy_name}: width {matrix.shape[1]}, record.json says {dims}")
        if not np.isfinite(matrix).all():
            raise CorpusFormatError(f"{base / npy_name}: holds a non-finite value")
        written = collection.query_file_ids if part == "queries" else None
        ids = _vector_ids(blobs[ids_name], str(base / ids_name), written)
        if len(ids) != matrix.shape[0]:
            raise CorpusFormatError(f"{base / npy_name}: {matrix.shape[0]} rows, but {len(ids)} ids")
        count = _record_get(record, where, part, "count")
        if count != len(ids):
            raise CorpusFormatError(f"{where}: {part} count {count!r}, but {len(ids)} rows")
        matrices[part] = _aligned(matrix, ids, keys[part], str(base / ids_name), what_rows)
        digest = sha256_bytes("\n".join(texts[part][key] for key in ids).encode("utf-8"))
        expected_texts = _record_get(record, where, part, "input_texts_sha256")
        if digest != expected_texts:
            message = (
                f"{where}: the {what_rows} were embedded from texts with SHA-256 {expected_texts}, "
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
            waive(message)
    return CollectionVectors(
        collection=collection.name,
        variant=variant,
        model=str(recorded_model),
        dims=dims,
        documents=matrices["corpus"],
        queries=matrices["queries"],
        document_keys=collection.document_keys,
        query_ids=collection.query_ids,
        record=record,
        manifest=manifest,
        publishable=publishable,
    )


# ---------------------------------------------------------------------- a user's own vectors

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


# ---------------------------------------------------------------------- fetching


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
    table = PINS if pins is None else pins
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
