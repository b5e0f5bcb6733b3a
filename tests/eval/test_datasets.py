"""Dataset loaders: pinned integrity, the format quirks, frozen vectors, and fetching.

Three parts:

* Small fixture collections written into ``tmp_path`` (with pins computed for
  them) exercise every quirk the shared copies have (CRLF, the ``.I 0``
  sentinel, zero-padded qids, Cranfield's query numbering and codes), the
  integrity checks and the vector checks. They always run.
* The shared copies in ``../shared/datasets`` are checked against the counts
  their SOURCE.md files state, a one-byte tampered copy is refused, and the
  frozen vectors are checked to line up. Each test skips with a reason when
  the copy is absent.
* :func:`fetch` runs against a local HTTP server on 127.0.0.1 (``server`` in conftest.py).
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import shutil
import statistics
import tarfile
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest

from weftsearch.errors import (
    CorpusFormatError,
    DatasetIntegrityError,
    InvalidParameterError,
    PairingError,
    WeftError,
)
from weftsearch.eval.datasets import (
    COLLECTIONS,
    PINS,
    ArchivePin,
    Collection,
    CollectionPins,
    CollectionVectors,
    FilePin,
    fetch,
    load_beir,
    load_collection,
    load_frozen_vectors,
)

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "datasets"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_files(folder: Path, files: Mapping[str, bytes]) -> None:
    for path, data in files.items():
        target = folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def pins_for(
    name: str, files: Mapping[str, bytes], vectors: Mapping[str, Mapping[str, bytes]] | None = None
) -> dict[str, CollectionPins]:
    file_pins = tuple(FilePin(path, len(data), sha(data)) for path, data in files.items())
    vector_pins = {
        variant: tuple(FilePin(path, len(data), sha(data)) for path, data in blobs.items())
        for variant, blobs in (vectors or {}).items()
    }
    return {name: CollectionPins(name, file_pins, vectors=vector_pins)}


def flip_one_byte(path: Path, old: bytes, new: bytes) -> None:
    data = path.read_bytes()
    at = data.index(old)
    assert len(old) == len(new)
    path.write_bytes(data[:at] + new + data[at + len(old) :])


# ---------------------------------------------------------------------------- fixture collections

MINI_CACM = b"""\
.I 1
.T
Preliminary Report-International
Algebraic Language
.B
CACM December, 1958
.A
Perlis, A. J.
.N
CA581203 JB March 22, 1978  8:28 PM
.X
2\t5\t1
3\t5\t1
1\t5\t1
1\t5\t1
2\t4\t1
2\t4\t1
1\t4\t1
3\t6\t1
.I 2
.T
Extraction of Roots
.W
 An algorithm for
   extracting roots.

.B
CACM JUly, 1968
.X
1\t5\t2
2\t5\t2
1\t4\t2
1\t4\t2
.I 3
.T
Another Paper
.W
Its abstract.
.B
June, 1969
.X
1\t5\t3
1\t6\t3
"""

MINI_CACM_QUERIES = b"""\
.I 1
.W
 What articles exist which deal with
algebraic languages?
.N
 1. Richard Alexander
.I 2
.W
roots
.A
Someone

.I 0
"""

MINI_CACM_QRELS = b"01 1  0 0\n01 2 0 0\n02 2 0 0\n"


def mini_cacm() -> dict[str, bytes]:
    return {"cacm.all": MINI_CACM, "query.text": MINI_CACM_QUERIES, "qrels.text": MINI_CACM_QRELS}


def crlf(text: bytes) -> bytes:
    return text.replace(b"\n", b"\r\n")


MINI_CISI = crlf(
    b""".I 1
.T
18 Editions of the Dewey
.A
Comaromi, J.P.
.W
   The present study is a history
of the DEWEY Decimal.
.X
1\t5\t1
2\t3\t1
2\t3\t1
.I 2
.T \x20
Use Made of Technical Libraries
.A\t
Slater, M.
.W \x20
This report is an analysis.
.X
1\t3\t2
2\t4\t2
"""
)

MINI_CISI_QUERIES = crlf(
    b""".I 1
.W
What problems are there?
.I 2
.T
Bibliographic query
.A
Someone
.W
 about libraries
"""
)

MINI_CISI_REL = crlf(b"     1     2\t0\t0.000000\n     2      1\t0\t0.000000\n")


def mini_cisi() -> dict[str, bytes]:
    return {"CISI.ALL": MINI_CISI, "CISI.QRY": MINI_CISI_QUERIES, "CISI.REL": MINI_CISI_REL}


MINI_CRAN = b""".I 1
.T
experimental investigation
.A
brenckman,m.
.B
j. ae. scs. 25, 1958, 324.
.W
experimental investigation
  of a wing .
