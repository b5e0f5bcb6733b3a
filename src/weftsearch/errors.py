"""The exceptions weft-search raises on bad input or a damaged index.

Every error the library raises on purpose derives from :class:`WeftError`, so a
caller can catch the whole family with one clause. Each concrete class also
derives from the built-in exception a Python programmer would expect
(``ValueError`` for a bad value, ``KeyError`` for an unknown key, ``OSError``
for storage trouble), so existing ``except ValueError`` code keeps working.
Messages always name the offending value.
"""

from __future__ import annotations

__all__ = [
    "WeftError",
    "InvalidDocumentError",
    "DuplicateKeyError",
    "UnknownKeyError",
    "InvalidVectorError",
    "VectorDimensionError",
    "InvalidQueryError",
    "InvalidParameterError",
    "UnknownSignalError",
    "ScorerOutputError",
    "UnknownAnalyzerError",
    "CorpusFormatError",
    "DatasetIntegrityError",
    "IndexStorageError",
    "IndexNotFoundError",
    "IndexLockedError",
    "CorruptIndexError",
    "FormatVersionError",
    "UnknownMeasureError",
    "PairingError",
    "MissingDependencyError",
    "VectorsExistError",
    "IndexExistsError",
    "MissingInputError",
    "PluginError",
    "IndexClosedError",
    "UncommittedWritesError",
    "DiscardedWritesWarning",
    "TruncatedTextWarning",
    "ManifestRollbackError",
    "AnalysisError",
    "QuerySyntaxError",
    "PhrasePositionsError",
    "UnknownTextFieldError",
    "InvalidFilterError",
    "FilterSyntaxError",
    "UnknownFieldError",
    "FilterTypeError",
    "FieldTypeError",
    "ShardUnavailableError",
    "ShardedCutError",
    "PartialGraphError",
    "ServerStartError",
    "PlanChangedError",
    "ReportExistsError",
    "ServerUnreachableError",
    "TrialValidationError",
    "InvalidCursorError",
    "CursorExpiredError",
    "UnknownEmbedderError",
    "EmbedderMismatchError",
    "EmbeddingError",
]


class WeftError(Exception):
    """Base class of every error weft-search raises deliberately."""


class InvalidDocumentError(WeftError, ValueError):
    """A document failed validation: empty key, wrong field type, bad time, ..."""


class DuplicateKeyError(InvalidDocumentError):
    """The same key appears twice within one bulk call (``Index.add_many``)."""


class UnknownKeyError(WeftError, KeyError):
    """A key that is not in the index (or a snapshot) was asked for."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the message readable.
        return str(self.args[0]) if self.args else ""


class InvalidVectorError(WeftError, ValueError):
    """A vector is not a finite, one-dimensional array of numbers."""


class VectorDimensionError(InvalidVectorError):
    """A vector's width differs from the width the index holds."""


class InvalidQueryError(WeftError, ValueError):
    """A query is malformed (wrong types, unknown seed key, ...)."""


class InvalidParameterError(WeftError, ValueError):
    """A parameter is out of range: ``k <= 0``, a negative weight, ``b > 1``, ..."""


class UnknownSignalError(WeftError, ValueError):
    """A signal (scorer) or fusion name that weft-search does not know."""


class ScorerOutputError(WeftError, RuntimeError):
    """A scorer or fuser returned something that breaks its contract."""


class UnknownAnalyzerError(WeftError, ValueError):
    """An analyzer name that is not registered (see ``register_analyzer``)."""


class CorpusFormatError(WeftError, ValueError):
    """A corpus file (JSONL, BEIR, vectors) could not be read as documents."""


class DatasetIntegrityError(WeftError, ValueError):
    """A dataset file's size or SHA-256 differs from the value pinned in the package.

    The message names the file, the expected and the actual hash. Loading such
    a copy anyway (``any_snapshot=True``) marks every number made from it as
    unpublishable.
    """


class IndexStorageError(WeftError, OSError):
    """The on-disk index could not be read or written (path, permissions, disk)."""


class IndexNotFoundError(IndexStorageError):
    """No index exists at the given path."""


class IndexLockedError(IndexStorageError):
    """Another writer (process or ``Index`` object) holds the index's writer lock."""


class CorruptIndexError(IndexStorageError):
    """Stored bytes fail their checksum or decode to something impossible."""


class FormatVersionError(IndexStorageError):
    """The index was written by a format version this code cannot read."""


class UnknownMeasureError(WeftError, ValueError):
    """An evaluation measure name that does not parse (``"nDCG@0"``, ``"F1"``, ...)."""


