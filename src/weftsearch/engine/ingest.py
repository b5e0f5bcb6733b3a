"""Analysis of a batch of documents for the index, in this process or across forked workers.

``Index.add_many`` hands its batch here: every document's text is analysed
(terms counted, length taken) and its stored record made, which is nearly all
of the CPU an ingest costs before the commit. Both are pure functions of the
document (an analyzer's contract: the same name gives the same terms for
every text), so the batch can be cut into contiguous chunks analysed in
parallel.

Parallel analysis forks workers (POSIX): each inherits the analyzer and the
documents copy-on-write, so nothing is pickled on the way in and an analyzer
that cannot be pickled works as well as one that can. This process analyses
the first chunk itself while worker ``i`` analyses chunk ``i`` and sends back
its terms, lengths and records (pickled over a pipe). Determinism: the
results are put back in input order, chunk after chunk, so the index built is
byte-identical whatever the number of workers; an analyzer error is reported
for the first failing document in input order, with the same type
(:class:`~weftsearch.errors.AnalysisError`) and message as in one process. A
worker that dies or cannot send its results costs time, never a term: its
chunk is analysed again here.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import os
import pickle
import signal
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace

from weftsearch.analysis import Analyzer, EnglishAnalyzer, SimpleAnalyzer, WhitespaceAnalyzer, get_analyzer
from weftsearch.documents import Document
from weftsearch.engine import children
from weftsearch.errors import AnalysisError, InvalidParameterError
from weftsearch.schema import Schema
from weftsearch.storage.segment_writer import SegmentDocument, stored_record

__all__ = [
    "FieldAnalysis",
    "PARALLEL_MIN_DOCUMENTS",
    "analyse_documents",
    "collection_paused",
    "idle_cpus",
    "resolve_schema",
    "resolve_workers",
    "usable_cpus",
]

#: With ``workers=None``, batches of at least this many documents may be
#: analysed by several processes (see :func:`resolve_workers`); smaller ones in
#: this process (a fork and the pickled results cost more than they save below it).
PARALLEL_MIN_DOCUMENTS = 2000

#: Analyzers whose code takes no lock, so a worker forked while other threads
#: run cannot wait forever on one (see :func:`resolve_workers`).
_LOCK_FREE_ANALYZERS = (EnglishAnalyzer, SimpleAnalyzer, WhitespaceAnalyzer)

#: One analysed document as a worker sends it: term counts, length, stored record, and the
#: named text fields' term counts and lengths.
_Analysed = tuple[
    Mapping[str, int], int, bytes, dict[str, tuple[Mapping[str, int], int]], dict[str, dict[str, list[int]]]
]


# Who paused the cyclic collector (collection_paused): nested and concurrent pauses share
# one count, and the collector comes back only if it ran before the first of them.
_pause_lock = threading.Lock()
_pausers = 0
_resume = False


@contextlib.contextmanager
def collection_paused() -> Iterator[None]:
    """Run the body with Python's automatic cyclic garbage collection off (as it was after).

    A batch of documents allocates millions of container objects (documents,
    their analysed records) that all live until the commit: each automatic
    full collection walks every one of them, and there are several in a large
    batch (about a tenth of the CPU of a 1M-document ``add_many``, measured).
    Nothing in the body makes reference cycles it needs collected, so the
    collector waits for its end. Nested and concurrent uses share the pause:
    the collector is enabled again when the last one ends, and only if it was
    enabled when the first one began (a caller that disabled it keeps it
    disabled). A caller that flips it from another thread meanwhile may find
    it enabled after.
    """
    global _pausers, _resume
    with _pause_lock:
        if _pausers == 0:
            _resume = gc.isenabled()
            gc.disable()
        _pausers += 1
    try:
        yield
    finally:
        with _pause_lock:
            _pausers -= 1
            if _pausers == 0 and _resume:
                _resume = False
                gc.enable()


@dataclass(frozen=True, slots=True)
class FieldAnalysis:
    """How a batch's named text fields are analysed and stored (the index's schema, resolved).

    Attributes:
        analyzers: named field -> the analyzer of its terms (schema order).
        unstored: named fields whose text the stored record leaves out.
        positions: fields (``"text"`` included) whose terms' positions are kept.

    """

    analyzers: Mapping[str, Analyzer] = field(default_factory=dict)
    unstored: frozenset[str] = frozenset()
    #: Fields (``"text"`` included) whose terms' positions are kept.
    positions: frozenset[str] = frozenset()


_NO_FIELDS = FieldAnalysis()


def resolve_schema(
    schema: Schema | None, analyzer: Analyzer, store_text: bool
) -> tuple[Schema, FieldAnalysis]:
    """An index's schema (the default one when ``None``) and its named fields' analysis.

    ``analyzer`` and ``store_text`` are the index's: the schema's ``"text"``
    field must say the same (they are one field, ``Document.text``).

    Raises:
        InvalidParameterError: not a :class:`~weftsearch.schema.Schema`, or its
            ``"text"`` field disagrees with ``analyzer`` or ``store_text``.
        UnknownAnalyzerError: a field names an analyzer not registered.

    """
    if schema is None:
        return Schema.default(analyzer.name, store_text), FieldAnalysis()
    if not isinstance(schema, Schema):
        raise InvalidParameterError(f"schema must be a weftsearch.Schema, got {schema!r}")
    default = schema.default_field
    if default.analyzer != analyzer.name:
        raise InvalidParameterError(
            f"the schema's 'text' field is analysed by {default.analyzer!r} but the index's analyzer is "
            f"{analyzer.name!r}; they are the same field (Document.text)"
        )
    if default.stored != store_text:
        raise InvalidParameterError(
            f"the schema's 'text' field has stored={default.stored} but store_text={store_text}; "
            "they say the same thing"
        )
    analyzers = {field.name: get_analyzer(field.analyzer) for field in schema.named_fields}
    unstored = frozenset(field.name for field in schema.named_fields if not field.stored)
    positions = frozenset(field.name for field in schema.fields if field.positions)
    return schema, FieldAnalysis(analyzers, unstored, positions)


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one). At least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def idle_cpus() -> int:
    """CPUs free for more work: :func:`usable_cpus` less the 1-minute load average, rounded down.

    The load average counts this process's own running thread, so one
    process working alone on a 2-CPU machine sees 1 idle CPU. Where the OS
    has no load average, every usable CPU but one.
    """
    cpus = usable_cpus()
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return cpus - 1
    return max(0, int(cpus - load))


def resolve_workers(workers: int | None, documents: int, analyzer: Analyzer) -> int:
    """How many processes analyse a batch of ``documents`` for ``add_many(..., workers=workers)``.

    ``None`` (the default) picks, for a batch of at least
    :data:`PARALLEL_MIN_DOCUMENTS` documents, this process plus one worker
    per idle CPU (:func:`idle_cpus`), at most :func:`usable_cpus` in all; for
    a smaller batch, 1. A worker costs CPU (its results are pickled back, its
    word memo starts cold: about 25% more CPU in all on SciFact), so it pays
    only where a CPU would otherwise idle: on a machine already busy, one
    process is faster. Also 1 when other threads are running and the
    analyzer is not a built-in one (a worker is forked, and a fork copies
    locks other threads may hold: a custom analyzer that takes one could wait
    forever). An explicit count is used as given, capped at the number of
    documents. Without ``os.fork`` (Windows) it is always 1. The count never
    changes the index, only how fast it is built.

    Raises:
        InvalidParameterError: ``workers`` is not ``None`` or a positive int.

    """
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise InvalidParameterError(f"workers must be None or a positive integer, got {workers!r}")
    if not hasattr(os, "fork") or documents < 2:
        return 1
    if workers is None:
        if documents < PARALLEL_MIN_DOCUMENTS:
            return 1
        if threading.active_count() > 1 and type(analyzer) not in _LOCK_FREE_ANALYZERS:
            return 1
        workers = max(1, min(usable_cpus(), 1 + idle_cpus()))
    return min(workers, documents)


def _analysis_error(
    analyzer: Analyzer, document: Document, exc: Exception, field: str = "text"
) -> AnalysisError:
    where = "" if field == "text" else f" text field {field!r}:"
    return AnalysisError(
        f"document {document.key!r}:{where} analyzer {analyzer.name!r} raised {type(exc).__name__}: {exc}"
    )


#: How one text's terms are counted: ``text -> (term -> frequency, number of terms)``.
_Counter = Callable[[str], tuple[Mapping[str, int], int]]


def _built_in(analyzer: Analyzer) -> EnglishAnalyzer | WhitespaceAnalyzer | None:
    """``analyzer`` if its ``term_counts`` and ``term_positions`` give what its ``analyze`` does.

    A built-in analyzer with a compiled pass, not a subclass that overrides ``analyze``.
    """
    for kind in (EnglishAnalyzer, WhitespaceAnalyzer):
        if isinstance(analyzer, kind) and type(analyzer).analyze is kind.analyze:
            return analyzer
    return None


def _term_counter(analyzer: Analyzer) -> _Counter:
    """How ``analyzer``'s terms of a text are counted.

    ``EnglishAnalyzer.term_counts`` or ``WhitespaceAnalyzer.term_counts`` (one
    compiled pass) where that counts what ``analyze`` gives (not for a subclass
    that overrides ``analyze``), else ``Counter(analyzer.analyze(text))``.
    """
    built_in = _built_in(analyzer)
    if built_in is not None:
        return built_in.term_counts

    def count(text: str) -> tuple[Mapping[str, int], int]:
        terms = analyzer.analyze(text)
        return Counter(terms), len(terms)

    return count


#: How one text's terms are listed with positions: ``text -> (counts, length, term -> positions)``.
_Positioner = Callable[[str], tuple[dict[str, int], int, dict[str, list[int]]]]


def _positioner(analyzer: Analyzer) -> _Positioner:
    """How ``analyzer``'s terms of a text get their positions (indexes in ``analyze``'s output).

    ``EnglishAnalyzer.term_positions`` or ``WhitespaceAnalyzer.term_positions``
    (one compiled pass) where that lists what ``analyze`` gives (not for a
    subclass that overrides ``analyze``), else a Python step per term of
    ``analyze``'s output. The counts equal ``Counter(analyzer.analyze(text))``
    (the same first-seen order).
    """
    built_in = _built_in(analyzer)
    if built_in is not None:
        positions_of = built_in.term_positions

        def compiled(text: str) -> tuple[dict[str, int], int, dict[str, list[int]]]:
            positions, length = positions_of(text)
            return {term: len(where) for term, where in positions.items()}, length, positions

        return compiled

    def each(text: str) -> tuple[dict[str, int], int, dict[str, list[int]]]:
        terms = analyzer.analyze(text)
        positions: dict[str, list[int]] = {}
        for index, term in enumerate(terms):
            found = positions.get(term)
            if found is None:
                positions[term] = [index]
            else:
                found.append(index)
        return {term: len(where) for term, where in positions.items()}, len(terms), positions

    return each


def _analyse_chunk(
    analyzer: Analyzer, documents: Sequence[Document], tick: Callable[[], object], fields: FieldAnalysis
) -> list[_Analysed]:
    """Terms counted, length and stored record of each document, in order, calling ``tick`` after each.

    Each named text field a document has is analysed by its own analyzer
    (``fields``); the stored record leaves out the unstored ones.

    Raises:
        AnalysisError: an analyzer raised on a document (the first one is named).

    """
    count = _term_counter(analyzer)
    position = _positioner(analyzer)
    keep_positions = fields.positions
    counters = {
        name: (field_analyzer, _term_counter(field_analyzer), _positioner(field_analyzer))
        for name, field_analyzer in fields.analyzers.items()
    }
    unstored = fields.unstored
    analysed: list[_Analysed] = []
    for document in documents:
        positions: dict[str, dict[str, list[int]]] = {}
        terms: Mapping[str, int]
        try:
            if "text" in keep_positions:
                terms, length, positions["text"] = position(document.text)
            else:
                terms, length = count(document.text)
        except Exception as exc:  # any failure of user code: reported naming the document
            raise _analysis_error(analyzer, document, exc) from exc
        field_terms: dict[str, tuple[Mapping[str, int], int]] = {}
        for name, text in document.text_fields.items():
            field_analyzer, field_count, field_position = counters[name]
            try:
                if name in keep_positions:
                    field_counts, field_length, positions[name] = field_position(text)
                    field_terms[name] = (field_counts, field_length)
                else:
                    field_terms[name] = field_count(text)
            except Exception as exc:  # as above, naming the field too
                raise _analysis_error(field_analyzer, document, exc, name) from exc
        stored = document
        if unstored and not unstored.isdisjoint(document.text_fields):
            kept = {name: text for name, text in document.text_fields.items() if name not in unstored}
            stored = replace(document, text_fields=kept)
        analysed.append((terms, length, stored_record(stored), field_terms, positions))
        tick()
    return analysed


def _worker(
    analyzer: Analyzer,
    documents: Sequence[Document],
    write_fd: int,
    close_fds: Sequence[int],
    die_with_parent: Callable[[], None],
    fields: FieldAnalysis,
) -> None:  # pragma: no cover - runs in a forked child
    """The body of a forked worker: analyse ``documents``, pickle the outcome to ``write_fd``, exit.

    It imports nothing (an import could wait on a lock another thread held at the fork).
    """
    code = 1
    try:
        for fd in close_fds:  # e.g. the writer lock: a worker outliving us must not hold it
            with contextlib.suppress(OSError):
                os.close(fd)
        die_with_parent()
        # A collection would walk (and so copy) the parent's whole heap.
        gc.disable()
        outcome: tuple[str, object]
        try:
            outcome = ("ok", _analyse_chunk(analyzer, documents, _no_tick, fields))
        except AnalysisError as exc:
            outcome = ("error", str(exc))
        with os.fdopen(write_fd, "wb") as pipe:
            pickle.dump(outcome, pipe, protocol=pickle.HIGHEST_PROTOCOL)
        code = 0
    finally:
        os._exit(code)


def _no_tick() -> None:
    return None


def _chunks(n: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` contiguous ``(start, end)`` ranges covering ``0 .. n``, sizes differing by at most one."""
    base, extra = divmod(n, parts)
    bounds = [0]
    for part in range(parts):
        bounds.append(bounds[-1] + base + (1 if part < extra else 0))
    return list(itertools.pairwise(bounds))


