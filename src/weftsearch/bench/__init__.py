"""Benchmarks that ship with the library: measurements a user can rerun on their own index."""
