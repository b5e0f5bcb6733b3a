"""The one local Ray cluster of the session (starting one costs seconds), always shut down."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def cluster() -> Iterator[str]:
    """A Ray cluster in this process, every socket on 127.0.0.1; its GCS address."""
    ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'weft-search[ray]')")
    from weftsearch.distributed.ray_shard import start_local_cluster

    address = start_local_cluster(num_cpus=2)
    try:
        yield address
    finally:
        ray.shutdown()