class PairingError(WeftError, ValueError):
    """The evaluation harness cannot verify that its inputs belong together.

    Raised instead of producing a number: a judged document is absent from the
    index, query vectors were made from other texts than the queries, vectors
    come from another model than the one recorded, or two runs cover
    different queries.
    """


class MissingDependencyError(WeftError, ImportError):
    """An optional feature needs a package that is not installed.

    The message names the extra to install (``pip install 'weft-search[embed]'``).
    """


class VectorsExistError(WeftError, FileExistsError):
    """Vector files already exist at the target and were not made from these texts with this model.

    The message says what differs; pass ``overwrite=True`` (``--overwrite``)
    to replace them.
    """


class IndexExistsError(IndexStorageError, FileExistsError):
    """``Index.create`` was given a directory that is not empty, without ``overwrite=True``.

    The command line says ``--overwrite`` instead.
    """


class MissingInputError(InvalidParameterError):
    """An evaluation arm uses a scorer that has no input for any query.

    No vectors in the index, no query vectors, no links, no times: the
    scorer's stream would be empty for every query and the arm would report a
    difference of exactly zero. The message names the arm, the scorer and
    what is missing.
    """


class PluginError(WeftError, ImportError):
    """A plugin module (``weft-search eval --plugin MODULE``) could not be imported.

    Also an embedder's entry point (group ``weftsearch.embedders``) that failed
    to load. The message names the module or entry point and the error its import raised.
    """


class IndexClosedError(IndexStorageError):
    """A call on an ``Index`` after ``close()``; the message names the index's path."""


class UncommittedWritesError(IndexStorageError):
    """``Index.close()`` was called with writes not committed; the index stays open.

    Commit them, or pass ``discard=True`` to drop them. The message says how
    many documents and deletions are pending.
    """


class DiscardedWritesWarning(WeftError, UserWarning):  # noqa: N818 - a warning, named as Python names them
    """Uncommitted writes were dropped because a ``with Index...`` block ended by an exception."""


