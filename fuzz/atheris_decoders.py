r"""Coverage-guided fuzzing of weft-search's storage decoders with atheris.

How to run (by hand; not part of the test suite)::

    pip install atheris                    # manylinux wheels exist for CPython 3.11
    mkdir -p /tmp/weft-corpus
    PYTHONPATH=src python fuzz/atheris_decoders.py /tmp/weft-corpus tests/storage/fuzz_corpus/seeds \
        tests/storage/fuzz_corpus/crashes -max_len=16384 -timeout=10 -max_total_time=600

The first directory is where libFuzzer writes the inputs it finds
interesting; keep it outside the repository (the others are only read).
Any extra arguments are libFuzzer's (``-help=1`` lists them); to replay
one input, pass its file instead of directories.

Input format (shared with ``tests/storage/test_fuzz.py::feed``): byte 0 picks
the decoder (low 7 bits modulo 4: 0 section file, 1 segment, 2 manifest,
3 tombstones) and bit 0x80 re-seals every checksum of the payload first, so
the fuzzer gets past the CRCs to the structural checks. For tombstones,
bytes 1 and 2 are the manifest's document and deleted counts.

Only ``CorruptIndexError`` and ``FormatVersionError`` may escape a decoder;
anything else is a crash. Put each crashing input (libFuzzer writes
``crash-<sha1>`` in the working directory) into
``tests/storage/fuzz_corpus/crashes/`` with a descriptive name:
``tests/storage/test_fuzz.py::test_corpus_replay`` replays every file there
on each test run, so the bug stays fixed once it is fixed.
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
    import scipy.sparse  # noqa: F401  (imported before instrumenting: coverage of weftsearch only)

    with atheris.instrument_imports(include=["weftsearch"]):
        import weftsearch.storage
        import weftsearch.storage.directory
        import weftsearch.storage.segment  # noqa: F401

from tests.storage.test_fuzz import feed  # noqa: E402


def one_input(data: bytes) -> None:
    """LibFuzzer's entry point: decode ``data``; only the allowed errors are caught."""
    feed(data)


def main(argv: list[str]) -> int:
    """Run the fuzzer with libFuzzer arguments ``argv``."""
    if atheris is None:
        print(
            "atheris is not installed: `pip install atheris`, then run "
            "`PYTHONPATH=src python fuzz/atheris_decoders.py tests/storage/fuzz_corpus/seeds`",
            file=sys.stderr,
        )
        return 2
    atheris.Setup(argv, one_input)
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
