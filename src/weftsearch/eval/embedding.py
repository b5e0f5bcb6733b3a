"""A judged collection's texts embedded the way its frozen vectors were: ``weft-search embed --collection``.

This sits in :mod:`weftsearch.eval` because it reads collections
(:mod:`weftsearch.eval.datasets`); the encoder and the record format it writes
are :mod:`weftsearch.embed`'s, which knows nothing of evaluation.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from weftsearch._atomic import write_atomic
from weftsearch.embed import (
    _COLLECTION_FILES,
    _FORMAT,
    _TEXT_SOURCES,
    VARIANT,
    EncoderFactory,
    StrPath,
    _encode_part,
    _json_bytes,
    _load_part,
    _Part,
    _read_record,
    _recipe_mismatch,
    _refuse,
    _resolve,
    _sha256,
)
from weftsearch.errors import CorpusFormatError, DatasetIntegrityError
from weftsearch.eval.datasets import Collection, load_collection, load_frozen_vectors

__all__ = ["CollectionEmbedResult", "CollectionTexts", "collection_texts", "embed_collection"]


# ---------------------------------------------------------------------- judged collections


@dataclass(frozen=True, slots=True)
class CollectionTexts:
    """The texts of a judged collection as the frozen vectors embedded them, in file order.

    Attributes:
        collection: its name.
        document_ids: the document keys (the lines of ``corpus_ids.txt``).
        documents: :attr:`Document.text <weftsearch.Document.text>` of each
            document, which is the frozen record's text-construction rule.
        query_ids: the query ids.
        query_id_lines: the lines of ``queries_ids.txt``: the query id, and
            when the query file wrote it otherwise (Cranfield's ``001``), a
            tab and the id as written.
        queries: each query's text.

    """

    collection: str
    document_ids: tuple[str, ...]
    documents: tuple[str, ...]
    query_ids: tuple[str, ...]
    query_id_lines: tuple[str, ...]
    queries: tuple[str, ...]


def collection_texts(collection: Collection) -> CollectionTexts:
    """The texts and ids of ``collection`` as the frozen vectors were made from them.

    :func:`~weftsearch.eval.datasets.load_collection` builds document and
    query texts by the rules the frozen ``record.json`` files state, so
    these are its texts in file order; the SHA-256 of each list equals the
    record's ``input_texts_sha256``, and the id lines give its ids files
    byte for byte.
    """
    query_ids = collection.query_ids
    lines = []
    for qid in query_ids:
        written = collection.query_file_ids.get(qid, qid)
        lines.append(qid if written == qid else f"{qid}\t{written}")
    return CollectionTexts(
        collection=collection.name,
        document_ids=collection.document_keys,
        documents=tuple(document.text for document in collection.documents),
        query_ids=query_ids,
        query_id_lines=tuple(lines),
        queries=tuple(collection.queries[qid] for qid in query_ids),
    )


@dataclass(frozen=True, slots=True)
class CollectionEmbedResult:
    """What :func:`embed_collection` wrote, copied, or found.

    Attributes:
        collection: the collection's name.
        folder: the output folder (holding the five files).
        documents: float32 ``(len(documents), 384)``, in the collection's order.
        queries: float32 ``(len(queries), 384)``, in the collection's order.
        document_ids: the rows' document keys.
        query_ids: the rows' query ids.
        record: the ``record.json`` written or found.
        source: ``"existing"`` (matching files were already there),
            ``"frozen"`` (copied from the collection's frozen folder, which
            matched) or ``"encoded"``.
        seconds: time spent encoding (0 unless encoded).
        note: why the frozen files were not used, when they were not (empty otherwise).

    """

    collection: str
    folder: Path
    documents: NDArray[np.float32]
    queries: NDArray[np.float32]
    document_ids: tuple[str, ...]
    query_ids: tuple[str, ...]
    record: Mapping[str, Any]
    source: Literal["existing", "frozen", "encoded"]
    seconds: float
    note: str = ""

    @property
    def reused(self) -> bool:
        """Whether nothing was encoded."""
        return self.source != "encoded"


def _collection_match(
    folder: Path, name: str, parts: Sequence[_Part]
) -> tuple[dict[str, Any] | None, list[NDArray[np.float32]], str]:
    """The record and rows of a matching collection set in ``folder``, or ``(None, [], reason)``."""
    record_path = folder / "record.json"
    if not record_path.is_file():
        return None, [], f"{record_path} is missing"
    record, reason = _read_record(record_path)
    if record is None:
        return None, [], reason
    if record.get("collection") != name:
        return None, [], f"{record_path} describes collection {record.get('collection')!r}, not {name!r}"
    reason = _recipe_mismatch(record) or ""
    if reason:
        return None, [], reason
    rows = []
    for part in parts:
        matrix, reason = _load_part(folder, part, record.get(part.name))
        if matrix is None:
            return None, [], reason
        rows.append(matrix)
    return record, rows, ""


def embed_collection(
    name: str,
    data_dir: StrPath,
    out_dir: StrPath,
    *,
    encoder: EncoderFactory | None = None,
    reuse: bool = True,
    overwrite: bool = False,
    progress: bool | None = None,
) -> CollectionEmbedResult:
    """Embed a judged collection's documents and queries the way its frozen vectors were made.

    Writes ``corpus.npy``, ``corpus_ids.txt``, ``queries.npy``,
    ``queries_ids.txt`` and ``record.json`` into ``out_dir``, in the frozen
    folder's layout, so
    ``load_frozen_vectors(collection, folder=out_dir)`` reads them. In order
    of preference (with ``reuse``): matching files already in ``out_dir``
    are kept; else, when the collection's frozen folder
    (``<collection folder>/vectors/all-minilm-l6-v2-int8/``) passes
    :func:`~weftsearch.eval.datasets.load_frozen_vectors` and its record names
    this model and recipe, its five files are copied (checked against their
    hashes); else everything is encoded (minutes: SciFact's 5,183 abstracts
    take about five on two cores).

    Args:
        name: ``scifact``, ``cacm``, ``cisi`` or ``cranfield``.
        data_dir: the collection's folder, or a folder holding it as ``<name>/``.
        out_dir: where the five files go (created when missing); may be the
            frozen folder itself, which is then found to match and kept.
        encoder: as :func:`embed_texts_to`.
        reuse: use matching existing or frozen files; ``False`` encodes anyway.
        overwrite: replace files in ``out_dir`` that do not match.
        progress: as :meth:`Encoder.encode`.

    Raises:
        InvalidParameterError: an unknown collection.
        FileNotFoundError: a collection file is missing.
        DatasetIntegrityError: a collection file differs from its pin, or a
            model file from its pin.
        CorpusFormatError: a collection file does not parse.
        VectorsExistError: non-matching files exist in ``out_dir`` and
            ``overwrite`` is not set.
        MissingDependencyError: encoding is needed and the ``embed`` extra is missing.
        OSError: a file cannot be read or written.

    """
    collection = load_collection(name, data_dir)
    texts = collection_texts(collection)
    parts = (
        _Part("corpus", list(texts.document_ids), list(texts.documents)),
        _Part("queries", list(texts.query_id_lines), list(texts.queries)),
    )
    folder = Path(out_dir)

    def result(
        rows: Sequence[NDArray[np.float32]],
        record: Mapping[str, Any],
        source: Literal["existing", "frozen", "encoded"],
        seconds: float = 0.0,
        note: str = "",
    ) -> CollectionEmbedResult:
        return CollectionEmbedResult(
            name, folder, rows[0], rows[1], texts.document_ids, texts.query_ids, record, source, seconds, note
        )

    if any((folder / file).exists() for file in _COLLECTION_FILES):
        record, rows, reason = _collection_match(folder, name, parts)
        if record is not None:
            if reuse:
                return result(rows, record, "existing")
        elif not overwrite:
            raise _refuse(folder / "record.json", reason)

    note = "reuse=False"
    if reuse:
        frozen = collection.folder / "vectors" / VARIANT
        try:
            # Pins, record hashes, source files, ids and text hashes, all checked there.
            load_frozen_vectors(collection, folder=frozen)
            record, rows, note = _collection_match(frozen, name, parts)
        except (FileNotFoundError, DatasetIntegrityError, CorpusFormatError) as exc:
            record, rows, note = None, [], f"the frozen vectors in {frozen} cannot be used: {exc}"
        if record is not None:
            folder.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileNotFoundError):
                (folder / "record.json").unlink()
            for file in _COLLECTION_FILES:  # record.json is last
                data = (frozen / file).read_bytes()
                if file != "record.json":
                    entry = record["corpus" if file.startswith("corpus") else "queries"]
                    expected = entry["npy_sha256" if file.endswith(".npy") else "ids_sha256"]
                    if _sha256(data) != expected:
                        raise DatasetIntegrityError(f"{frozen / file}: changed while being copied")
                write_atomic(folder / file, data)
            return result(rows, record, "frozen")

    model = _resolve(encoder)
    encoded = [_encode_part(model, part, progress) for part in parts]
    manifest = {entry.path: entry.sha256 for entry in collection.manifest}
    record = {
        "format": _FORMAT,
        "collection": name,
        **model.model_record(),
        "source_files": {source: manifest[source] for source in _TEXT_SOURCES[name]},
        "text_construction": {
            "corpus": "Document.text of weftsearch.eval.datasets.load_collection, in file order "
            "(the frozen record's rule; see that module's docstring)",
            "queries": "the query texts of weftsearch.eval.datasets.load_collection, in file order",
        },
        "publishable": collection.publishable,
        "corpus": encoded[0][3],
        "queries": encoded[1][3],
    }
    folder.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        (folder / "record.json").unlink()
    for part, (_, npy, ids_data, _) in zip(parts, encoded, strict=True):
        write_atomic(folder / part.npy, npy)
        write_atomic(folder / part.ids_file, ids_data)
    write_atomic(folder / "record.json", _json_bytes(record))
    seconds = sum(float(item[3]["encode_seconds"]) for item in encoded)
    return result([item[0] for item in encoded], record, "encoded", seconds, note)