.I 2
.T
.A
.B
.W
.I 3
.T
shear flow
.W
shear flow past a plate .
"""

MINI_CRAN_QUERIES = crlf(b".I 001\n.W\nwhat similarity laws\n.I 002\n.W\nshear flow .\n.I 004\n.W\nheat .\n")
MINI_CRANQREL = b"1 1 1\n1 3 4\n1 2 -1\n2 3 2\n3 1 3"


def mini_cranfield() -> dict[str, bytes]:
    return {"cran.all.1400": MINI_CRAN, "cran.qry": MINI_CRAN_QUERIES, "cranqrel": MINI_CRANQREL}


def mini_scifact() -> dict[str, bytes]:
    corpus = [
        {"_id": "10", "title": " A title ", "text": " Body one. ", "metadata": {}},
        {"_id": "7", "title": "", "text": "Untitled body.", "metadata": {}},
    ]
    queries = [{"_id": "1", "text": " claim one ", "metadata": {}}, {"_id": "2", "text": "claim two"}]
    return {
        "corpus.jsonl": "".join(json.dumps(r) + "\n" for r in corpus).encode(),
        "queries.jsonl": "".join(json.dumps(r) + "\n" for r in queries).encode(),
        "qrels/train.tsv": b"query-id\tcorpus-id\tscore\r\n2\t7\t1\r\n",
        "qrels/test.tsv": b"query-id\tcorpus-id\tscore\r\n1\t10\t1\r\n1\t7\t1\r\n",
    }


MINIS = {"cacm": mini_cacm, "cisi": mini_cisi, "cranfield": mini_cranfield, "scifact": mini_scifact}


def load_mini(tmp_path: Path, name: str, **kwargs: Any) -> Collection:
    files = MINIS[name]()
    folder = tmp_path / name
    write_files(folder, files)
    return load_collection(name, tmp_path, pins=pins_for(name, files), **kwargs)


def test_mini_cacm_quirks(tmp_path: Path) -> None:
    cacm = load_mini(tmp_path, "cacm")
    assert cacm.publishable
    assert cacm.document_keys == ("1", "2", "3")
    first, second, third = cacm.documents
    # Title alone when there is no .W; lines stripped and joined by one space.
    assert first.text == "Preliminary Report-International Algebraic Language"
    assert second.text == "Extraction of Roots An algorithm for extracting roots."
    # .B gives the first day of the month, UTC; odd spellings are read too.
    # (Document.time holds POSIX seconds from construction on.)
    assert first.time == datetime.fromisoformat("1958-12-01T00:00:00+00:00").timestamp()
    assert second.fields["year"] == 1968 and second.fields["month"] == 7
    assert third.fields["year"] == 1969 and third.fields["month"] == 6
    # Type 5 are the links (self lines dropped, both directions as listed).
    assert first.links == ("2", "3") and second.links == ("1",) and third.links == ("1",)
    assert cacm.link_sets["links"] == {"1": {"2": 1, "3": 1}, "2": {"1": 1}, "3": {"1": 1}}
    # Types 4 and 6, weighted by how often a line repeats.
    assert cacm.link_sets["coupling"] == {"1": {"2": 2}, "2": {"1": 2}}
    assert cacm.link_sets["cocitation"] == {"1": {"3": 1}, "3": {"1": 1}}
    # The .I 0 sentinel is skipped; padded qrels ids match the query ids.
    assert cacm.queries == {"1": "What articles exist which deal with algebraic languages?", "2": "roots"}
    assert cacm.qrels == {"1": {"1": 1, "2": 1}, "2": {"2": 1}}
    assert cacm.judged_query_ids() == ("1", "2") and cacm.relevant_pairs() == 3
    assert [record.path for record in cacm.manifest] == ["cacm.all", "query.text", "qrels.text"]
    assert all(record.verified for record in cacm.manifest)


def test_mini_cisi_crlf_and_weights(tmp_path: Path) -> None:
    cisi = load_mini(tmp_path, "cisi")
    one, two = cisi.documents
    assert one.text == "18 Editions of the Dewey The present study is a history of the DEWEY Decimal."
    assert two.text == "Use Made of Technical Libraries This report is an analysis."  # `.T ` markers
    assert all("\r" not in d.text for d in cisi.documents)
    assert one.links == ("2",) and two.links == ("1",)
    # A repeated line with the same weight counts once.
    assert cisi.link_sets == {"associations": {"1": {"2": 3}, "2": {"1": 3}}}
    assert cisi.queries == {"1": "What problems are there?", "2": "Bibliographic query about libraries"}
    assert cisi.qrels == {"1": {"2": 1}, "2": {"1": 1}}
    assert one.time is None


def test_mini_cranfield_numbering_and_grades(tmp_path: Path) -> None:
    cran = load_mini(tmp_path, "cranfield")
    assert cran.documents[1].text == ""  # an empty record stays, with empty text
    assert cran.documents[0].text == "experimental investigation experimental investigation of a wing ."
    # Queries are numbered 1..n in file order, as cranqrel numbers them.
    assert cran.query_ids == ("1", "2", "3")
    assert cran.query_file_ids == {"1": "001", "2": "002", "3": "004"}
    assert cran.queries["3"] == "heat ."
    assert cran.parameters == {"cranfield_grades": "cleverdon"}
    assert cran.qrels == {"1": {"1": 4, "3": 1, "2": 0}, "2": {"3": 3}, "3": {"1": 2}}
    reverse = load_collection(
        "cranfield", tmp_path, pins=pins_for("cranfield", mini_cranfield()), cranfield_grades="ir_datasets"
    )
    assert reverse.qrels == {"1": {"1": 1, "3": 4, "2": 0}, "2": {"3": 2}, "3": {"1": 3}}
    binary = load_collection(
        "cranfield", tmp_path, pins=pins_for("cranfield", mini_cranfield()), cranfield_grades="binary"
    )
    assert binary.qrels == {"1": {"1": 1, "3": 1, "2": 0}, "2": {"3": 1}, "3": {"1": 1}}
    assert binary.relevant_pairs() == 4


def test_mini_scifact_splits(tmp_path: Path) -> None:
    scifact = load_mini(tmp_path, "scifact")
    assert scifact.document_keys == ("10", "7")
    assert [d.text for d in scifact.documents] == ["A title Body one.", "Untitled body."]
    assert scifact.queries == {"1": " claim one ", "2": "claim two"}  # exactly as stored
    assert scifact.qrels == {"1": {"10": 1, "7": 1}} == scifact.splits["test"]
    assert scifact.splits["train"] == {"2": {"7": 1}}
    assert scifact.judged_query_ids("train") == ("2",)
    with pytest.raises(InvalidParameterError, match="no split 'dev'"):
        scifact.judgements("dev")


def beir_files(**extra: bytes) -> dict[str, bytes]:
    corpus = (
        b'{"_id": "d1", "title": "Gene X", "text": "causes disease Y."}\n'
        b'{"_id": "d2", "text": "No title here."}\n'
        b'{"_id": "d3", "title": "", "text": "Empty title."}\n'
    )
    queries = b'{"_id": "q1", "text": "what causes Y"}\n{"_id": "q2", "text": "titles"}\n'
    files = {"corpus.jsonl": corpus, "queries.jsonl": queries}
    files.update(extra)
    return files


def test_any_beir_folder_loads_with_its_splits(tmp_path: Path) -> None:
    files = beir_files(
        **{
            "qrels/test.tsv": b"query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td3\t0\n",
            "qrels/dev.tsv": b"q2\td2\t1\n",
        }
    )
    write_files(tmp_path, files)
    # Nothing public pins it: it loads as it is, unpinned (not unpublishable), every hash recorded.
    loaded = load_beir(tmp_path, name="mine")
    assert loaded.publishable is True and loaded.name == "mine"
    assert loaded.provenance == "unpinned"
    assert all(not record.pinned and len(record.sha256) == 64 for record in loaded.manifest)
    assert loaded.document_keys == ("d1", "d2", "d3")
    texts = ["Gene X causes disease Y.", "No title here.", "Empty title."]
    assert [d.text for d in loaded.documents] == texts
    assert loaded.documents[0].fields == {"title": "Gene X"} and loaded.documents[1].fields == {}
    assert loaded.qrels == {"q1": {"d1": 2, "d3": 0}} == loaded.splits["test"]
    assert loaded.splits["dev"] == {"q2": {"d2": 1}}
    assert loaded.judged_query_ids() == ("q1",)
    assert [record.path for record in loaded.manifest] == [
        "corpus.jsonl",
        "queries.jsonl",
        "qrels/dev.tsv",
        "qrels/test.tsv",
    ]
    # With pins for its name it is verified and publishable.
    pinned = load_beir(tmp_path, name="mine", pins=pins_for("mine", files))
    assert pinned.publishable and pinned.qrels == loaded.qrels and pinned.provenance == "pinned"
    # A pinned collection whose file differs from its pin is mismatched: refused, or unpublishable.
    (tmp_path / "qrels" / "dev.tsv").write_bytes(b"q2\td2\t2\n")
    with pytest.raises(DatasetIntegrityError, match="expected"):
        load_beir(tmp_path, name="mine", pins=pins_for("mine", files))
    waived = load_beir(tmp_path, name="mine", pins=pins_for("mine", files), any_snapshot=True)
    assert waived.publishable is False and waived.provenance == "mismatched"


def test_beir_splits_and_errors(tmp_path: Path) -> None:
    only = tmp_path / "only"
    write_files(only, beir_files(**{"qrels/dev.tsv": b"q2\td2\t1\n"}))
    assert load_beir(only, any_snapshot=True).qrels == {"q2": {"d2": 1}}  # the only split is the main one
    several = tmp_path / "several"
    write_files(several, beir_files(**{"qrels/dev.tsv": b"q2\td2\t1\n", "qrels/train.tsv": b"q1\td1\t1\n"}))
    with pytest.raises(InvalidParameterError, match="none named 'test'"):
        load_beir(several, any_snapshot=True)
    none = tmp_path / "none"
    write_files(none, beir_files())
    with pytest.raises(FileNotFoundError, match="qrels"):
        load_beir(none, any_snapshot=True)
    unknown = tmp_path / "unknown"
    write_files(unknown, beir_files(**{"qrels/test.tsv": b"q1\td9\t1\n"}))
    with pytest.raises(CorpusFormatError, match="d9"):
        load_beir(unknown, any_snapshot=True)
    untitled = tmp_path / "untitled"
    write_files(untitled, beir_files(**{"qrels/test.tsv": b"q1\td1\t1\n"}))
    (untitled / "corpus.jsonl").write_bytes(b'{"_id": "d1", "title": "no text"}\n')
    with pytest.raises(CorpusFormatError, match="'text' must be a string"):
        load_beir(untitled, any_snapshot=True)


def test_the_collection_folder_or_its_parent_is_accepted(tmp_path: Path) -> None:
    files = mini_cacm()
    write_files(tmp_path / "cacm", files)
    a = load_collection("cacm", tmp_path, pins=pins_for("cacm", files))
    b = load_collection("cacm", tmp_path / "cacm", pins=pins_for("cacm", files))
    assert a.folder == b.folder == tmp_path / "cacm"
    with pytest.raises(FileNotFoundError, match=re.escape("cacm.all")):
        load_collection("cacm", tmp_path / "nowhere", pins=pins_for("cacm", files))


def test_tampered_fixture_is_refused_then_loads_unpublishable(tmp_path: Path) -> None:
    files = mini_cacm()
    write_files(tmp_path / "cacm", files)
    pins = pins_for("cacm", files)
    flip_one_byte(tmp_path / "cacm" / "qrels.text", b"02 2", b"02 1")
    actual = sha((tmp_path / "cacm" / "qrels.text").read_bytes())
    with pytest.raises(DatasetIntegrityError) as info:
        load_collection("cacm", tmp_path, pins=pins)
    message = str(info.value)
    assert "qrels.text" in message and sha(files["qrels.text"]) in message and actual in message
    assert isinstance(info.value, WeftError) and isinstance(info.value, ValueError)
    loaded = load_collection("cacm", tmp_path, pins=pins, any_snapshot=True)
    assert loaded.publishable is False
    assert [r.verified for r in loaded.manifest] == [True, True, False]
    assert loaded.qrels["2"] == {"1": 1}
    assert loaded.manifest_dicts()[2]["sha256"] == actual


def test_every_file_is_verified_before_any_is_parsed(tmp_path: Path) -> None:
    files = mini_cacm()
    write_files(tmp_path / "cacm", files)
    pins = pins_for("cacm", files)
    # Break the first file's syntax *and* the last file's hash: the hash error wins.
    (tmp_path / "cacm" / "cacm.all").write_bytes(b"stray text before any record\n" + MINI_CACM)
    (tmp_path / "cacm" / "qrels.text").write_bytes(MINI_CACM_QRELS + b"\n")
    with pytest.raises(DatasetIntegrityError, match=re.escape("cacm.all")):
        load_collection("cacm", tmp_path, pins=pins)
    with pytest.raises(CorpusFormatError, match="text outside a field"):
        load_collection("cacm", tmp_path, pins=pins, any_snapshot=True)


def test_a_file_without_a_pin_is_refused(tmp_path: Path) -> None:
    files = mini_cacm()
    write_files(tmp_path / "cacm", files)
    pins = pins_for("cacm", {k: v for k, v in files.items() if k != "query.text"})
    with pytest.raises(DatasetIntegrityError, match=r"no pinned SHA-256.*query\.text"):
        load_collection("cacm", tmp_path, pins=pins)
    assert not load_collection("cacm", tmp_path, pins=pins, any_snapshot=True).publishable


@pytest.mark.parametrize(
    ("name", "path", "content", "message"),
    [
        ("cacm", "qrels.text", b"01 9  0 0\n", "judged document '9' is not in the corpus"),
        ("cacm", "qrels.text", b"07 1  0 0\n", "judged query '7' is not in the query file"),
        ("cacm", "query.text", MINI_CACM_QUERIES + b".W\nnot empty\n", "sentinel record is not empty"),
        (
            "cacm",
            "cacm.all",
            MINI_CACM.replace(b"3\t6\t1", b"3\t6\t2"),
            "names document 2, inside document 1",
        ),
        ("cacm", "cacm.all", MINI_CACM.replace(b"3\t6\t1", b"9\t6\t1"), "names document 9"),
        ("cacm", "cacm.all", MINI_CACM.replace(b"3\t6\t1", b"3\t7\t1"), ".X type 7"),
        ("cacm", "cacm.all", MINI_CACM.replace(b"June, 1969", b"Summer 1969"), "cannot read a month"),
        ("cacm", "cacm.all", MINI_CACM.replace(b".I 3", b".I 2"), "document id 2 repeats"),
        (
            "cisi",
            "CISI.ALL",
            MINI_CISI.replace(b"1\t3\t2", b"1\t4\t2") + crlf(b"1\t3\t2\n"),
            "weights 4 and 3",
        ),
        ("cranfield", "cranqrel", MINI_CRANQREL + b"\n3 2 5", "relevance code '5'"),
        ("cranfield", "cranqrel", MINI_CRANQREL + b"\n3 1 4", "judged twice, differently"),
        ("scifact", "qrels/test.tsv", b"query-id\tcorpus-id\tscore\r\n1\t10\tyes\r\n", "not an integer"),
        ("scifact", "corpus.jsonl", b'{"_id": "1", "title": "t", "text": 3}\n', "'text' must be a string"),
    ],
)
def test_malformed_files_raise_corpus_format_error(
    tmp_path: Path, name: str, path: str, content: bytes, message: str
) -> None:
    files = {**MINIS[name](), path: content}
    write_files(tmp_path / name, files)
    with pytest.raises(CorpusFormatError, match=re.escape(message)):
        load_collection(name, tmp_path, pins=pins_for(name, files))


def test_unknown_names_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidParameterError, match="unknown collection 'trec'"):
        load_collection("trec", tmp_path)
    with pytest.raises(InvalidParameterError, match="cranfield_grades"):
        load_collection("cranfield", tmp_path, cranfield_grades="upside-down")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- fixture vectors


def vector_files(collection: Collection, *, shuffle: bool = False, model: str = "m/one") -> dict[str, bytes]:
    """A vector folder for ``collection`` as embed_frozen.py writes it (row i = [i, 1, ...])."""
    rng = np.random.default_rng(0)
    out: dict[str, bytes] = {}
    record: dict[str, Any] = {
        "collection": collection.name,
        "model": {"name": model},
        "dims": 3,
        "source_files": {r.path: r.sha256 for r in collection.manifest[:2]},
    }
    for part, keys, texts in (
        ("corpus", collection.document_keys, [d.text for d in collection.documents]),
        ("queries", collection.query_ids, list(collection.queries.values())),
    ):
        order = rng.permutation(len(keys)) if shuffle else np.arange(len(keys))
        matrix = np.array([[float(i), 1.0, 0.0] for i in order], dtype=np.float32)
        buffer = io.BytesIO()
        np.save(buffer, matrix)
        written = collection.query_file_ids if part == "queries" else {}
        lines = [
            f"{keys[i]}\t{written[keys[i]]}" if written.get(keys[i]) not in (None, keys[i]) else keys[i]
            for i in order
        ]
        ids = "".join(line + "\n" for line in lines).encode()
        out[f"{part}.npy"], out[f"{part}_ids.txt"] = buffer.getvalue(), ids
        record[part] = {
            "count": len(keys),
            "npy": f"{part}.npy",
            "ids_file": f"{part}_ids.txt",
            "npy_sha256": sha(out[f"{part}.npy"]),
            "ids_sha256": sha(ids),
            "input_texts_sha256": sha("\n".join(texts[i] for i in order).encode()),
        }
    out["record.json"] = json.dumps(record).encode()
    return out


def load_mini_vectors(
    tmp_path: Path, name: str, blobs: Mapping[str, bytes], *, pinned: bool = True, **kwargs: Any
) -> CollectionVectors:
    files = MINIS[name]()
    pins = pins_for(name, files, {"v1": blobs} if pinned else None)
    collection = load_collection(name, tmp_path, pins=pins)
    return load_frozen_vectors(collection, variant="v1", model="m/one", pins=pins, **kwargs)


@pytest.mark.parametrize("name", ["cacm", "cranfield"])
def test_vectors_are_aligned_to_the_collection_order(tmp_path: Path, name: str) -> None:
    collection = load_mini(tmp_path, name)
    blobs = vector_files(collection, shuffle=True)
    write_files(collection.folder / "vectors" / "v1", blobs)
    vectors = load_mini_vectors(tmp_path, name, blobs)
    assert vectors.publishable
    assert vectors.document_keys == collection.document_keys
    assert vectors.query_ids == collection.query_ids
    np.testing.assert_array_equal(vectors.documents[:, 0], np.arange(len(collection.documents)))
    np.testing.assert_array_equal(vectors.queries[:, 0], np.arange(len(collection.queries)))
    assert not vectors.documents.flags.writeable
    key = collection.document_keys[-1]
    assert vectors.document_vector(key)[0] == len(collection.documents) - 1
    attached = vectors.attach(collection.documents)
    assert [d.key for d in attached] == list(collection.document_keys)
    assert attached[1].vector is not None and attached[1].vector[0] == 1.0


def test_vector_checks(tmp_path: Path) -> None:
    collection = load_mini(tmp_path, "cacm")
    folder = collection.folder / "vectors" / "v1"
    good = vector_files(collection)

    def attempt(blobs: Mapping[str, bytes], **kwargs: Any) -> CollectionVectors:
        shutil.rmtree(folder, ignore_errors=True)
        write_files(folder, blobs)
        return load_mini_vectors(tmp_path, "cacm", blobs, **kwargs)

    def edit_record(change: Mapping[str, Any]) -> dict[str, bytes]:
        record = json.loads(good["record.json"])
        record.update(change)
        return {**good, "record.json": json.dumps(record).encode()}

    assert attempt(good).publishable
    with pytest.raises(CorpusFormatError, match="model 'm/two'"):
        attempt(edit_record({"model": {"name": "m/two"}}))
    with pytest.raises(CorpusFormatError, match="collection 'cisi'"):
        attempt(edit_record({"collection": "cisi"}))
    with pytest.raises(CorpusFormatError, match=re.escape("width 3, record.json says 4")):
        attempt(edit_record({"dims": 4}))
    # The ids must be exactly the collection's keys.
    with pytest.raises(CorpusFormatError, match=r"1 documents without a row \(e.g. '3'\)"):
        bad_ids = good["corpus_ids.txt"].replace(b"3\n", b"99\n")
        attempt({**good, "corpus_ids.txt": bad_ids}, pinned=False, any_snapshot=True)
    # Hashes: the .npy against the record, texts against the collection, sources against the manifest.
    other_npy = io.BytesIO()
    np.save(other_npy, np.ones((3, 3), dtype=np.float32))
    with pytest.raises(DatasetIntegrityError, match=r"corpus.npy: record.json gives SHA-256"):
        attempt({**good, "corpus.npy": other_npy.getvalue()}, pinned=False)
    # Query vectors of other texts belong to other queries: refused, any_snapshot or not, naming the fix.
    texts = json.loads(good["record.json"])
    texts["queries"]["input_texts_sha256"] = "0" * 64
    for any_snapshot in (False, True):
        with pytest.raises(PairingError, match="queries were embedded from texts") as info:
            attempt(edit_record({"queries": texts["queries"]}), any_snapshot=any_snapshot)
        assert "weft-search embed --collection cacm" in str(info.value)
        assert "belong to other queries" in str(info.value) and "0" * 64 in str(info.value)
    # Document texts that differ are a snapshot difference: an error, waived by any_snapshot.
    texts = json.loads(good["record.json"])
    texts["corpus"]["input_texts_sha256"] = "0" * 64
    with pytest.raises(DatasetIntegrityError, match="documents were embedded from texts"):
        attempt(edit_record({"corpus": texts["corpus"]}))
    waived = attempt(edit_record({"corpus": texts["corpus"]}), any_snapshot=True)
    assert waived.publishable is False
    with pytest.raises(DatasetIntegrityError, match=re.escape("made from cacm.all")):
        attempt(edit_record({"source_files": {"cacm.all": "f" * 64}}))
    with pytest.raises(CorpusFormatError, match="does not read"):
        attempt(edit_record({"source_files": {"README": "f" * 64}}))
    # The pinned record.json itself.
    with pytest.raises(DatasetIntegrityError, match=re.escape("record.json")):
        blobs = edit_record({"note": "edited"})
        shutil.rmtree(folder, ignore_errors=True)
        write_files(folder, blobs)
        pins = pins_for("cacm", mini_cacm(), {"v1": good})
        load_frozen_vectors(collection, variant="v1", model="m/one", pins=pins)


def test_query_ids_file_second_column_must_match_the_file_ids(tmp_path: Path) -> None:
    collection = load_mini(tmp_path, "cranfield")
    blobs = vector_files(collection)
    assert blobs["queries_ids.txt"] == b"1\t001\n2\t002\n3\t004\n"
    blobs["queries_ids.txt"] = b"1\t001\n2\t003\n3\t004\n"
    write_files(collection.folder / "vectors" / "v1", blobs)
    with pytest.raises(CorpusFormatError, match="'003', the collection says '002'"):
        load_mini_vectors(tmp_path, "cranfield", blobs, pinned=False, any_snapshot=True)


# ---------------------------------------------------------------------------- the shared copies


def shared(name: str) -> Path:
    folder = DATA / name
    if not folder.is_dir():
        pytest.skip(f"{name}: the shared copy is not at {folder} (../shared/datasets/{name})")
    return folder


_LOADED: dict[str, Collection] = {}


def collection(name: str) -> Collection:
    shared(name)
    if name not in _LOADED:
        _LOADED[name] = load_collection(name, DATA)
    return _LOADED[name]


def undirected(links: Mapping[str, Mapping[str, int]]) -> set[frozenset[str]]:
    return {frozenset((a, b)) for a, neighbours in links.items() for b in neighbours}


def symmetric(links: Mapping[str, Mapping[str, int]]) -> bool:
    return all(links.get(b, {}).get(a) == w for a, ns in links.items() for b, w in ns.items())


#: name -> (documents, queries, judged queries, relevant pairs), from each SOURCE.md.
COUNTS = {
    "scifact": (5183, 1109, 300, 339),
    "cacm": (3204, 64, 52, 796),
    "cisi": (1460, 112, 76, 3114),
    "cranfield": (1400, 225, 225, 1612),
}


@pytest.mark.data
@pytest.mark.parametrize("name", COLLECTIONS)
def test_counts_match_source_md(name: str) -> None:
    loaded = collection(name)
    documents, queries, judged, pairs = COUNTS[name]
    assert loaded.publishable
    assert len(loaded.documents) == documents and len(set(loaded.document_keys)) == documents
    assert len(loaded.queries) == queries
    assert len(loaded.judged_query_ids()) == judged
    assert loaded.relevant_pairs() == pairs
    assert all(record.verified for record in loaded.manifest)
    pins = {pin.path: pin for pin in PINS[name].files}
    for record in loaded.manifest:
        assert (record.size, record.sha256) == (pins[record.path].size, pins[record.path].sha256)


@pytest.mark.data
@pytest.mark.parametrize("name", COLLECTIONS)
def test_compiled_pins_equal_the_source_md_table(name: str) -> None:
    text = (shared(name) / "SOURCE.md").read_text(encoding="utf-8")
    table = {
        m.group(1): (int(m.group(2)), m.group(3))
        for m in re.finditer(r"^\| `([^`]+)` \| (\d+) \| `([0-9a-f]{64})` \|", text, re.MULTILINE)
    }
    compiled = {pin.path: (pin.size, pin.sha256) for pin in PINS[name].files}
    assert table == compiled
    for pin in PINS[name].files:
        assert pin.url is not None or pin.archive is not None
    for archive in PINS[name].archives:
        assert archive.sha256 in text and f"{archive.size:,}" in text


@pytest.mark.data
def test_cacm_details() -> None:
    cacm = collection("cacm")
    assert cacm.query_ids == tuple(str(i) for i in range(1, 65))  # .I 0 skipped
    assert "0" not in cacm.queries and all(not qid.startswith("0") for qid in cacm.qrels)
    assert set(cacm.qrels) <= set(cacm.queries)
    keys = set(cacm.document_keys)
    assert all(docid in keys for docs in cacm.qrels.values() for docid in docs)
    linked = {d.key for d in cacm.documents if d.links}
    assert len(linked) == 1751
    links = cacm.link_sets["links"]
    assert len(undirected(links)) == 2720 and symmetric(links)
    assert {d.key: set(d.links) for d in cacm.documents if d.links} == {k: set(v) for k, v in links.items()}
    degrees = [len(d.links) for d in cacm.documents if d.links]
    assert statistics.median(degrees) == 2 and max(degrees) == 73
    for name, pairs, docs in (("coupling", 6165, 997), ("cocitation", 5320, 985)):
        assert len(undirected(cacm.link_sets[name])) == pairs and len(cacm.link_sets[name]) == docs
        assert symmetric(cacm.link_sets[name])
    assert sum(docid in linked for docs in cacm.qrels.values() for docid in docs) == 637
    years = [cast(int, d.fields["year"]) for d in cacm.documents]
    assert all(d.time is not None for d in cacm.documents)
    assert min(years) == 1958 and max(years) == 1979
    assert sum(1 for d in cacm.documents if d.text == d.fields.get("title", "")) == 3204 - 1587


@pytest.mark.data
def test_cisi_details() -> None:
    cisi = collection("cisi")
    assert all("\r" not in d.text for d in cisi.documents)
    assert all("\r" not in text for text in cisi.queries.values())
    associations = cisi.link_sets["associations"]
    assert len(undirected(associations)) == 38672 and symmetric(associations)
    assert sum(1 for d in cisi.documents if d.links) == 1439
    # SOURCE.md's "maximum weight is 82" counts the self lines, which are dropped here.
    assert max(w for ns in associations.values() for w in ns.values()) == 16
    linked = {d.key for d in cisi.documents if d.links}
    assert sum(docid in linked for docs in cisi.qrels.values() for docid in docs) == 3084
    assert sum(1 for text in cisi.queries.values() if text) == 112


@pytest.mark.data
def test_cranfield_details() -> None:
    cran = collection("cranfield")
    assert cran.query_ids == tuple(str(i) for i in range(1, 226))
    assert cran.query_file_ids["1"] == "001" and cran.query_file_ids["3"] == "004"
    assert cran.query_file_ids["225"] == "365"
    assert sum(len(docs) for docs in cran.qrels.values()) == 1837
    grades = [g for docs in cran.qrels.values() for g in docs.values()]
    # cleverdon: code 1 (128) -> 4, 2 (387) -> 3, 3 (734) -> 2, 4 (363) -> 1, -1 (225) -> 0.
    assert {g: grades.count(g) for g in range(5)} == {4: 128, 3: 387, 2: 734, 1: 363, 0: 225}
    assert all(sum(g == 0 for g in docs.values()) == 1 for docs in cran.qrels.values())
    assert cran.documents[470].text == "" and cran.documents[994].text == ""


@pytest.mark.data
def test_scifact_details() -> None:
    scifact = collection("scifact")
    assert scifact.qrels is scifact.splits["test"]
    test, train = scifact.splits["test"], scifact.splits["train"]
    assert (len(test), sum(map(len, test.values()))) == (300, 339)
    assert (len(train), sum(map(len, train.values()))) == (809, 919)
    assert not set(test) & set(train)
    assert all(g == 1 for docs in (*test.values(), *train.values()) for g in docs.values())


@pytest.mark.data
def test_the_beir_loader_reads_scifact_exactly_as_load_collection() -> None:
    scifact = collection("scifact")
    beir = load_beir(shared("scifact"), name="scifact")
    assert beir.publishable
    assert [(d.key, d.text, dict(d.fields)) for d in beir.documents] == [
        (d.key, d.text, dict(d.fields)) for d in scifact.documents
    ]
    assert beir.queries == scifact.queries and beir.splits == scifact.splits and beir.qrels == scifact.qrels
    assert {r.path: r.sha256 for r in beir.manifest} == {r.path: r.sha256 for r in scifact.manifest}


@pytest.mark.data
def test_a_tampered_copy_is_refused_and_loads_unpublishable(tmp_path: Path) -> None:
    source = shared("cacm")
    copy = tmp_path / "cacm"
    copy.mkdir()
    for path in ("cacm.all", "query.text", "qrels.text"):
        shutil.copyfile(source / path, copy / path)
    flip_one_byte(copy / "cacm.all", b"Preliminary", b"Preliminarx")
    actual = sha((copy / "cacm.all").read_bytes())
    with pytest.raises(DatasetIntegrityError) as info:
        load_collection("cacm", copy)
    assert "cacm.all" in str(info.value)
    assert PINS["cacm"].files[1].sha256 in str(info.value) and actual in str(info.value)
    loaded = load_collection("cacm", copy, any_snapshot=True)
    assert loaded.publishable is False
    assert loaded.documents[0].text.startswith("Preliminarx")
    # The frozen vectors no longer match the texts: refused, or waived and unpublishable.
    vectors = source / "vectors" / "all-minilm-l6-v2-int8"
    with pytest.raises(DatasetIntegrityError, match=re.escape("cacm.all")):
        load_frozen_vectors(loaded, folder=vectors)
    assert load_frozen_vectors(loaded, folder=vectors, any_snapshot=True).publishable is False


@pytest.mark.data
@pytest.mark.parametrize("name", COLLECTIONS)
def test_frozen_vectors_line_up(name: str) -> None:
    loaded = collection(name)
    vectors = load_frozen_vectors(loaded)
    assert vectors.publishable and vectors.model == "sentence-transformers/all-MiniLM-L6-v2"
    assert vectors.documents.shape == (len(loaded.documents), 384)
    assert vectors.queries.shape == (len(loaded.queries), 384)
    folder = loaded.folder / "vectors" / "all-minilm-l6-v2-int8"
    ids = (folder / "corpus_ids.txt").read_text(encoding="utf-8").split()
    assert tuple(ids) == loaded.document_keys == vectors.document_keys
    qids = [line.split("\t")[0] for line in (folder / "queries_ids.txt").read_text().splitlines()]
    assert tuple(qids) == loaded.query_ids
    raw = np.load(folder / "corpus.npy")
    np.testing.assert_array_equal(vectors.documents, raw)
    norms = np.linalg.norm(vectors.documents, axis=1)
    assert np.allclose(norms, 1.0, atol=1e-5)


@pytest.mark.data
def test_cranfield_grade_direction_follows_similarity() -> None:
    """The evidence for the "cleverdon" mapping: higher grades are closer to the query."""
    cran = collection("cranfield")
    vectors = load_frozen_vectors(cran)
    scores = vectors.queries @ vectors.documents.T
    ranks = (-scores).argsort(axis=1).argsort(axis=1) + 1
    rows = {key: row for row, key in enumerate(cran.document_keys)}
    by_grade: dict[int, list[int]] = {}
    for q, qid in enumerate(cran.query_ids):
        for docid, grade in cran.qrels.get(qid, {}).items():
            by_grade.setdefault(grade, []).append(int(ranks[q, rows[docid]]))
    medians = {grade: statistics.median(r) for grade, r in by_grade.items()}
    assert medians[4] < medians[3] < medians[2] < medians[1]
    assert (medians[4], medians[1]) == (10.5, 47)


# ---------------------------------------------------------------------------- fetch

# The `server` fixture (a local HTTP server on 127.0.0.1) is in conftest.py.

UPSTREAM = "https://upstream.invalid/owner/repo/0123abcd"
FILES = {"a.txt": b"alpha\n" * 100, "qrels/b.tsv": b"q\td\t1\r\n"}


def fetch_pins(files: Mapping[str, bytes] = FILES) -> dict[str, CollectionPins]:
    pins = tuple(FilePin(path, len(data), sha(data), f"{UPSTREAM}/{path}") for path, data in files.items())
    return {"mini": CollectionPins("mini", pins)}


def serve(root: Path, files: Mapping[str, bytes]) -> None:
    write_files(root / "owner" / "repo" / "0123abcd", files)


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def test_fetch_downloads_and_verifies(server: tuple[Path, str], tmp_path: Path) -> None:
    root, base = server
    serve(root, FILES)
    out = tmp_path / "out"
    result = fetch("mini", out, base_url=base, pins=fetch_pins())
    assert result.folder == out / "mini"
    assert result.downloaded == ("a.txt", "qrels/b.tsv")
    for path, data in FILES.items():
        assert (out / "mini" / path).read_bytes() == data
    assert [r.path for r in result.files] == ["a.txt", "qrels/b.tsv"] and all(
        r.verified for r in result.files
    )
    assert leftovers(out) == ["a.txt", "b.tsv"]
    again = fetch("mini", out, base_url=base, pins=fetch_pins())
    assert again.downloaded == () and [r.path for r in again.files] == ["a.txt", "qrels/b.tsv"]


@pytest.mark.parametrize(
    ("served", "message"),
    [
        (b"alpha\n" * 99, r"expected 600 bytes .* the server offers 594 bytes"),
        (b"alpha\n" * 101, r"expected 600 bytes .* the server offers 606 bytes"),
        (
            b"alphA\n" + b"alpha\n" * 99,
            r"expected 600 bytes with SHA-256 [0-9a-f]{64}, got 600 bytes with SHA-256",
        ),
    ],
)
def test_fetch_refuses_a_mismatch_and_leaves_nothing(
    server: tuple[Path, str], tmp_path: Path, served: bytes, message: str
) -> None:
    root, base = server
    serve(root, {**FILES, "a.txt": served})
    out = tmp_path / "out"
    with pytest.raises(DatasetIntegrityError, match=message) as info:
        fetch("mini", out, base_url=base, pins=fetch_pins())
    assert "mini/a.txt" in str(info.value) and sha(FILES["a.txt"]) in str(info.value)
    if len(served) == 600:
        assert sha(served) in str(info.value)
    assert leftovers(out) == []


def test_fetch_never_replaces_a_file_with_a_bad_download(server: tuple[Path, str], tmp_path: Path) -> None:
    root, base = server
    serve(root, {**FILES, "a.txt": b"x" * 600})
    old = tmp_path / "out" / "mini" / "a.txt"
    old.parent.mkdir(parents=True)
    old.write_bytes(b"an older copy")
    with pytest.raises(DatasetIntegrityError):
        fetch("mini", tmp_path / "out", base_url=base, pins=fetch_pins())
    assert old.read_bytes() == b"an older copy"
    assert leftovers(tmp_path / "out") == ["a.txt"]


def test_fetch_cleans_up_after_a_broken_connection_or_404(server: tuple[Path, str], tmp_path: Path) -> None:
    _root, base = server
    out = tmp_path / "out"
    broken = {
        "mini": CollectionPins("mini", (FilePin("c.bin", 100, "0" * 64, "https://x.invalid/broken/c"),))
    }
    with pytest.raises(DatasetIntegrityError, match=r"expected 100 bytes .* got 10 bytes"):
        fetch("mini", out, base_url=base, pins=broken)
    assert leftovers(out) == []
    with pytest.raises(OSError, match="HTTP 404"):
        fetch("mini", out, base_url=base, pins=fetch_pins())
    assert leftovers(out) == []


def test_fetch_extracts_members_of_a_pinned_archive(server: tuple[Path, str], tmp_path: Path) -> None:
    root, base = server
    members = {"X.ALL": b"all\r\n" * 50, "X.REL": b"rel\r\n"}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(f"x/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    archive = buffer.getvalue()
    write_files(root / "owner" / "repo", {"x.tar.gz": archive})
    pins = {
        "mini": CollectionPins(
            "mini",
            tuple(FilePin(n, len(d), sha(d), archive="x.tar") for n, d in members.items()),
            archives=(
                ArchivePin(
                    "x.tar", "https://upstream.invalid/owner/repo/x.tar.gz", len(archive), sha(archive)
                ),
            ),
        )
    }
    result = fetch("mini", tmp_path / "out", base_url=base, pins=pins)
    assert result.downloaded == ("X.ALL", "X.REL")
    assert leftovers(tmp_path / "out") == ["X.ALL", "X.REL"]
    assert (tmp_path / "out" / "mini" / "X.ALL").read_bytes() == members["X.ALL"]
    # A member that differs from its pin is refused; the archive is checked first.
    bad = {"mini": replace_member_pin(pins["mini"], "X.REL", b"other")}
    with pytest.raises(DatasetIntegrityError, match=re.escape("x.tar:X.REL")):
        fetch("mini", tmp_path / "out2", base_url=base, pins=bad)
    assert leftovers(tmp_path / "out2") == ["X.ALL"]
    wrong_archive = CollectionPins(
        "mini",
        pins["mini"].files,
        (ArchivePin("x.tar", pins["mini"].archives[0].url, len(archive), "1" * 64),),
    )
    with pytest.raises(DatasetIntegrityError, match=re.escape("mini/x.tar")):
        fetch("mini", tmp_path / "out3", base_url=base, pins={"mini": wrong_archive})
    assert leftovers(tmp_path / "out3") == []


def replace_member_pin(pins: CollectionPins, path: str, data: bytes) -> CollectionPins:
    files = tuple(
        FilePin(p.path, len(data), sha(data), archive=p.archive) if p.path == path else p for p in pins.files
    )
    return CollectionPins(pins.name, files, pins.archives)


def test_fetch_refuses_unknown_names_and_non_http_urls(tmp_path: Path) -> None:
    with pytest.raises(InvalidParameterError, match="unknown collection"):
        fetch("nope", tmp_path)
    local = {"mini": CollectionPins("mini", (FilePin("a", 1, "0" * 64, "file:///etc/hostname"),))}
    with pytest.raises(InvalidParameterError, match="only http and https"):
        fetch("mini", tmp_path, pins=local)
    with pytest.raises(InvalidParameterError, match="only http and https"):
        fetch("mini", tmp_path, pins=fetch_pins(), base_url="ftp://127.0.0.1")
    assert leftovers(tmp_path / "mini") == []


def test_compiled_pins_point_at_fixed_public_commits() -> None:
    for name in COLLECTIONS:
        urls = [pin.url for pin in PINS[name].files if pin.url] + [a.url for a in PINS[name].archives]
        assert urls
        for url in urls:
            assert re.match(r"^https://raw\.githubusercontent\.com/[^/]+/[^/]+/[0-9a-f]{40}/", url), url


@pytest.mark.data
def test_fetch_a_shared_collection_from_a_local_mirror(server: tuple[Path, str], tmp_path: Path) -> None:
    """The compiled CACM pins and URLs, served from a mirror laid out like raw.githubusercontent.com."""
    source = shared("cacm")
    root, base = server
    for pin in PINS["cacm"].files:
        assert pin.url is not None
        target = root / pin.url.split("://", 1)[1].split("/", 1)[1]
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source / pin.path, target)
    result = fetch("cacm", tmp_path, base_url=base)
    assert len(result.downloaded) == 6
    assert load_collection("cacm", tmp_path).publishable


def test_a_deeply_nested_vector_record_is_a_format_error(tmp_path: Path) -> None:
    # Issue 26 item 4: every JSON record read from disk; this one was a RecursionError.
    from weftsearch.errors import CorpusFormatError
    from weftsearch.eval.vectors import _part_records

    deep = ("[" * 100_000 + "]" * 100_000).encode()
    for name in ("record.json", "corpus.json"):
        with pytest.raises(CorpusFormatError, match=name):
            _part_records(tmp_path, {name: deep})
