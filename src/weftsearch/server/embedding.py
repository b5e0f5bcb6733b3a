"""Query embedding on the server: the model the index's vectors were made with, named by its record.

An index stores vectors, not where they came from. ``weft-search embed``
writes a record beside the vectors it makes (``NAME.json`` for ``--texts``,
``record.json`` for ``--collection``, the same layout as the frozen
collections' ``record.json``): the model's name, the vector set
(``all-minilm-l6-v2-int8``), the width and the SHA-256 of the model and
tokenizer files. ``weft-search serve --vectors-record FILE`` (or
``create_app(vectors_record=...)``) gives the server that record; from then on:

* a search request may send text only: when its ranking needs a query vector
  (a scorer's ``missing_input`` says ``"a query vector"``), the server embeds
  the text with :class:`weftsearch.embed.Encoder`, the encoder that wrote the
  record, and the response names the model (``query_vector.model``);
* a request that sends a vector may say which model made it
  (``vector_model``: the model's name or its vector-set name); another model
  is refused with a 422 naming both. A vector of another width is refused
  always, record or not (the width is the index's).

The record must name the model :mod:`weftsearch.embed` encodes with for the
server to embed (otherwise it only checks requests against it), and its width
must be the index's. Without the ``embed`` extra the server still serves; a
request that needs the server to embed its text gets a 400 naming the extra.

An index created with an embedder (``Index.create(..., embedder=...)``,
``weft-search index --embed``) records it, and the server then embeds query
text with it without any record (:meth:`QueryEmbedder.of_index`); a
``--vectors-record`` given too must name the same model. Upserts without a
vector are embedded by the index itself (``Index.add_many``).

This module needs no web framework.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from weftsearch.embedders import Embedder, embedder_record, run_embedder
from weftsearch.errors import CorpusFormatError, InvalidParameterError, WeftError

if TYPE_CHECKING:
    from weftsearch.embed import Encoder

__all__ = ["EMBED_HINT", "QueryEmbedder", "VectorModel", "check_fits", "read_vector_model"]

LOG = logging.getLogger("weftsearch.server")

#: What to install for the server to embed queries.
EMBED_HINT = "pip install 'weft-search[server,embed]'"


@dataclass(frozen=True, slots=True)
class VectorModel:
    """The model an index's vectors were made with, as its ``weft-search embed`` record names it.

    Attributes:
        name: the model's name (``sentence-transformers/all-MiniLM-L6-v2``).
        vectors: the vector set's name (``all-minilm-l6-v2-int8``), or the
            model's name when the record gives none.
        dims: the width of every vector.
        record: the record as read (JSON-ready).

    """

    name: str
    vectors: str
    dims: int
    record: Mapping[str, Any]

    def accepts(self, declared: str) -> bool:
        """Whether ``declared`` (a request's ``vector_model``) names this model: its name or its set's."""
        return declared.strip().lower() in (self.name.lower(), self.vectors.lower())

    def describe(self) -> str:
        """``'NAME' (VECTORS, N dims)``, for messages."""
        return f"{self.name!r} ({self.vectors}, {self.dims} dims)"


def read_vector_model(path: str | PathLike[str]) -> VectorModel:
    """Read the record ``weft-search embed`` wrote (or a frozen collection's ``record.json``).

    Raises:
        FileNotFoundError: no file at ``path``.
        CorpusFormatError: not JSON, or without a model name (``model.name``)
            or a positive integer width (``dims``); the message names the file.

    """
    where = Path(path)
    try:
        record = json.loads(where.read_text(encoding="utf-8"))
    except (ValueError, RecursionError) as exc:  # decoding, JSON, nesting too deep
        raise CorpusFormatError(f"{where}: not a JSON record of weft-search embed ({exc})") from None
    if not isinstance(record, dict):
        raise CorpusFormatError(f"{where}: a record is a JSON object, found {type(record).__name__}")
    model = record.get("model")
    name = model.get("name") if isinstance(model, dict) else None
    if not isinstance(name, str) or not name.strip():
        raise CorpusFormatError(f"{where}: the record names no model (model.name)")
    dims = record.get("dims")
    if isinstance(dims, bool) or not isinstance(dims, int) or dims < 1:
        raise CorpusFormatError(f"{where}: the record's width (dims) is {dims!r}, not a positive integer")
    vectors = record.get("vectors")
    return VectorModel(name, vectors if isinstance(vectors, str) and vectors else name, dims, record)


def check_fits(model: VectorModel, vector_dim: int | None, record: object, index: object) -> None:
    """Refuse a record whose width is not the index's (``vector_dim``; ``None``: no vectors yet).

    Raises:
        InvalidParameterError: the widths differ; the message names the record, the index and both widths.

    """
    if vector_dim is not None and model.dims != vector_dim:
        raise InvalidParameterError(
            f"{record}: the record is of {model.describe()}, but the index at {index} holds vectors of "
            f"{vector_dim} dims; give the record of the index's vectors"
        )


class QueryEmbedder:
    """Embeds query texts with the index's model, or says why it cannot.

    Args:
        model: the index's model (:func:`read_vector_model`).
        encoder: makes the encoder (default: :class:`weftsearch.embed.Encoder`
            with one onnxruntime thread, since each request already has a
            thread and a worker process). Called once, at construction.
        cache_size: texts whose vectors are kept (a compare request embeds
            each query once for both rankings; repeated queries are free).
        encode: embeds a list of texts (then ``model`` is taken as it is and
            ``encoder`` is not used); :meth:`of_index` gives it.

    Construction never raises for a missing extra or a model this package
    cannot encode: :attr:`problem` then says why, and :meth:`embed` raises
    it. Thread-safe.

    """

    def __init__(
        self,
        model: VectorModel,
        encoder: Callable[[], Encoder] | None = None,
        cache_size: int = 1024,
        *,
        encode: Callable[[list[str]], NDArray[np.float32]] | None = None,
    ) -> None:
        self.model = model
        self._encode = encode
        self._problem: WeftError | None = None
        self._cache: OrderedDict[str, NDArray[np.float32]] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        if encode is not None:  # an index's embedder (of_index): it is the model, nothing to check
            return
        try:
            from weftsearch.embed import _recipe_mismatch

            mismatch = _recipe_mismatch(model.record)
            if mismatch is not None:
                raise InvalidParameterError(
                    f"this server cannot embed queries with {model.describe()}: weftsearch.embed "
                    f"encodes with another model or recipe (the record says: {mismatch}); send "
                    "query vectors made with that model"
                )
            if encoder is None:
                from weftsearch.embed import Encoder

                made = Encoder(threads=1)
            else:
                made = encoder()
            self._encode = lambda texts: made.encode(texts, progress=False)
        except WeftError as exc:  # MissingDependencyError included: the server serves on
            self._problem = exc
            LOG.warning("queries will not be embedded on the server: %s", exc)

    @classmethod
    def of_index(
        cls,
        embedder: Embedder,
        record: VectorModel | None = None,
        where: object = None,
        cache_size: int = 1024,
    ) -> QueryEmbedder:
        """Embed with the embedder an index records (its name, width and model record name the model).

        Args:
            embedder: the index's embedder (``Index.embedder``).
            record: the ``--vectors-record`` given as well, if any: it must
                name the same model (its name or vector set is the
                embedder's model name or the embedder's name) and width.
            where: the record's path, for messages.
            cache_size: as for the constructor.

        Raises:
            InvalidParameterError: ``record`` names another model or width than the index's embedder.

        """
        model_name = str(embedder.model_record.get("name", embedder.name))
        model = VectorModel(model_name, embedder.name, embedder.dim, embedder_record(embedder))
        if record is not None and (
            record.dims != embedder.dim or not (record.accepts(model_name) or record.accepts(embedder.name))
        ):
            raise InvalidParameterError(
                f"{where}: the record is of {record.describe()}, but the index was made with embedder "
                f"{model.describe()}; give the record of the index's vectors, or none (the index's "
                "embedder embeds query text)"
            )
        return cls(
            model,
            cache_size=cache_size,
            encode=lambda texts: run_embedder(embedder, texts, f"the query text {texts[0]!r:.80}"),
        )

    @property
    def problem(self) -> str | None:
        """Why this server cannot embed, or ``None`` when it can."""
        if self._problem is None:
            return None
        message = str(self._problem)
        if type(self._problem).__name__ == "MissingDependencyError":
            message = f"{message} (for query embedding on the server: {EMBED_HINT})"
        return message

    def embed(self, texts: Sequence[str]) -> list[NDArray[np.float32]]:
        """One float32 row of the model's width per text, in order (cached by text).

        Raises:
            MissingDependencyError: the ``embed`` extra is missing (the message names it).
            InvalidParameterError: the record names a model this package cannot encode with.
            EmbeddingError: the index's embedder failed on the texts.

        """
        if self._problem is not None or self._encode is None:
            error = self._problem or InvalidParameterError("no encoder")
            raise type(error)(self.problem or str(error))
        out: dict[str, NDArray[np.float32]] = {}
        with self._lock:
            for text in texts:
                found = self._cache.get(text)
                if found is not None:
                    self._cache.move_to_end(text)
                    out[text] = found
        todo = list(dict.fromkeys(text for text in texts if text not in out))
        if todo:
            rows = self._encode(todo)
            with self._lock:
                for text, row in zip(todo, rows, strict=True):
                    row = np.array(row, dtype=np.float32)  # a copy: the cache holds no view of a batch
                    row.flags.writeable = False
                    out[text] = row
                    self._cache[text] = row
                    while len(self._cache) > self._cache_size:
                        self._cache.popitem(last=False)
        return [out[text] for text in texts]