def _receive(pid: int, read_fd: int) -> tuple[str, object] | None:
    """The outcome worker ``pid`` sent, or ``None`` if it sent none (it died); reaps the worker."""
    outcome: tuple[str, object] | None = None
    try:
        with os.fdopen(read_fd, "rb") as pipe:
            received = pickle.load(pipe)
        if isinstance(received, tuple) and len(received) == 2 and received[0] in ("ok", "error"):
            outcome = received
    except (EOFError, OSError, pickle.UnpicklingError, ValueError, TypeError, AttributeError):
        outcome = None
    finally:
        _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        return None
    return outcome


def analyse_documents(
    analyzer: Analyzer,
    documents: Sequence[Document],
    workers: int,
    *,
    tick: Callable[[int], object] | None = None,
    close_fds: Sequence[int] = (),
    fields: FieldAnalysis = _NO_FIELDS,
) -> list[SegmentDocument]:
    """Analyse ``documents`` (terms counted, length, stored record) in input order.

    Args:
        analyzer: analyses each document's text.
        documents: the batch.
        workers: processes to use (see :func:`resolve_workers`); 1 analyses
            here, in this thread.
        tick: called with a number of documents done, for a progress bar.
        close_fds: descriptors a worker closes first (the writer lock's).
        fields: the named text fields' analyzers and which are not stored
            (every name a document's ``text_fields`` uses must be there: the
            index checked it).

    Returns:
        One :class:`SegmentDocument` per document, in input order, the same
        whatever ``workers`` is.

    Raises:
        AnalysisError: the analyzer raised on a document; the first such
            document in input order is named.

    Complexity: O(total text length), divided among the workers.

    """
    count: Callable[[int], object] = tick or (lambda done: None)
    if workers <= 1 or len(documents) < 2 or not hasattr(os, "fork"):
        analysed = _analyse_chunk(analyzer, documents, lambda: count(1), fields)
    else:
        analysed = _analyse_in_workers(analyzer, documents, workers, count, close_fds, fields)
    return [
        SegmentDocument(document, terms, length, record, field_terms, positions)
        for document, (terms, length, record, field_terms, positions) in zip(documents, analysed, strict=True)
    ]


