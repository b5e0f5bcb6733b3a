"""Build step for the compiled parts: the vector scorer's scan (src/weftsearch/_probe.c),
the BM25 top-k with block-max early termination (src/weftsearch/_bm25.c), and the english
analyzer's inner loop (src/weftsearch/_analysis.c).

Everything else is in pyproject.toml. The first two have no Python.h dependency
(they are loaded with ctypes); the third is a CPython extension module. All are
optional: where one cannot be compiled, the install still succeeds and the same
results come from numpy or Python (see weftsearch.engine.kernels,
weftsearch.engine.bm25_kernel and weftsearch.analysis).
"""

import sys

from setuptools import Extension, setup

# No contraction into fused multiply-adds and no fast-math: the scan must divide
# exactly as numpy does, so both paths give the same bits (the same holds for BM25).
FLAGS = [] if sys.platform == "win32" else ["-O2", "-ffp-contract=off", "-fno-fast-math"]

setup(
    ext_modules=[
        Extension(
            "weftsearch._probe", sources=["src/weftsearch/_probe.c"], extra_compile_args=FLAGS, optional=True
        ),
        Extension(
            "weftsearch._bm25", sources=["src/weftsearch/_bm25.c"], extra_compile_args=FLAGS, optional=True
        ),
        Extension(
            "weftsearch._analysis",
            sources=["src/weftsearch/_analysis.c"],
            extra_compile_args=FLAGS,
            optional=True,
        ),
    ]
)
