r"""The ``weft-search`` command line: every subcommand's argument parsing, in one package.

One module per command group; each adds its subcommands to the parser and
calls the library (which imports no command module):

- :mod:`weftsearch.cli.index`: ``index``, ``add``, ``delete``, ``stats``,
  ``scrub``, ``merge``, ``demo``;
- :mod:`weftsearch.cli.search`: ``search`` (``--rank SPEC``, ``--profile NAME``,
  or the sugar flags ``--signals``/``--fusion``/``--weights`` that compile to a spec);
- :mod:`weftsearch.cli.eval`: ``eval`` and ``datasets``;
- :mod:`weftsearch.cli.embed`: ``embed``;
- :mod:`weftsearch.cli.serve`: ``serve``;
- :mod:`weftsearch.cli.trial`: ``trial plan`` and ``trial run`` (profiles compared through a server);
- ``bench`` and ``recall``: the parsers of :mod:`weftsearch.bench.loadgen` and
  :mod:`weftsearch.bench.recall`, added here and nowhere else.

Examples::

    weft-search index corpus.jsonl --index idx
    weft-search search "rank fusion" --index idx -k 5 --rank 'rrf(bm25, graph)' --explain
    weft-search demo

Exit status: 0 on success; 1 when the command ran but found a problem it
reports (``search --qrels`` with judged queries that match no query, unless
``--allow-unmatched``; ``delete`` with keys that are not in the index, unless
``--missing-ok``; ``scrub`` finding damage); 2 on a user error (a bad file,
an unknown signal, a missing index, ...), printed as one line,
``weft-search: error: <message>``, on stderr; 130 when interrupted.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import warnings
from collections.abc import Callable
from contextlib import suppress
from typing import TextIO

from weftsearch import __version__
from weftsearch.cli._common import EXIT_PROBLEM, PROG, _CommandParser, _error, _os_message
from weftsearch.cli.embed import add_embed_command
from weftsearch.cli.eval import add_eval_commands
from weftsearch.cli.index import add_index_commands, format_stats
from weftsearch.cli.search import (
    SIGNALS,
    JudgedMatch,
    add_search_command,
    format_results,
    match_judged,
    parse_signals,
)
from weftsearch.cli.serve import add_serve_command
from weftsearch.cli.trial import add_trial_command
from weftsearch.errors import QuerySyntaxError, WeftError

__all__ = [
    "EXIT_PROBLEM",
    "SIGNALS",
    "JudgedMatch",
    "build_parser",
    "format_results",
    "format_stats",
    "main",
    "match_judged",
    "parse_signals",
]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``weft-search`` (exposed for documentation and tests)."""
    parser: argparse.ArgumentParser = _CommandParser(
        prog=PROG,
        description="Hybrid retrieval: BM25, vectors, link graphs and recency, fused.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_index_commands(commands)
    add_search_command(commands)
    add_eval_commands(commands)
    add_embed_command(commands)
    # The benchmarks are imported when the parser is built, not with this package.
    from weftsearch.bench.recall import add_subcommand as add_recall_command

    add_recall_command(commands)
    add_serve_command(commands)
    add_trial_command(commands)
    from weftsearch.bench.loadgen import add_subcommand as add_bench_command

    add_bench_command(commands)
    return parser


def _show_warning(
    shown: Callable[..., None],
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """A weft-search warning (e.g. texts an embedder truncated) as one ``weft-search: warning:`` line."""
    if issubclass(category, WeftError):
        print(f"{PROG}: warning: {message}", file=sys.stderr if file is None else file)
        return
    shown(message, category, filename, lineno, file, line)


def main(argv: list[str] | None = None) -> int:
    """Run ``weft-search`` with ``argv`` (default ``sys.argv[1:]``); return the exit status.

    0 on success, 1 when a command ran but found a problem it reported
    (:data:`EXIT_PROBLEM`; see the module docstring), 2 on a usage or user
    error (printed as one line on stderr), 130 when interrupted.
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits on --help, --version and usage errors
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # reports record the command
    try:
        with warnings.catch_warnings():  # restores showwarning after the command
            shown = warnings.showwarning
            warnings.showwarning = functools.partial(_show_warning, shown)
            return int(args.handler(args))
    except BrokenPipeError:
        # The reader went away (e.g. `| head`); silence the flush at exit.
        with suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115
        return 1
    except QuerySyntaxError as exc:  # its caret line shows where: printed as it is, not folded
        message = str(exc).splitlines()
        code = _error(message[0])
        print("\n".join(message[1:]), file=sys.stderr)
        return code
    except WeftError as exc:
        return _error(str(exc))
    except OSError as exc:
        return _error(_os_message(exc))
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
