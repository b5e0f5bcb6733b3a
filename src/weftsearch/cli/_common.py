"""What every ``weft-search`` command shares: the program name, exit statuses, argument types, errors."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from weftsearch._argtypes import bounded_int
from weftsearch.distributed.sharded import ShardedIndex, is_sharded
from weftsearch.engine.filters import Filter, parse_filter
from weftsearch.engine.index import Index
from weftsearch.engine.search import MAX_THREADS
from weftsearch.engine.stream import MAX_K
from weftsearch.errors import WeftError
from weftsearch.storage.directory import MANIFEST

PROG = "weft-search"

#: Exit status of a command that ran but found a problem it reported (see the module docstring).
EXIT_PROBLEM = 1

#: How many ids or keys a report names before it says "and N more".
_SHOWN = 5


def _warn(message: str) -> None:
    print(f"{PROG}: warning: {message}", file=sys.stderr)


def _json_dump(payload: dict[str, Any]) -> str:
    return json.dumps(payload, ensure_ascii=False, allow_nan=False)


def _open_readonly(path: str) -> Index | ShardedIndex:
    """The index at ``path`` read-only: a sharded one (a ``SHARDS`` record, no manifest) or a single one."""
    if is_sharded(path) and not (Path(path) / MANIFEST).exists():
        return ShardedIndex.open(path, readonly=True)
    return Index.open(path, readonly=True)


def _vector_dim(index: Index | ShardedIndex) -> int | None:
    return index.vector_dim if isinstance(index, Index) else index.stats().vector_dim


#: A -k or --depth value: a positive integer up to MAX_K (the API's own bound).
_count = bounded_int(MAX_K, "(the largest k the engine accepts)")

#: A --threads value: a positive integer up to MAX_THREADS.
_threads = bounded_int(MAX_THREADS, "threads")


def _filter(text: str) -> Filter:
    try:
        return parse_filter(text)
    except WeftError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class _CommandParser(argparse.ArgumentParser):
    """An argparse parser that reports a refused option value as one line, not a usage error.

    argparse prints the whole usage block before an error; for a well-formed
    command with a bad value (``--filter``, ``-k``, ...) only the message
    helps (it names the option and, for a filter, the position in the
    expression), so that is all it prints, exiting 2 as argparse does.
    Subcommand parsers are made of the same class (argparse's default), so
    every command's options behave alike. Usage errors proper (an unknown
    option, a missing argument, a choice not offered) keep the usage block.
    """

    def _get_value(self, action: argparse.Action, arg_string: str) -> Any:
        try:
            return super()._get_value(action, arg_string)
        except argparse.ArgumentError as exc:
            raise SystemExit(_error(str(exc))) from None


def _error(message: str) -> int:
    print(f"{PROG}: error: {' '.join(message.split())}", file=sys.stderr)
    return 2


def _os_message(exc: OSError) -> str:
    if exc.filename is not None and exc.strerror:
        return f"{exc.strerror}: {exc.filename}"
    return str(exc)
