"""Benchmarks that ship with the library: measurements a user can rerun on their own index.

``weft-search bench load`` (the open-loop load ladder): :mod:`~weftsearch.bench.driver`
(one rung), :mod:`~weftsearch.bench.targets`, :mod:`~weftsearch.bench.workloads`,
:mod:`~weftsearch.bench.ladder`, :mod:`~weftsearch.bench.report`, :mod:`~weftsearch.bench.resources`,
:mod:`~weftsearch.bench.peers` (the peers' adapters live in the repository's ``bench/peers``) and
:mod:`~weftsearch.bench.loadgen` (the command). ``weft-search recall``: :mod:`~weftsearch.bench.recall`.
:mod:`~weftsearch.bench.synthetic`: the synthetic corpus every benchmark shares.
"""