class TruncatedTextWarning(WeftError, UserWarning):  # noqa: N818 - a warning, named as Python names them
    """An embedder truncated texts longer than its model takes (documents still added, queries still run).

    Warned once per ``add``/``add_many``/``embed_documents`` call (and per
    query text) with an embedder that counts truncation
    (:class:`weftsearch.embedders.CountsTruncation`, as the built-in MiniLM
    does at 256 tokens): only the first tokens of such a text shape its
    vector. The message names the count, the limit and the first keys.

    Attributes:
        embedder: the embedder's name.
        count: how many texts of the call were truncated.
        keys: the keys of the truncated documents (empty for a query text).

    """

    def __init__(self, message: str, embedder: str, count: int, keys: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.embedder = embedder
        self.count = count
        self.keys = keys


class ManifestRollbackError(CorruptIndexError):
    """The manifest went back to a generation older than one this ``Index`` has already shown.

    Also raised for the same generation with other content, or another index's
    manifest (a directory restored from a backup or replaced). Generation
    numbers never go backwards; reopen the index to accept the restored state.
    """


class AnalysisError(InvalidDocumentError):
    """The analyzer raised on a document's text; the message names the document, analyzer and error.

    ``Index.add_many`` raises it for the first such document in input order,
    with the same message whether analysis ran in one process or several.
    """


#: Characters of the query shown on each side of the caret of a :class:`QuerySyntaxError`.
_CARET_WINDOW = 60


def _caret(query: str, position: int) -> str:
    """The query (a window of it around ``position``) over a line with a caret under ``position``."""
    start = max(0, position - _CARET_WINDOW)
    stop = min(len(query), position + _CARET_WINDOW)
    # Control characters and other whitespace would shift the caret: shown as spaces.
    shown = "".join(" " if ch.isspace() or not ch.isprintable() else ch for ch in query[start:stop])
    prefix = "..." if start else ""
    suffix = "..." if stop < len(query) else ""
    return f"  {prefix}{shown}{suffix}\n  {' ' * (len(prefix) + position - start)}^"


class QuerySyntaxError(InvalidQueryError):
    """A query string (``Query.parse``, :mod:`weftsearch.querylang`) is malformed or too large.

    The message names the problem and the character position, and shows the
    query with a caret under that position.

    Attributes:
        position: index of the offending character in the query (code points).
        query: the query text.

    """

    def __init__(self, message: str, position: int, query: str = "") -> None:
        self.position = position
        self.query = query
        self.reason = message
        super().__init__(f"{message} at position {position}\n{_caret(query, position)}")

    def __reduce__(self) -> tuple[type[QuerySyntaxError], tuple[str, int, str]]:
        return (type(self), (self.reason, self.position, self.query))


class PhrasePositionsError(InvalidQueryError):
    """A phrase query on an index (or field) that keeps no term positions; the message names the phrase."""


class UnknownTextFieldError(InvalidQueryError):
    """A query clause names a text field the schema lacks (``title:word``); the message names the known."""


class InvalidFilterError(InvalidQueryError):
    """A filter expression is not valid (see :mod:`weftsearch.engine.filters`)."""


class FilterSyntaxError(InvalidFilterError):
    """The string form of a filter is malformed; the message names the character position."""


class UnknownFieldError(InvalidFilterError):
    """A filter names a field no document of the index has; the message lists close names."""


class FilterTypeError(InvalidFilterError):
    """A filter compares a field with a value of another type, or ranges over a non-number field."""


class FieldTypeError(InvalidDocumentError):
    """A document's field holds another type than the index recorded for that field.

    A field's type (keyword, number or boolean) is fixed by the first document
    that has it; see :mod:`weftsearch.engine.filters`.
    """


class ShardUnavailableError(WeftError, RuntimeError):
    """A sharded search could not reach a shard; the message names it (and its node when known).

    Attributes:
        shards: the names of the shards that did not answer.

    """

    def __init__(self, message: str, shards: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.shards = shards


class ShardedCutError(CorruptIndexError):
    """A sharded index's shards are not at the generations its commit record lists.

    A writer stopped between committing its shards and recording the cut; the
    message names each shard and both generations (docs/SCALING.md).
    """


class PartialGraphError(InvalidParameterError):
    """A scorer read the link graph of a snapshot that holds only part of it (one shard of several)."""


class ServerStartError(WeftError, RuntimeError):
    """A ``weft-search serve`` child stopped, or did not answer ``/health`` in time, at start.

    The message says which, and ends with what the child printed (its last
    lines), so the cause (a locked index, a taken port, a missing extra) is
    never hidden (:mod:`weftsearch.server.launch`).

    Attributes:
        output: what the child printed (stdout and stderr), its last 4,000 characters.
        returncode: its exit status, or ``None`` when it was still running (it was stopped).

    """

    def __init__(self, message: str, output: str = "", returncode: int | None = None) -> None:
        super().__init__(message)
        self.output = output
        self.returncode = returncode


class PlanChangedError(WeftError, ValueError):
    """A trial plan's inputs (queries, judgements, vectors), or the plan itself, changed since it was pinned.

    The message names the file and both SHA-256s; write a new plan
    (``weft-search trial plan``) rather than editing one (:mod:`weftsearch.eval.trial`).
    """


class ReportExistsError(WeftError, FileExistsError):
    """A trial report (or plan) is already at the target path: never overwritten; the message names it."""


class ServerUnreachableError(WeftError, ConnectionError):
    """The server a trial runs against does not answer ``/health`` with 200; the message names the URL."""


class TrialValidationError(WeftError, RuntimeError):
    """A trial's responses broke the plan (:mod:`weftsearch.eval.trial`).

    A query unanswered, another profile or version, a duplicate hit, the index
    generation changed, or another query vector model.

    The report is written all the same (marked ``"valid": false``) so that the violations can be read.

    Attributes:
        violations: one dict per violation: ``kind``, ``method``, ``query``, ``detail``.
        report: the report's path, or ``None`` when none was written.

    """

    def __init__(self, message: str, violations: list[dict[str, object]], report: str | None = None) -> None:
        super().__init__(message)
        self.violations = violations
        self.report = report


class InvalidCursorError(InvalidParameterError):
    """A page cursor (``after=``) that cannot be used; the message says why.

    Not one this index issued, altered, or made for another query or ranking
    (:mod:`weftsearch.engine.pages`).
    """


class CursorExpiredError(InvalidCursorError):
    """A page cursor names a snapshot generation the index no longer keeps: start the pages again.

    An index keeps the snapshots of the last few generations it issued cursors on
    (:data:`weftsearch.engine.pages.CURSOR_GENERATIONS`); a sharded index only its current cut.
    """


class UnknownEmbedderError(WeftError, ValueError):
    """An embedder name that is not registered (see ``weftsearch.register_embedder``).

    An index records the name of the embedder it was created with; reopening it
    in a process where no embedder of that name is registered raises this,
    naming the embedder and how to register it.
    """


class EmbedderMismatchError(WeftError, ValueError):
    """An embedder (or a vector) is not the one the index records: another model or width.

    The message names both: the recorded embedder and the one offered.
    """


class EmbeddingError(WeftError, RuntimeError):
    """An embedder failed on a batch: it raised, or returned rows of the wrong shape, dtype or NaN.

    The whole batch is refused (nothing of it is added); the message names the
    embedder, the documents of the batch and the reason.
    """