def _analyse_in_workers(
    analyzer: Analyzer,
    documents: Sequence[Document],
    workers: int,
    count: Callable[[int], object],
    close_fds: Sequence[int],
    fields: FieldAnalysis,
) -> list[_Analysed]:
    """Chunk 0 here, chunk ``i`` in forked worker ``i``; results gathered in chunk order."""
    children.libc_prctl()  # looked up before forking (see its docstring)
    chunks = _chunks(len(documents), workers)
    parent = os.getpid()

    def die_with_parent() -> None:  # pragma: no cover - runs in a forked child
        children.die_with_parent(parent)

    started: list[tuple[int, int] | None] = [None]  # (pid, read end) per chunk; chunk 0 is ours
    try:
        for start, end in chunks[1:]:
            read_fd, write_fd = os.pipe()
            try:
                pid = os.fork()
            except OSError:  # no process to spare: this chunk is analysed here
                os.close(read_fd)
                os.close(write_fd)
                started.append(None)
                continue
            if pid == 0:  # pragma: no cover - the child
                os.close(read_fd)
                _worker(analyzer, documents[start:end], write_fd, close_fds, die_with_parent, fields)
            os.close(write_fd)
            started.append((pid, read_fd))
        results: list[_Analysed] = []
        for position, (start, end) in enumerate(chunks):
            worker = started[position]
            started[position] = None  # received (or about to be analysed here): not cleaned up below
            outcome = None if worker is None else _receive(*worker)
            if outcome is None:  # ours, or a worker that died: analysed here
                results.extend(_analyse_chunk(analyzer, documents[start:end], lambda: count(1), fields))
                continue
            kind, payload = outcome
            if kind == "error":
                raise AnalysisError(str(payload))
            assert isinstance(payload, list)
            if len(payload) != end - start:  # cannot happen; never trust it silently
                results.extend(_analyse_chunk(analyzer, documents[start:end], lambda: count(1), fields))
                continue
            results.extend(payload)
            count(end - start)
        return results
    finally:
        # On an error (ours or a worker's) the remaining workers are stopped and reaped.
        for worker in started:
            if worker is not None:
                pid, read_fd = worker
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                with contextlib.suppress(OSError):
                    os.close(read_fd)
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, 0)
