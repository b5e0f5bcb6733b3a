"""Build step for the compiled parts: the vector scorer's scan (src/weftsearch/_probe.c) and
the BM25 top-k with block-max early termination (src/weftsearch/_bm25.c).

Everything else is in pyproject.toml. The library has no Python.h dependency
(it is loaded with ctypes) and is optional: where it cannot be compiled, the
install still succeeds and the scorers compute the same scores with numpy
(see weftsearch.engine.kernels and weftsearch.engine.bm25_kernel).
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
    ]
)
