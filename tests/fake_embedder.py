"""A small deterministic embedder for tests: hashed bags of words, so similar texts get similar rows.

Import :func:`register` (or just this module) to register ``"fake-16"``; it
is fast and needs no model, so every embedder test but one runs without the
``embed`` extra.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from weftsearch import register_embedder

NAME = "fake-16"
DIM = 16
_WORD = re.compile(r"\w+")


def _bucket(word: str) -> int:
    return int.from_bytes(hashlib.blake2b(word.encode("utf-8"), digest_size=2).digest(), "big") % DIM


class FakeEmbedder:
    """Each word adds 1 to a hashed coordinate; rows are L2-normalised (a blank text gives zeros).

    Attributes:
        calls: the size of every ``embed`` call, in order (to check batching).

    """

    name = NAME
    dim = DIM

    def __init__(self, version: int = 1) -> None:
        self.version = version
        self.calls: list[int] = []

    @property
    def model_record(self) -> dict[str, Any]:
        """The fake model's name and version."""
        return {"name": "hashed-words", "version": self.version}

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """One normalised bag-of-hashed-words row per text."""
        self.calls.append(len(texts))
        rows = np.zeros((len(texts), DIM), dtype=np.float32)
        for row, text in zip(rows, texts, strict=True):
            for word in _WORD.findall(text.lower()):
                row[_bucket(word)] += 1.0
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        out: NDArray[np.float32] = (rows / np.maximum(norms, 1e-12)).astype(np.float32)
        return out


#: The name of :class:`ShortFake`, which reads at most :data:`SHORT_WORDS` words of a text.
SHORT_NAME = "fake-16-short"
SHORT_WORDS = 8


class ShortFake(FakeEmbedder):
    """:class:`FakeEmbedder` over the first :data:`SHORT_WORDS` words only, saying which texts it cut.

    A :class:`~weftsearch.embedders.CountsTruncation` embedder, as the MiniLM
    one is at 256 tokens.
    """

    name = SHORT_NAME
    max_tokens = SHORT_WORDS

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """The rows of the first :data:`SHORT_WORDS` words of each text."""
        return self.embed_counting(texts)[0]

    def embed_counting(self, texts: Sequence[str]) -> tuple[NDArray[np.float32], NDArray[np.bool_]]:
        """The rows, and ``True`` for each text of more than :data:`SHORT_WORDS` words."""
        words = [_WORD.findall(text) for text in texts]
        cut = np.array([len(found) > SHORT_WORDS for found in words], dtype=np.bool_)
        return super().embed([" ".join(found[:SHORT_WORDS]) for found in words]), cut


def register() -> None:
    """Register :class:`FakeEmbedder` as ``"fake-16"`` and :class:`ShortFake` as ``"fake-16-short"``."""
    register_embedder(NAME, FakeEmbedder)
    register_embedder(SHORT_NAME, ShortFake)


register()
