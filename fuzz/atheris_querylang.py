r"""Coverage-guided fuzzing of the query language's parser (:mod:`weftsearch.querylang`) with atheris.

How to run (by hand; not part of the test suite)::

    pip install atheris
    mkdir -p /tmp/weft-query-corpus
    PYTHONPATH=src python fuzz/atheris_querylang.py /tmp/weft-query-corpus -max_len=512 -timeout=5 \
        -max_total_time=600

Each input is decoded as UTF-8 (undecodable bytes become lone surrogates,
which the parser must refuse with ``InvalidQueryError``) and parsed; only
``QuerySyntaxError`` may escape, and a query that parses must print back
(``to_string``) to an equal tree. The check is
``tests/querylang/test_parser.py::feed``, which the test suite also runs on
hypothesis's strings; put a crashing input there as an ``@example``.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# The repository root for ``tests``; its src/ last, so PYTHONPATH or an installed copy wins.
sys.path.insert(0, str(ROOT))
sys.path.append(str(ROOT / "src"))

atheris: Any
try:
    atheris = importlib.import_module("atheris")
except ImportError:  # the module still imports (and type-checks) without atheris
    atheris = None

if atheris is not None:
    with atheris.instrument_imports(include=["weftsearch.querylang"]):
        import weftsearch.querylang  # noqa: F401

from tests.querylang.test_parser import feed  # noqa: E402


def one_input(data: bytes) -> None:
    """LibFuzzer's entry point: parse ``data``; only the allowed errors are caught."""
    feed(data)


def main(argv: list[str]) -> int:
    """Run the fuzzer with libFuzzer arguments ``argv``."""
    if atheris is None:
        print(
            "atheris is not installed: `pip install atheris`, then run "
            "`PYTHONPATH=src python fuzz/atheris_querylang.py /tmp/weft-query-corpus`",
            file=sys.stderr,
        )
        return 2
    atheris.Setup(argv, one_input)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
