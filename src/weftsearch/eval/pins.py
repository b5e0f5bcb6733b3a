"""The pinned files of each collection and vector set, and the types and names the loaders share."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, Union

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
