"""BEIR folders (SciFact and any other), and :func:`load_collection`, the loader of every known collection."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import weftsearch.eval.pins as pin_table
from weftsearch.corpus import _fields as corpus_fields  # the JSONL rules of weft-search index
from weftsearch.corpus import _links as corpus_links
from weftsearch.corpus import parse_time
from weftsearch.documents import Document, FieldValue, TimeLike
from weftsearch.errors import (
    CorpusFormatError,
    InvalidParameterError,
    WeftError,
)
from weftsearch.eval.collection import (
    Collection,
    CollectionVectors,
    FileRecord,
    _check_name,
    _join,
    _lines,
    _verify_files,
    collection_folder,
    provenance_of,
)
from weftsearch.eval.judged import _check_pair, _parse_cacm, _parse_cisi, _parse_cranfield, _Parsed
from weftsearch.eval.pins import _USED, CRANFIELD_GRADES, CollectionPins, CranfieldGrades, Judgements, StrPath
from weftsearch.eval.vectors import load_vector_folder

#: The :attr:`Collection.parameters` key a loader sets with ``fields=True`` (value: ``"title,text"``).
TEXT_FIELDS_PARAMETER = "text_fields"


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


def _beir_document(record: Mapping[str, Any], where: str, key: str, fields_: bool = False) -> Document:
    """One ``corpus.jsonl`` record as a document, with the keys ``weft-search index`` reads.

    ``title`` and ``text`` make the text (the frozen vectors' rule);
    ``links`` (a list of keys), ``time`` (ISO-8601 or POSIX seconds) and
    ``fields`` (an object of scalars) as in :mod:`weftsearch.corpus`'s JSONL
    layout, and BEIR's ``metadata`` (scalar values kept, nested ones dropped,
    as ``weft-search index`` reads a BEIR folder); ``fields`` wins over
    ``metadata`` on a shared name, the title is ``fields["title"]``. With
    ``fields_`` the title is the named text field ``title`` instead (not
    joined to the text, not in ``fields``) and the text is ``text`` alone.
    """
    # BEIR corpora may omit the title; the text is required.
    title = _json_str(record, "title", where).strip() if "title" in record else ""
    text = _json_str(record, "text", where).strip()
    fields: dict[str, FieldValue] = {}
    fields.update(corpus_fields(record.get("metadata"), where, "metadata", strict=False))
    fields.update(corpus_fields(record.get("fields"), where, "fields", strict=True))
    if title and not fields_:
        fields["title"] = title
    try:
        return Document(
            key,
            text if fields_ else _join(title, text),
            links=corpus_links(record.get("links"), where),
            time=parse_time(record.get("time"), where),
            fields=fields,
            text_fields={"title": title} if fields_ and title else {},
        )
    except WeftError as exc:
        if isinstance(exc, CorpusFormatError):
            raise
        raise CorpusFormatError(f"{where}: {exc}") from None


def _parse_beir(
    blobs: Mapping[str, bytes], splits: Sequence[str], main: str, fields: bool = False
) -> _Parsed:
    """BEIR's layout: ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/<split>.tsv`` per split."""
    documents: list[Document] = []
    seen: dict[str, str] = {}
    for where, record in _json_records(blobs["corpus.jsonl"], "corpus.jsonl"):
        key = _json_str(record, "_id", where)
        if key in seen:
            raise CorpusFormatError(f"{where}: document id {key!r} repeats (first at {seen[key]})")
        seen[key] = where
        documents.append(_beir_document(record, where, key, fields))
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


def _parse_scifact(blobs: Mapping[str, bytes], fields: bool = False) -> _Parsed:
    return _parse_beir(blobs, ("train", "test"), "test", fields)


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
    fields: bool = False,
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
        fields: map BEIR's ``title`` and ``text`` onto two text fields: the
            title becomes ``Document.text_fields["title"]`` and the text alone
            is ``Document.text`` (index it with
            ``Schema((TextField("title"),))``). ``False`` (default): one text,
            the title joined before it.

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
    table = pin_table.PINS if pins is None else pins
    pinned = name in table and table[name].file("corpus.jsonl") is not None
    if pinned:
        by_path = {pin.path: pin for pin in table[name].files}
        blobs, manifest = _verify_files(base, paths, by_path, name, any_snapshot)
    else:
        # Nothing public pins this data: nothing to verify against, and nothing contradicted.
        blobs, manifest = _verify_files(base, paths, {}, name, True)
    parsed = _parse_beir(blobs, found, main, fields)
    if fields:
        parsed.parameters[TEXT_FIELDS_PARAMETER] = "title,text"
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
    fields: bool = False,
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
        fields: map the title (BEIR's ``title``, SMART's ``.T``) and the
            text (BEIR's ``text``, SMART's ``.W``: CACM's abstract) onto two
            text fields: the title becomes ``Document.text_fields["title"]``
            (not ``fields["title"]``) and the text alone is ``Document.text``
            (index it with ``Schema((TextField("title"),))``; ``build_testbed``
            does). ``False`` (default): one text, the title joined before it.
            Recorded in :attr:`Collection.parameters` (``text_fields``).

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
    table = pin_table.PINS if pins is None else pins
    if name not in table:
        raise InvalidParameterError(f"no pins for collection {name!r}")
    folder = collection_folder(name, data_dir)
    by_path = {pin.path: pin for pin in table[name].files}
    blobs, manifest = _verify_files(folder, _USED[name], by_path, name, any_snapshot)
    if name == "scifact":
        parsed = _parse_scifact(blobs, fields)
    elif name == "cacm":
        parsed = _parse_cacm(blobs, fields)
    elif name == "cisi":
        parsed = _parse_cisi(blobs, fields)
    else:
        parsed = _parse_cranfield(blobs, cranfield_grades, fields)
    if fields:
        parsed.parameters[TEXT_FIELDS_PARAMETER] = "title,text"
    return _collection(name, folder, parsed, manifest)
