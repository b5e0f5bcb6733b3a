"""stored_record's bytes are exactly canonical ``json.dumps`` of the record (docs/FORMAT.md)."""

from __future__ import annotations

import json
import random
from datetime import datetime, timezone

from weftsearch import Document
from weftsearch.storage.segment_writer import stored_record


def reference(document: Document) -> bytes:
    record = {"text": document.text, "fields": dict(document.fields), "time": document.timestamp}
    return json.dumps(record, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode("utf-8")


TEXTS = [
    "",
    "plain",
    'quotes " and \\ backslash / slash',
    "controls \x01\x1f\t\n\r\x7f\x85 end",
    "unicode \u00e9\u00df\u6771\u4eac \U0001f600 \u2028\u2029 \ufeff",
]
FIELDS: list[dict[str, str | int | float | bool]] = [
    {},
    {"title": "T"},
    {"b": 1, "a": "x", "\u00e9": True, "Z": False, "c": 1.5, "d": -0.0, "e": 1e300, "f": 2**53, "g": 1e-7},
    {"h": -(2**53)},
    {'quote"key': "va\\lue\n", "emoji \U0001f600": "\u2028"},
]
TIMES: list[object] = [
    None,
    0,
    1_600_000_000,
    1_600_000_000.123456789,
    -86400.5,
    1e15,
    "2009-06-01",
    datetime(2020, 2, 29, 12, 0, 1, 999, tzinfo=timezone.utc),
]


def test_stored_record_matches_canonical_json() -> None:
    for text in TEXTS:
        for fields in FIELDS:
            for time in TIMES:
                document = Document(key="k", text=text, fields=fields, time=time)  # type: ignore[arg-type]
                assert stored_record(document) == reference(document), (text, fields, time)


def test_stored_record_matches_canonical_json_on_random_documents() -> None:
    rng = random.Random(14)
    alphabet = 'ab "\\/\x00\x1f\u00e9\u2028\U0001f600\ud7ff\ue000'
    for _ in range(2000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 20)))
        fields: dict[str, str | int | float | bool] = {}
        for _ in range(rng.randint(0, 4)):
            name = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 5)))
            values: list[str | int | float | bool] = [
                text,
                rng.randint(-(2**53), 2**53),  # what a field holds exactly (float64)
                rng.uniform(-1e9, 1e9),
                True,
            ]
            fields[name] = rng.choice(values)
        times: list[float | int | None] = [None, rng.uniform(-1e10, 1e10), rng.randint(0, 2_000_000_000)]
        time = rng.choice(times)
        document = Document(key="k", text=text, fields=fields, time=time)
        assert stored_record(document) == reference(document)
