"""A writer whose commit encodes in a forked child, for ``test_crash.py`` to SIGKILL mid-commit.

Usage::

    python -m tests.storage.fork_writer DIRECTORY DOCUMENTS HOLD_SECONDS

Creates an index at DIRECTORY, buffers DOCUMENTS documents, prints ``committing``
(one flushed line) and commits through the forked encoder (the path a large
commit takes). ``segment_columns`` (what the child encodes with) is wrapped here, before the fork, so that the
child, as it starts encoding, creates ``encoding-<child pid>`` beside DIRECTORY
and then sleeps HOLD_SECONDS (so a kill can certainly land while it lives). Prints ``committed``
if the commit returns, then waits to be killed.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from weftsearch import Document, Index
from weftsearch.engine import children as children_module


def main(argv: list[str]) -> int:
    directory, documents, hold = Path(argv[0]), int(argv[1]), float(argv[2])
    index = Index.create(directory, "english")
    index._fork_encode_min = 100  # every commit below encodes in a child
    index.add_many(
        [Document(f"d{i:07d}", f"common text w{i % 97} w{i % 89} number {i}") for i in range(documents)],
        progress=False,
    )
    encode = getattr(children_module, "segment_columns")  # noqa: B009 - patched below, in this process only

    def marked(*args: Any, **kwargs: Any) -> Any:
        # Only the child encodes (the parent waits in waitpid): say "encoding" with a
        # file named by the child's pid, so the test knows the child is past its set-up.
        (directory.parent / f"encoding-{os.getpid()}").touch()
        time.sleep(hold)
        return encode(*args, **kwargs)

    setattr(children_module, "segment_columns", marked)  # noqa: B010
    sys.stdout.write("committing\n")
    sys.stdout.flush()
    index.commit()
    sys.stdout.write("committed\n")
    sys.stdout.flush()
    time.sleep(120)
    return 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
