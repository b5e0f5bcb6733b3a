"""Build step for the compiled parts, all in src/weftsearch/native/: the vector scorer's scan
(_scan.c), the BM25 top-k with block-max early termination (_bm25.c), the conjunctions and
phrases of query trees (_boolean.c), the english analyzer's inner loop (_analysis.c), and the
segment writer's inversion of term counts into sorted postings and the postings codec
(_inversion.c). The three C kernels include native/heap.h; the three that decode postings
blocks (_bm25.c, _boolean.c, _inversion.c) also native/unpack.h.

Everything else is in pyproject.toml. The first three have no Python.h dependency
(they are loaded with ctypes); the last two are CPython extension modules. All are
optional: where one cannot be compiled, the install still succeeds and the same
results come from numpy or Python (see weftsearch.native, whose loader finds, switches
off and self-checks each of them).
"""

import sys

from setuptools import Extension, setup

# No contraction into fused multiply-adds and no fast-math: the scan must divide
# exactly as numpy does, so both paths give the same bits (the same holds for BM25).
FLAGS = [] if sys.platform == "win32" else ["-O2", "-ffp-contract=off", "-fno-fast-math"]

#: The BM25 batch runs its queries on threads of its own (pthreads; Windows: one thread).
THREADS = [] if sys.platform == "win32" else ["-pthread"]

#: The heap the C kernels include (a change to it rebuilds them).
HEAP = "src/weftsearch/native/heap.h"
#: The full-block decoder of the two kernels that read postings (a change to it rebuilds them).
UNPACK = "src/weftsearch/native/unpack.h"

setup(
    ext_modules=[
        Extension(
            "weftsearch.native._scan",
            sources=["src/weftsearch/native/_scan.c"],
            depends=[HEAP],
            extra_compile_args=FLAGS,
            optional=True,
        ),
        Extension(
            "weftsearch.native._bm25",
            sources=["src/weftsearch/native/_bm25.c"],
            depends=[HEAP, UNPACK],
            extra_compile_args=FLAGS + THREADS,
            extra_link_args=THREADS,
            optional=True,
        ),
        Extension(
            "weftsearch.native._boolean",
            sources=["src/weftsearch/native/_boolean.c"],
            depends=[HEAP, UNPACK],
            extra_compile_args=FLAGS,
            optional=True,
        ),
        Extension(
            "weftsearch.native._analysis",
            sources=["src/weftsearch/native/_analysis.c"],
            extra_compile_args=FLAGS,
            optional=True,
        ),
        Extension(
            "weftsearch.native._inversion",
            sources=["src/weftsearch/native/_inversion.c"],
            depends=[UNPACK],
            extra_compile_args=FLAGS,
            optional=True,
        ),
    ]
)
