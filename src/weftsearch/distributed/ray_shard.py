"""Shards as Ray actors, and a local Ray cluster that listens on 127.0.0.1 only.

Needs the ``ray`` extra (``pip install 'weft-search[ray]'``); importing this
module without it raises :class:`~weftsearch.errors.MissingDependencyError`.

Each shard is one actor running a :class:`~weftsearch.distributed.shard.LocalShard`
over its index directory (memory-mapped, read-only segments for searches and
the shard's one writer). The actor restarts up to ``max_restarts`` times; a
restarted actor reopens its directory from its last commit. Reads are
idempotent, so the coordinator retries a read that met a dead actor (on the
restarted one); writes are never retried, and a write or commit to an actor
that restarted since the coordinator opened it fails naming the shard (its
uncommitted writes are gone). A shard that does not answer in ``timeout``
seconds, or whose actor or node died, is reported as
:class:`~weftsearch.errors.ShardUnavailableError` naming the shard and its
node. See docs/SCALING.md.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from weftsearch.errors import InvalidParameterError, MissingDependencyError, ShardUnavailableError

from .shard import LocalShard
from .sharded import ShardFactory, ShardGroup

try:
    import ray
    import ray.exceptions
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError(
        "weftsearch.distributed.ray_shard needs Ray: pip install 'weft-search[ray]'"
    ) from error

__all__ = ["RayShards", "connect", "ray_shards", "start_local_cluster", "stop_local_cluster"]

#: Shard methods that change a shard: never retried, refused by a restarted actor.
#: Seconds between asking a restarting actor again (a read waits for it within its timeout).
_RESTART_POLL = 0.2
_WRITES = frozenset({"add_many", "delete_many", "merge", "commit", "stage", "bind"})


def start_local_cluster(num_cpus: int = 2, **options: Any) -> str:
    """Start a Ray cluster in this process whose every listening socket is on 127.0.0.1.

    ``ray.init(_node_ip_address="127.0.0.1")`` is not enough: Ray resolves a
    loopback address to the machine's own (``resolve_ip_for_localhost``) and
    its servers then listen on every interface. Ray treats macOS and Windows
    as single-machine and uses the loopback address there; the environment
    variable ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` asks for that behaviour
    on Linux too, and with the node's address 127.0.0.1 its gRPC servers
    (GCS, raylet, workers) and agents bind 127.0.0.1. The variable is set in
    this process's environment (the processes Ray starts inherit it) and in
    Ray's already imported constant. No dashboard is started, and usage
    statistics are off (``RAY_USAGE_STATS_ENABLED=0``) unless set otherwise.
    ``tests/distributed/test_ray.py`` lists every listening socket of the Ray
    processes and checks each is on 127.0.0.1.

    Args:
        num_cpus: CPUs Ray may schedule on (shard actors take none).
        **options: more keywords for ``ray.init``.

    Returns:
        The cluster's GCS address (``127.0.0.1:PORT``), for ``--ray ADDRESS``.

    """
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    from ray._private import ray_constants

    ray_constants.ENABLE_RAY_CLUSTER = False  # read at call time by get_node_ip_address
    options.setdefault("include_dashboard", False)
    options.setdefault("logging_level", logging.WARNING)
    options.setdefault("log_to_driver", False)
    ray.init(num_cpus=num_cpus, **options)
    return str(ray.get_runtime_context().gcs_address)


def stop_local_cluster() -> None:
    """Stop the cluster :func:`start_local_cluster` started in this process (``ray.shutdown``)."""
    ray.shutdown()


def connect(address: str) -> None:
    """Join the Ray cluster at ``address`` (``HOST:PORT``) if this process is not in one yet."""
    if not ray.is_initialized():
        ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)


class _ShardActor:
    """The actor: one :class:`LocalShard`, created on first start and reopened on a restart."""

    def __init__(self, name: str, path: str, options: Mapping[str, Any] | None, readonly: bool) -> None:
        context = ray.get_runtime_context()
        self._node = f"{context.get_node_id()[:12]}"
        self._incarnation = os.urandom(8).hex()
        directory = Path(path)
        if options is not None and not (directory / "MANIFEST").exists():
            shard = LocalShard.create(name, directory, options)
        else:
            shard = LocalShard.open(name, directory, readonly)
        self._shard = LocalShard(name, shard._index, node=self._node)

    def identity(self) -> tuple[str, str]:
        """``(node id prefix, incarnation)``: a restart gives a new incarnation."""
        return self._node, self._incarnation

    def pid(self) -> int:
        """The actor's process id (tests kill it)."""
        return os.getpid()

    def call(self, method: str, incarnation: str | None, *args: Any) -> Any:
        if incarnation is not None and incarnation != self._incarnation:
            raise ShardUnavailableError(
                f"shard {self._shard.name!r} on node {self._node} restarted: the writes sent to it since "
                "its last commit are lost; reopen the sharded index",
                (self._shard.name,),
            )
        return getattr(self._shard, method)(*args)


class RayShards:
    """The shards of a sharded index as Ray actors (a :class:`~weftsearch.distributed.sharded.ShardGroup`).

    Args:
        directories: one index directory per shard (shared storage, or the
            node that runs the shard: pin shards with ``nodes``).
        options: :meth:`Index.create` keywords when creating, ``None`` to open.
        readonly: open the shards read-only.
        max_restarts: how often an actor is restarted after it dies.
        timeout: seconds a call may take before its shard counts as unavailable.
        read_retries: extra attempts of an idempotent read that met a dead actor.
        nodes: a Ray node id per shard to place it on (``None``: anywhere).

    """

    def __init__(
        self,
        directories: Sequence[Path],
        options: Mapping[str, Any] | None,
        readonly: bool,
        *,
        max_restarts: int = 2,
        timeout: float = 60.0,
        read_retries: int = 1,
        nodes: Sequence[str] | None = None,
    ) -> None:
        if nodes is not None and len(nodes) != len(directories):
            raise InvalidParameterError(f"nodes names {len(nodes)} nodes for {len(directories)} shards")
        self._names = tuple(path.name for path in directories)
        self._timeout = timeout
        self._read_retries = read_retries
        self._actors: list[Any] = []
        for number, path in enumerate(directories):
            settings: dict[str, Any] = {"num_cpus": 0, "max_restarts": max_restarts, "max_task_retries": 0}
            if nodes is not None:
                settings["scheduling_strategy"] = NodeAffinitySchedulingStrategy(nodes[number], soft=False)
            actor_class = ray.remote(**settings)(_ShardActor)
            self._actors.append(actor_class.remote(path.name, str(path), options, readonly))
        identities = ray.get([actor.identity.remote() for actor in self._actors], timeout=timeout)
        self._nodes = [node for node, _ in identities]
        self._incarnations = [incarnation for _, incarnation in identities]

    @property
    def names(self) -> tuple[str, ...]:
        """The shards' names, in shard order."""
        return self._names

    @property
    def actors(self) -> tuple[Any, ...]:
        """The actor handles, in shard order (for tests and operations)."""
        return tuple(self._actors)

    def node_of(self, number: int) -> str:
        """The node (id prefix) shard ``number`` was placed on when opened."""
        return str(self._nodes[number])

    def call(self, method: str, arguments: Mapping[int, tuple[Any, ...]], *, read: bool) -> dict[int, Any]:
        """Call ``method`` on the shards concurrently; a silent shard gives a ShardUnavailableError."""
        incarnation = {n: (self._incarnations[n] if method in _WRITES else None) for n in arguments}
        pending = {
            n: self._actors[n].call.remote(method, incarnation[n], *args) for n, args in arguments.items()
        }
        results: dict[int, Any] = {}
        for number, reference in pending.items():
            attempts = 1 + (self._read_retries if read else 0)
            failure: Exception | None = None
            deadline = time.monotonic() + self._timeout
            attempt = 0
            while attempt < attempts:
                try:
                    results[number] = ray.get(reference, timeout=max(0.0, deadline - time.monotonic()))
                    failure = None
                    break
                except ray.exceptions.ActorUnavailableError as error:
                    # The actor is restarting: a retried read would meet it restarting again,
                    # so wait for it (within the call's timeout) without spending an attempt.
                    failure = error
                    if not read or time.monotonic() >= deadline:
                        break
                    time.sleep(_RESTART_POLL)
                    args = arguments[number]
                    reference = self._actors[number].call.remote(method, incarnation[number], *args)
                    continue
                except ray.exceptions.RayTaskError as error:
                    cause = error.cause
                    if isinstance(cause, ShardUnavailableError):
                        results[number] = cause
                        failure = None
                        break
                    if isinstance(cause, Exception):
                        raise cause from None
                    raise
                except ray.exceptions.RayError as error:  # the actor, its node or the wait failed
                    failure = error
                    attempt += 1
                    if attempt < attempts and time.monotonic() < deadline:
                        args = arguments[number]
                        reference = self._actors[number].call.remote(method, incarnation[number], *args)
            if failure is not None:
                name = self._names[number]
                results[number] = ShardUnavailableError(
                    f"shard {name!r} on node {self._nodes[number]} did not answer {method}: "
                    f"{type(failure).__name__}: {str(failure).splitlines()[0] if str(failure) else ''}",
                    (name,),
                )
        return results

    def close(self) -> None:
        """Close every shard's index and end its actor."""
        for actor in self._actors:
            with contextlib.suppress(ray.exceptions.RayError):  # a dead shard has nothing left to close
                ray.get(actor.call.remote("close", None), timeout=self._timeout)
            ray.kill(actor, no_restart=True)


def ray_shards(
    *, max_restarts: int = 2, timeout: float = 60.0, read_retries: int = 1, nodes: Sequence[str] | None = None
) -> ShardFactory:
    """A :data:`~weftsearch.distributed.sharded.ShardFactory` of :class:`RayShards` (Ray must run)."""

    def make(directories: Sequence[Path], options: Mapping[str, Any] | None, readonly: bool) -> ShardGroup:
        return RayShards(
            directories,
            options,
            readonly,
            max_restarts=max_restarts,
            timeout=timeout,
            read_retries=read_retries,
            nodes=nodes,
        )

    return make
