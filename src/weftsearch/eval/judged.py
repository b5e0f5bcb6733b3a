"""The judged collections in SMART format (CACM, CISI, Cranfield): their files parsed."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone

from weftsearch.documents import Document, FieldValue
from weftsearch.errors import (
    CorpusFormatError,
)
from weftsearch.eval.collection import _int_id, _join, _lines
from weftsearch.eval.pins import Judgements

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
    fields_: bool = False,
) -> list[Document]:
    """The records as documents; ``fields_``: ``.T`` is the text field ``title`` and ``.W`` alone the text."""
    documents: list[Document] = []
    for key, record in records.items():
        title = record.text("T")
        fields: dict[str, FieldValue] = {"title": title} if title and not fields_ else {}
        when: datetime | None = None
        if extra is not None and key in extra:
            when, more = extra[key]
            fields.update(more)
        neighbours = tuple(sorted(links.get(key, {}), key=int))
        if fields_:
            text_fields = {"title": title} if title else {}
            documents.append(
                Document(
                    key, record.text("W"), links=neighbours, time=when, fields=fields, text_fields=text_fields
                )
            )
        else:
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


@dataclass
class _Parsed:
    documents: list[Document]
    queries: dict[str, str]
    qrels: Judgements
    splits: dict[str, Judgements] = field(default_factory=dict)
    link_sets: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    query_file_ids: dict[str, str] = field(default_factory=dict)
    parameters: dict[str, str] = field(default_factory=dict)


def _parse_cacm(blobs: Mapping[str, bytes], fields_: bool = False) -> _Parsed:
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
    documents = _documents(records, link_sets["links"], extra, fields_)
    keys = {document.key: None for document in documents}
    queries, written = _smart_queries(
        _lines(blobs["query.text"], "query.text"), "query.text", "W", sentinel=True
    )
    qrels = _binary_qrels(_lines(blobs["qrels.text"], "qrels.text"), "qrels.text", queries, keys, 4)
    return _Parsed(documents, queries, qrels, link_sets=link_sets, query_file_ids=written)


def _parse_cisi(blobs: Mapping[str, bytes], fields_: bool = False) -> _Parsed:
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
    documents = _documents(records, weights, None, fields_)
    keys = {document.key: None for document in documents}
    queries, written = _smart_queries(_lines(blobs["CISI.QRY"], "CISI.QRY"), "CISI.QRY", "TW", sentinel=False)
    qrels = _binary_qrels(_lines(blobs["CISI.REL"], "CISI.REL"), "CISI.REL", queries, keys, 4)
    return _Parsed(documents, queries, qrels, link_sets={"associations": weights}, query_file_ids=written)


_CRANFIELD_MAPS: Mapping[str, Mapping[int, int]] = {
    "cleverdon": {1: 4, 2: 3, 3: 2, 4: 1, -1: 0},
    "ir_datasets": {1: 1, 2: 2, 3: 3, 4: 4, -1: 0},
    "binary": {1: 1, 2: 1, 3: 1, 4: 1, -1: 0},
}


def _parse_cranfield(blobs: Mapping[str, bytes], grades: str, fields_: bool = False) -> _Parsed:
    path = "cran.all.1400"
    records = _smart_documents(_parse_smart(_lines(blobs[path], path), path), path)
    documents = _documents(records, {}, None, fields_)
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
