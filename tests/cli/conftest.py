"""Fixtures of the command-line tests: ``eval``'s tests fetch from the eval tests' local upstream."""

from tests.eval.conftest import server

__all__ = ["server"]
