"""The server's Prometheus metrics: requests, latency, the index's generation and size, processes."""

from __future__ import annotations

import os
from os import PathLike
from pathlib import Path

import prometheus_client

from weftsearch.errors import InvalidParameterError

__all__ = ["Metrics", "check_multiprocess_metrics"]


def check_multiprocess_metrics(folder: str | PathLike[str]) -> None:
    """Refuse a metrics folder prometheus_client will not write to (it decides when first imported)."""
    from prometheus_client import values

    named = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if values.ValueClass is values.MutexValue or named is None or Path(named) != Path(folder):
        raise InvalidParameterError(
            f"metrics_dir {str(folder)!r} needs PROMETHEUS_MULTIPROC_DIR set to it before "
            "prometheus_client is first imported in this process (weft-search serve --workers N does that)"
        )
    if not Path(folder).is_dir():
        raise InvalidParameterError(f"metrics_dir {str(folder)!r} is not a folder")


class Metrics:
    """One application's metrics, in a registry of its own.

    With ``metrics_dir`` (the ``--workers N`` readers), every metric writes its
    values to files in that folder (prometheus_client's multiprocess mode,
    chosen by ``PROMETHEUS_MULTIPROC_DIR`` when prometheus_client is imported),
    and :meth:`render` sums the files of every process.
    """

    def __init__(self, metrics_dir: str | PathLike[str] | None) -> None:
        self.metrics_dir = metrics_dir
        self.registry = prometheus_client.CollectorRegistry()
        self.requests = prometheus_client.Counter(
            "weft_requests",
            "HTTP requests by endpoint and status",
            ["endpoint", "method", "status"],
            registry=self.registry,
        )
        self.latency = prometheus_client.Histogram(
            "weft_request_seconds",
            "request latency in seconds by endpoint",
            ["endpoint"],
            registry=self.registry,
        )
        # Gauges are set when /metrics is scraped, by the process that answers: with several
        # processes the most recently written value wins (each first adopts the newest commit).
        self.generation = prometheus_client.Gauge(
            "weft_index_generation",
            "the index generation searches see",
            registry=self.registry,
            multiprocess_mode="mostrecent",
        )
        self.documents = prometheus_client.Gauge(
            "weft_index_documents",
            "live documents in the index",
            registry=self.registry,
            multiprocess_mode="mostrecent",
        )
        self.processes = prometheus_client.Gauge(
            "weft_server_processes",
            "processes answering requests (the --workers; 1 for one process)",
            registry=self.registry,
            multiprocess_mode="livesum",
        )
        self.processes.set(1)

    def observe(self, endpoint: str, method: str, status: int, seconds: float) -> None:
        """Count one answered request and its latency."""
        self.requests.labels(endpoint, method, str(status)).inc()
        self.latency.labels(endpoint).observe(seconds)

    def render(self) -> bytes:
        """The Prometheus text of this process (or, with ``metrics_dir``, of every process)."""
        if self.metrics_dir is None:
            return prometheus_client.generate_latest(self.registry)
        from prometheus_client import multiprocess

        merged = prometheus_client.CollectorRegistry()
        multiprocess.MultiProcessCollector(merged, path=str(self.metrics_dir))  # type: ignore[no-untyped-call]
        return prometheus_client.generate_latest(merged)

    def stop(self) -> None:
        """Say this process no longer answers: its live gauges (``weft_server_processes``) go.

        Its counts stay in the files, since the server did serve those requests.
        """
        if self.metrics_dir is not None:
            from prometheus_client import multiprocess

            multiprocess.mark_process_dead(os.getpid(), str(self.metrics_dir))  # type: ignore[no-untyped-call]
