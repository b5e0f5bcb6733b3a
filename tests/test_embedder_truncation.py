"""Texts longer than an embedder reads: truncated, still added, said once per call (TruncatedTextWarning)."""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray

from tests.fake_embedder import SHORT_NAME, SHORT_WORDS, FakeEmbedder, ShortFake
from weftsearch import RRF, Document, Index, Query, VectorScorer
from weftsearch.cli import main
from weftsearch.embedders import CountsTruncation
from weftsearch.errors import EmbeddingError, TruncatedTextWarning

LONG = " ".join(f"word{i}" for i in range(SHORT_WORDS + 4))
DOCS = [Document("short", "one two three"), Document("long1", LONG), Document("long2", LONG + " more")]


def test_an_add_call_warns_once_with_the_count_and_the_keys() -> None:
    index = Index(embedder=SHORT_NAME)
    with pytest.warns(TruncatedTextWarning) as caught:
        assert index.add_many(DOCS) == 3
    assert len(caught) == 1
    warning = caught[0].message
    assert isinstance(warning, TruncatedTextWarning)
    assert (warning.count, warning.keys, warning.embedder) == (2, ("long1", "long2"), SHORT_NAME)
    assert (
        f"truncated 2 document texts (documents 'long1', 'long2') longer than the {SHORT_WORDS} tokens"
        in str(warning)
    )
    assert caught[0].filename == __file__  # points at the add_many call, not inside the index
    assert all(index.get(d.key).vector is not None for d in DOCS)  # truncated, still embedded and added


def test_no_warning_when_nothing_is_truncated_or_the_embedder_cannot_say() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", TruncatedTextWarning)
        Index(embedder=SHORT_NAME).add_many([DOCS[0]])
        Index(embedder=FakeEmbedder()).add_many(DOCS)  # no embed_counting: it truncates nothing
    assert isinstance(ShortFake(), CountsTruncation) and not isinstance(FakeEmbedder(), CountsTruncation)


def test_a_long_query_text_is_said_too() -> None:
    index = Index(embedder=SHORT_NAME)
    index.add_many([DOCS[0]])
    with pytest.warns(TruncatedTextWarning, match="truncated 1 query text longer"):
        index.embed_query(LONG)
    with pytest.warns(TruncatedTextWarning, match="truncated 1 query text longer"):
        index.search(Query(text=LONG), 3, RRF(), VectorScorer())


class _BadFlags(ShortFake):
    def embed_counting(self, texts: Sequence[str]) -> tuple[NDArray[np.float32], NDArray[np.bool_]]:
        rows, _ = super().embed_counting(texts)
        return rows, np.zeros(len(texts) + 1, dtype=np.bool_)


def test_truncation_flags_of_the_wrong_shape_refuse_the_batch_and_add_nothing() -> None:
    index = Index(embedder=_BadFlags())
    with pytest.raises(EmbeddingError, match="truncation flags"):
        index.add_many(DOCS)
    assert len(index) == 0


def test_the_index_command_prints_one_warning_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": d.key, "text": d.text}) + "\n" for d in DOCS))
    assert main(["index", str(corpus), "--index", str(tmp_path / "i"), "--embed", SHORT_NAME]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"weft-search: warning: embedder {SHORT_NAME!r} truncated 2 document texts (documents 'long1', "
        f"'long2') longer than the {SHORT_WORDS} tokens it reads: only the start of each shapes its vector"
    ]


def test_the_real_minilm_says_which_texts_pass_256_tokens() -> None:
    pytest.importorskip("onnxruntime", reason="the real model needs the 'embed' extra")
    from weftsearch.embed import MAX_TOKENS, MiniLMEmbedder
    from weftsearch.errors import MissingDependencyError

    embedder = MiniLMEmbedder(threads=1)
    try:
        rows, cut = embedder.embed_counting(["short", "x " * (MAX_TOKENS - 2), "x " * (MAX_TOKENS - 1)])
    except MissingDependencyError as exc:
        pytest.skip(str(exc))
    assert cut.tolist() == [False, False, True]  # [CLS] and [SEP] count: 254 words fit, 255 do not
    assert np.array_equal(rows, embedder.embed(["short", "x " * (MAX_TOKENS - 2), "x " * (MAX_TOKENS - 1)]))
