"""A small embedder plugin as a package would ship one: declared by entry point, never registered here.

:func:`install` writes a ``.dist-info`` directory declaring :class:`Letters`
in the ``weftsearch.embedders`` entry-point group into a folder; with that
folder (and the repository root) on the path, any process finds the
embedder by name without importing this module first.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

NAME = "letters-8-plugin"
DIM = 8


class Letters:
    """Counts of the letters a to h, as a unit vector (a toy model; a blank text gives zeros)."""

    name = NAME
    dim = DIM
    model_record: ClassVar[dict[str, Any]] = {"name": "letters", "version": 1}

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """One normalised row of letter counts per text."""
        rows = np.zeros((len(texts), DIM), dtype=np.float32)
        for row, text in zip(rows, texts, strict=True):
            for letter in text.lower():
                if "a" <= letter <= "h":
                    row[ord(letter) - ord("a")] += 1.0
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        out: NDArray[np.float32] = (rows / np.maximum(norms, 1e-12)).astype(np.float32)
        return out


def install(folder: Path, entries: dict[str, str] | None = None, distribution: str = "weft_letters") -> Path:
    """Declare ``entries`` (name to ``module:attr``; default :class:`Letters`) as a package would.

    Returns ``folder``, which goes on ``sys.path`` (or ``PYTHONPATH``) for the
    declaration to be seen.
    """
    entries = entries if entries is not None else {NAME: "tests.embedder_plugin:Letters"}
    info = folder / f"{distribution}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 0.1\n")
    lines = "".join(f"{name} = {value}\n" for name, value in entries.items())
    (info / "entry_points.txt").write_text(f"[weftsearch.embedders]\n{lines}")
    return folder
