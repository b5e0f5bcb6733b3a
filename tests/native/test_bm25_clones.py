"""The BM25 kernel's portable copy of its block-max walk gives the bits of the copy this CPU runs.

``_bm25.c`` compiles ``walk_part`` twice where GCC and glibc allow it (``target_clones``: an
x86-64-v3 copy and the baseline one, picked at load by the CPU). The tests elsewhere run
whichever copy this machine picks; here the same source is built with ``-DWEFT_NO_CLONES``
(the baseline copy only) and, for random corpora and queries, must return what the installed
library returns (ids, score bits, order) and what the numpy oracle returns.
"""

from __future__ import annotations

import ctypes
import platform
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import weftsearch.scorers.bm25 as bm25_module
from tests.scorers.test_bm25_kernel import PARAMS, corpus, mismatches, queries
from weftsearch.native import bm25 as kernel
from weftsearch.native.loader import library_path
from weftsearch.scorers.bm25 import lists as bm25_lists
from weftsearch.scorers.bm25 import lucene_idf

SOURCE = Path(kernel.__file__).resolve().parent / "_bm25.c"
COMPILER = shutil.which("gcc")
#: setup.py's flags for the kernel (no contraction into fused multiply-adds, no fast-math).
FLAGS = ["-O2", "-ffp-contract=off", "-fno-fast-math", "-pthread", "-shared", "-fPIC"]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        COMPILER is None or platform.system() != "Linux",
        reason="needs gcc on Linux to build the portable copy",
    ),
    pytest.mark.skipif(kernel.compiled_bm25() is None, reason="the compiled BM25 is off or not built"),
]


@pytest.fixture(scope="module")
def portable(tmp_path_factory: pytest.TempPathFactory) -> kernel.CompiledBM25:
    """The kernel built from this source with one (baseline) copy of every function, bound."""
    assert COMPILER is not None
    out = tmp_path_factory.mktemp("portable") / "_bm25_portable.so"
    subprocess.run(
        [COMPILER, *FLAGS, "-DWEFT_NO_CLONES", str(SOURCE), "-o", str(out)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return kernel._bind(ctypes.CDLL(str(out)))


@pytest.fixture
def block_max_in_both(portable: kernel.CompiledBM25) -> Iterator[None]:
    """Both libraries run the block-max walk on every part (small parts would be scored densely)."""
    installed = kernel.compiled_bm25()
    assert installed is not None and installed.dense_max_docs is not None
    assert portable.dense_max_docs is not None
    saved = installed.dense_max_docs.value, portable.dense_max_docs.value
    installed.dense_max_docs.value = portable.dense_max_docs.value = 0
    old_threshold = bm25_module._COMPILED_FROM_DOCS
    bm25_module._COMPILED_FROM_DOCS = 0
    yield
    installed.dense_max_docs.value, portable.dense_max_docs.value = saved
    bm25_module._COMPILED_FROM_DOCS = old_threshold


def test_the_installed_build_has_two_copies_of_the_walk_where_gcc_can() -> None:
    """On x86-64 with glibc the installed library holds the v3 copy (else this file tests nothing new)."""
    if platform.machine() not in ("x86_64", "AMD64") or platform.libc_ver()[0] != "glibc":
        pytest.skip("function multiversioning is built on x86-64 with glibc only")
    objdump = shutil.which("objdump")
    if objdump is None:
        pytest.skip("needs objdump to list the library's symbols")
    library = library_path("_bm25")
    assert library is not None
    symbols = subprocess.run([objdump, "-t", str(library)], check=True, capture_output=True, text=True).stdout
    assert "walk_part.arch_x86_64_v3" in symbols and "walk_part.default" in symbols


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    seed=st.integers(0, 2**32 - 1),
    segments=st.integers(1, 3),
    docs=st.integers(1, 600),
    vocabulary=st.integers(1, 30),
    deleted=st.sampled_from([0.0, 0.05, 0.5]),
    lengths=st.integers(1, 6),
    ks=st.lists(st.integers(1, 300), min_size=1, max_size=3),
    params=st.lists(PARAMS, min_size=1, max_size=2),
)
def test_the_portable_walk_returns_the_installed_walks_bits(
    portable: kernel.CompiledBM25,
    block_max_in_both: None,
    seed: int,
    segments: int,
    docs: int,
    vocabulary: int,
    deleted: float,
    lengths: int,
    ks: list[int],
    params: list[tuple[float, float]],
) -> None:
    installed = kernel.compiled_bm25()
    assert installed is not None
    index, words = corpus(seed, segments, docs, vocabulary, deleted, lengths)
    snapshot = index.snapshot()
    texts = queries(seed, words, 8)
    for k1, b in params:
        parts, _ = bm25_lists._part_table(snapshot, k1, b, snapshot.avgdl)
        for text in texts:
            terms = snapshot.analyzer.analyze(text)
            distinct = sorted(set(terms))
            lists = bm25_lists.gather(snapshot, distinct)
            if not distinct or not lists.table.shape[0]:
                continue
            weights = lucene_idf(snapshot.n_docs, lists.doc_freq) * [terms.count(term) for term in distinct]
            for k in ks:
                want = kernel.top_k(installed, lists.table, parts, weights, k1, b, snapshot.avgdl, k)
                got = kernel.top_k(portable, lists.table, parts, weights, k1, b, snapshot.avgdl, k)
                assert got[0].tobytes() == want[0].tobytes(), (text, k, k1, b)
                assert got[1].tobytes() == want[1].tobytes(), (text, k, k1, b)
                assert got[2] == want[2], (text, k, k1, b)  # the same postings, blocks and documents read


def test_the_portable_walk_matches_the_numpy_oracle(
    portable: kernel.CompiledBM25, block_max_in_both: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """BM25Scorer.score through the portable build equals the exhaustive numpy path, bit for bit."""
    monkeypatch.setattr(kernel, "compiled_bm25", lambda: portable)
    for seed in range(4):
        index, words = corpus(seed, 1 + seed % 3, 400, 25, 0.05 * (seed % 2), 5)
        found = mismatches(
            index.snapshot(), queries(seed, words, 10), [1, 10, 100], [(1.2, 0.75), (0.0, 1.0)]
        )
        assert found == []
