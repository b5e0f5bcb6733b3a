"""``weft-search index``, ``add``, ``delete``, ``stats``, ``scrub``, ``merge`` and ``demo``.

Writes from the shell: ``add CORPUS --index DIR`` upserts documents,
``delete KEY... --index DIR`` deletes them, ``stats DIR`` shows what an index
holds. Each write is one atomic commit; a bad corpus line changes nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from weftsearch._argtypes import positive_int
from weftsearch.analysis import analyzer_names
from weftsearch.cli._common import _SHOWN, EXIT_PROBLEM, PROG, _count, _json_dump, _open_readonly
from weftsearch.cli.search import format_results
from weftsearch.corpus import CORPUS_FORMATS, FrozenVectors, load_documents, load_vectors
from weftsearch.demo import run_demo
from weftsearch.distributed.sharded import is_sharded, scrub_sharded
from weftsearch.documents import Document
from weftsearch.embedders import MINILM
from weftsearch.engine.index import Index
from weftsearch.engine.search import SearchResults
from weftsearch.engine.stats import IndexStats
from weftsearch.errors import (
    CorpusFormatError,
    DiscardedWritesWarning,
    IndexExistsError,
    InvalidParameterError,
)
from weftsearch.schema import Schema, TextField
from weftsearch.storage import scrub_directory
from weftsearch.storage.directory import MANIFEST, IndexDirectory

__all__ = ["add_index_commands", "format_stats"]


def _read_corpus(
    args: argparse.Namespace, text_fields: Sequence[str] = ()
) -> tuple[list[Document], FrozenVectors | None]:
    """The documents of ``args.corpus`` with their ``--vectors`` (read and checked whole).

    ``text_fields``: the record keys read as named text fields (the index's schema).
    """
    vectors = None
    if args.vectors is not None:
        vectors = load_vectors(args.vectors, args.vector_ids)
    elif args.vector_ids is not None:
        raise InvalidParameterError("--vector-ids needs --vectors")
    return load_documents(args.corpus, args.format, vectors=vectors, text_fields=text_fields), vectors


def _named_fields_of(path: Path) -> tuple[str, ...]:
    """The named text fields of the index at ``path``, from its manifest (no lock, nothing opened else).

    Raises:
        IndexNotFoundError: no index there (as opening it would).

    """
    directory = IndexDirectory(path)
    directory.check_exists()
    recorded = directory.read_manifest().extra.get("schema")
    schema = Schema.from_dict(recorded) if recorded is not None else None
    return () if schema is None else tuple(field.name for field in schema.named_fields)


def _schema_of(args: argparse.Namespace) -> Schema | None:
    """The schema ``--schema FILE`` or ``--text-field NAME ...`` ask for; ``None`` for neither.

    Raises:
        InvalidParameterError: both given, an unreadable or invalid schema file, a bad name.

    """
    if args.schema is not None and args.text_field:
        raise InvalidParameterError("give --schema or --text-field, not both")
    if args.schema is not None:
        try:
            data = json.loads(Path(args.schema).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InvalidParameterError(f"--schema {args.schema}: cannot read it as JSON ({exc})") from None
        try:
            schema = Schema.from_dict(data)
        except InvalidParameterError as exc:
            raise InvalidParameterError(f"--schema {args.schema}: {exc}") from None
    elif args.text_field:
        if "text" in args.text_field:
            raise InvalidParameterError("--text-field text: 'text' is the default field, always indexed")
        fields = [TextField(name, analyzer=args.analyzer) for name in args.text_field]
        schema = Schema((TextField("text", analyzer=args.analyzer, stored=not args.no_store_text), *fields))
    else:
        return None
    return schema


def _cmd_index(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    schema = _schema_of(args)
    named = () if schema is None else tuple(field.name for field in schema.named_fields)
    documents, vectors = _read_corpus(args, named)
    if not documents:
        # As `add` does: an index of nothing is almost always a wrong path or an unfinished
        # file, and nothing is created (an existing index at DIR is left as it is).
        raise InvalidParameterError(
            f"{args.corpus} holds no documents; nothing was indexed, no index created"
        )
    # With --overwrite the old index keeps serving until the commit below
    # replaces it in one rename (Index.create); any error before that leaves
    # it unchanged (the with block discards the new documents).
    try:
        # No search runs in this process: the commit's encoder child need not yield the
        # CPU (at "idle" it would wait behind every other process on a busy machine).
        index = Index.create(
            args.index,
            args.analyzer,
            vector_dim=None if vectors is None else vectors.dim,
            overwrite=args.overwrite,
            commit_priority="normal",
            store_text=not args.no_store_text,
            embedder=args.embed,
            schema=schema,
        )
    except IndexExistsError:  # the library's message names the keyword; here the flag is the way
        raise IndexExistsError(f"{args.index} is not empty; pass --overwrite to replace it") from None
    with warnings.catch_warnings(), index:
        warnings.simplefilter("ignore", DiscardedWritesWarning)  # the error itself is reported
        index.add_many(documents, workers=args.workers)
        index.commit()
        count = len(index)
    with_vectors = _with_vectors(documents, index)
    dim = "" if index.vector_dim is None else f", dim {index.vector_dim}"
    if index.embedder is not None:
        dim += f", embedder {index.embedder.name}"
    elapsed = time.perf_counter() - started
    print(
        f"indexed {count} documents ({with_vectors} with vectors{dim}) into {args.index} in {elapsed:.2f} s"
    )
    return 0


def _with_vectors(documents: Sequence[Document], index: Index) -> int:
    """How many of ``documents`` have a vector in ``index``: their own, or one its embedder made."""
    embeds = index.embedder is not None
    return sum(1 for d in documents if d.vector is not None or (embeds and d.text.strip()))


def _cmd_demo(args: argparse.Namespace) -> int:
    def render(results: SearchResults, index: Index) -> str:
        return format_results(results, index, explain=True)

    run_demo(sys.stdout, render, k=args.k)
    return 0


def _cmd_scrub(args: argparse.Namespace) -> int:
    # The storage-level scrub: no Index, no lock, so an index that cannot be opened is scrubbed too.
    path = Path(args.index)
    sharded = is_sharded(path) and not (path / MANIFEST).exists()
    report = scrub_sharded(path) if sharded else scrub_directory(path)
    for problem in report.problems:
        print(problem)
    verdict = "ok" if report.ok else f"{len(report.problems)} problem(s)"
    print(f"scrubbed {report.files} files, {report.bytes} bytes of {args.index}: {verdict}", file=sys.stderr)
    return 0 if report.ok else 1


def _cmd_merge(args: argparse.Namespace) -> int:
    with Index.open(args.index) as index:
        before = index.segment_count
        merged = index.merge(force=args.all)
        print(f"merged {merged} segments of {args.index}: {before} -> {index.segment_count} segments")
    return 0


def _cmd_add(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    # Every line is read and checked before the index is opened: a bad line changes nothing.
    documents, _ = _read_corpus(args, _named_fields_of(Path(args.index)))
    if not documents:
        raise InvalidParameterError(f"{args.corpus} holds no documents; nothing to add")
    with Index.open(args.index, commit_priority="normal") as index:  # no search here (see index)
        before = len(index)
        replaced = sum(1 for document in documents if document.key in index)
        # add_many checks the whole batch (vector widths) before applying any of it.
        index.add_many(documents, workers=args.workers)
        generation = index.commit()
        total = len(index)
    with_vectors = _with_vectors(documents, index)
    elapsed = time.perf_counter() - started
    print(
        f"added {len(documents) - replaced} new and replaced {replaced} documents "
        f"({with_vectors} with vectors) from {args.corpus} into {args.index}: "
        f"{before} -> {total} documents, generation {generation}, in {elapsed:.2f} s"
    )
    return 0


def _read_keys_file(path: str) -> list[str]:
    """Keys of a ``--keys`` file: one a line (line ends stripped, blank lines skipped).

    Raises:
        CorpusFormatError: the file is not UTF-8 (the message names file and line).

    """
    keys = []
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise CorpusFormatError(f"{path}:{number}: not UTF-8 ({exc.reason})") from None
            key = line.rstrip("\r\n")
            if key.strip():
                keys.append(key)
    return keys


def _quoted(keys: Sequence[str]) -> str:
    shown = ", ".join(repr(key) for key in keys[:_SHOWN])
    return shown + (f" and {len(keys) - _SHOWN} more" if len(keys) > _SHOWN else "")


def _cmd_delete(args: argparse.Namespace) -> int:
    keys = list(args.keys)
    if args.keys_file is not None:
        keys += _read_keys_file(args.keys_file)
    if not keys:
        raise InvalidParameterError("name the keys to delete (KEY... or --keys FILE)")
    wanted = list(dict.fromkeys(keys))
    with Index.open(args.index) as index:
        missing = [key for key in wanted if key not in index]
        removed = index.delete_many(wanted)
        generation = index.commit() if removed else index.generation
        total = len(index)
    print(
        f"deleted {removed} of {len(wanted)} keys from {args.index}: {total} documents left, "
        f"generation {generation}"
    )
    if missing:
        level = "note" if args.missing_ok else "error"
        print(
            f"{PROG}: {level}: {len(missing)} of {len(wanted)} keys are not in {args.index}: "
            f"{_quoted(missing)}",
            file=sys.stderr,
        )
        return 0 if args.missing_ok else EXIT_PROBLEM
    return 0


def _size(count: int) -> str:
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{count} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def format_stats(stats: IndexStats) -> str:
    """A readable summary of ``stats`` and a table with one row per segment."""
    vectors = "none" if stats.vector_dim is None else f"dim {stats.vector_dim}, {stats.vector_dtype}"
    segments = f"{len(stats.segments)}"
    if stats.live_segments != len(stats.segments):
        segments += f" ({stats.live_segments} with live documents)"
    lines = [
        f"index:      {stats.path if stats.path is not None else '(in memory)'}",
        f"documents:  {stats.documents} ({stats.deleted} deleted, awaiting merge)",
        f"segments:   {segments}",
        f"generation: {stats.generation}",
        f"analyzer:   {stats.analyzer}",
        f"vectors:    {vectors}",
        f"on disk:    {_size(stats.bytes_on_disk)} ({stats.bytes_on_disk} bytes)",
    ]
    if stats.segments:
        width = max(7, *(len(segment.name or "(memory)") for segment in stats.segments))
        lines.append("")
        lines.append(f"{'segment':<{width}}  {'documents':>9}  {'deleted':>7}  {'bytes':>12}")
        for segment in stats.segments:
            lines.append(
                f"{segment.name or '(memory)':<{width}}  {segment.documents:>9}  {segment.deleted:>7}  "
                f"{segment.bytes:>12}"
            )
    return "\n".join(lines) + "\n"


def _cmd_stats(args: argparse.Namespace) -> int:
    with _open_readonly(args.index) as index:
        stats = index.stats()
    if args.json:
        print(_json_dump(stats.to_dict()))
    else:
        sys.stdout.write(format_stats(stats))
    return 0


def _add_corpus_options(command: argparse.ArgumentParser) -> None:
    """The options ``index`` and ``add`` share: how the corpus is read and analysed."""
    command.add_argument("--format", choices=CORPUS_FORMATS, default="auto", help="corpus layout (auto)")
    command.add_argument("--vectors", metavar="FILE.npy", help="frozen document vectors, one row per id")
    command.add_argument(
        "--vector-ids", metavar="FILE", help="row ids of --vectors, one a line (default: <stem>_ids.txt)"
    )
    command.add_argument(
        "--workers",
        type=positive_int,
        default=None,
        metavar="N",
        help="processes that analyse the documents (default: from 2,000 documents, one more per "
        "idle CPU; the index is the same whatever the count)",
    )


def add_index_commands(commands: Any) -> None:
    """Add ``index``, ``demo``, ``scrub``, ``merge``, ``add``, ``delete`` and ``stats``."""
    index = commands.add_parser(
        "index",
        help="index a corpus into a directory",
        description="Index a corpus into DIR. Exit status: 0 when indexed, 2 on a user error, "
        "including a corpus that holds no documents (nothing is created then).",
    )
    index.add_argument("corpus", metavar="CORPUS", help="a .jsonl file, or a BEIR folder")
    index.add_argument("--index", required=True, metavar="DIR", help="index directory to create")
    _add_corpus_options(index)
    index.add_argument("--analyzer", choices=analyzer_names(), default="english", help="analyzer (english)")
    index.add_argument("--overwrite", action="store_true", help="replace an existing index at DIR")
    index.add_argument(
        "--no-store-text",
        action="store_true",
        help="index the text but do not store it (smaller index; hits show no text; docs/FORMAT.md)",
    )
    index.add_argument(
        "--embed",
        nargs="?",
        const=MINILM,
        default=None,
        metavar="NAME",
        help=f"embed each document without a vector from its text with the embedder NAME ({MINILM}, "
        "the offline MiniLM int8 model of the embed extra, when NAME is left out), and record it in "
        "the index so searches embed query text too",
    )
    index.add_argument(
        "--text-field",
        action="append",
        default=[],
        metavar="NAME",
        help="index the record's key NAME as a named text field (repeatable; e.g. --text-field title: "
        "the title is then its own field, not joined to the text); analysed by --analyzer",
    )
    index.add_argument(
        "--schema",
        metavar="FILE",
        help='the text fields as JSON: {"fields": [{"name": "title", "analyzer": "english", "weight": 2.0}]} '
        "(keys as weftsearch.schema.TextField); instead of --text-field",
    )
    index.set_defaults(handler=_cmd_index)

    demo = commands.add_parser(
        "demo",
        help="index the bundled demo corpus and run explained hybrid queries",
        description="Index the bundled demo corpus in a temporary directory and run a few hybrid queries.",
    )
    demo.add_argument("-k", type=_count, default=5, help="hits per query (5)")
    demo.set_defaults(handler=_cmd_demo)

    scrub = commands.add_parser(
        "scrub",
        help="verify every byte of an index and name what is damaged",
        description="Read every committed file of DIR, check every checksum and structure rule, and "
        "list what is damaged (every damaged file, even when the index cannot be opened). "
        "Exit status 0 when clean, 1 when damage was found, 2 when DIR is not an index.",
    )
    scrub.add_argument("index", metavar="DIR", help="index directory")
    scrub.set_defaults(handler=_cmd_scrub)

    merge = commands.add_parser(
        "merge",
        help="merge segments by the size-tiered policy (or all of them)",
        description="Merge the segments of DIR as the size-tiered policy says, and commit.",
    )
    merge.add_argument("index", metavar="DIR", help="index directory")
    merge.add_argument("--all", action="store_true", help="merge every segment into one")
    merge.set_defaults(handler=_cmd_merge)

    add = commands.add_parser(
        "add",
        help="add or replace (upsert) the documents of a corpus in an index",
        description="Add the documents of CORPUS to the index at DIR, replacing documents with the "
        "same key, in one atomic commit. The corpus is read as `index` reads it (same keys); every "
        "line is checked first, so a bad line changes nothing.",
    )
    add.add_argument("corpus", metavar="CORPUS", help="a .jsonl file, or a BEIR folder")
    add.add_argument("--index", required=True, metavar="DIR", help="index directory (must exist)")
    _add_corpus_options(add)
    add.set_defaults(handler=_cmd_add)

    delete = commands.add_parser(
        "delete",
        help="delete documents by key",
        description="Delete the documents with these keys from the index at DIR in one atomic commit. "
        "Exit status: 0 when every key was there, 1 when some were not (the others are deleted; "
        "--missing-ok makes this 0), 2 on a user error.",
    )
    delete.add_argument("keys", metavar="KEY", nargs="*", help="keys of the documents to delete")
    delete.add_argument("--index", required=True, metavar="DIR", help="index directory")
    delete.add_argument("--keys", dest="keys_file", metavar="FILE", help="more keys, one a line")
    delete.add_argument("--missing-ok", action="store_true", help="exit 0 when some keys are not there")
    delete.set_defaults(handler=_cmd_delete)

    stats = commands.add_parser(
        "stats",
        help="show what an index holds: documents, segments, vectors, size",
        description="Show the documents, segments, generation, vector width and dtype, analyzer, "
        "size on disk and a per-segment table of the index at DIR.",
    )
    stats.add_argument("index", metavar="DIR", help="index directory")
    stats.add_argument("--json", action="store_true", help="print one JSON object")
    stats.set_defaults(handler=_cmd_stats)
