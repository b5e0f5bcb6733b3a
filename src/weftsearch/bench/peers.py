"""The peers of ``weft-search bench load`` (tantivy, LanceDB): found outside the installed package.

A peer is another engine run on the same corpus, queries and targets beside
weft-search: tantivy-py for the ``bm25`` arm, LanceDB for the ``hybrid`` arm. Its
adapter (how to build its index and search it) is benchmark code, not library
code, so it lives in the repository's ``bench/peers`` folder and the wheel
carries none. ``bench load`` finds that folder with ``--peers-dir DIR``, by
default the ``bench/peers`` of the checkout this package is imported from
(:func:`default_peers_dir`, ``src/weftsearch`` -> ``bench/peers``); an installed
wheel has none, and ``bench load`` then says so in one line before any work
(:func:`find_peer_files`), naming ``--peers-dir`` and ``--no-peer``.

An adapter is a Python file defining two functions::

    def build(path: Path, keys: Sequence[str], texts: Sequence[str],
              vectors: NDArray[np.float32] | None) -> None: ...
    def open_search(path: str, workload: Workload, k: int, depth: int) -> Callable[[int], object]: ...

``build`` writes the peer's index of the analysed texts at ``path``;
``open_search`` opens it (in the process that searches) and returns the
search function of query number ``item``, which returns the keys of its top
``k``. :class:`PeerSearcher` is the picklable :class:`~weftsearch.bench.workloads.Searcher`
over an adapter: a worker process loads the adapter file itself.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import numpy as np
from numpy.typing import NDArray

from weftsearch.bench.workloads import Workload
from weftsearch.errors import InvalidParameterError, MissingDependencyError

__all__ = [
    "PEERS",
    "Peer",
    "PeerSearcher",
    "build_peer",
    "default_peers_dir",
    "find_peer_files",
    "load_adapter",
]


@dataclass(frozen=True)
class Peer:
    """One arm's peer: the engine's name in tables, its adapter's file name and the packages it imports.

    Attributes:
        engine: the name in tables and JSON ("tantivy", "LanceDB").
        adapter: the adapter's file name in the peers folder.
        modules: the top-level packages the adapter imports (the ``bench`` extra installs them).

    """

    engine: str
    adapter: str
    modules: tuple[str, ...]


#: The peer of each arm.
PEERS: dict[str, Peer] = {
    "bm25": Peer("tantivy", "tantivy_peer.py", ("tantivy",)),
    "hybrid": Peer("LanceDB", "lancedb_peer.py", ("lancedb", "pyarrow")),
}


def default_peers_dir(package: Path | None = None) -> Path | None:
    """The ``bench/peers`` folder of the checkout this package is imported from, or ``None``.

    A checkout holds the package at ``src/weftsearch``; an installed package
    sits in ``site-packages`` with no ``bench/peers`` beside it, so ``None``.
    ``package``: the package's folder (default: this one's).
    """
    package = Path(__file__).resolve().parents[1] if package is None else package
    if package.parent.name != "src":
        return None
    folder = package.parents[1] / "bench" / "peers"
    return folder if folder.is_dir() else None


def find_peer_files(peers_dir: str | Path | None, arms: Sequence[str]) -> dict[str, Path]:
    """The adapter file of each arm's peer, from ``peers_dir`` (``None``: :func:`default_peers_dir`).

    Raises:
        MissingDependencyError: no folder given and no checkout's ``bench/peers``
            found, or a folder without an arm's adapter; the message names
            ``--peers-dir`` and ``--no-peer`` (one line).

    """
    folder = default_peers_dir() if peers_dir is None else Path(peers_dir)
    if folder is None:
        raise MissingDependencyError(
            "bench load's peers (tantivy, LanceDB) run from a weft-search checkout's bench/peers folder, "
            "and this installation has none: pass --peers-dir DIR (a checkout's bench/peers) or --no-peer"
        )
    files: dict[str, Path] = {}
    for arm in arms:
        peer = PEERS[arm]
        path = folder / peer.adapter
        if not path.is_file():
            raise MissingDependencyError(
                f"--peers-dir {folder}: no {peer.adapter} there (the {arm} arm's {peer.engine} peer): "
                "pass a weft-search checkout's bench/peers, or --no-peer"
            )
        files[arm] = path
    return files


def load_adapter(path: str | Path) -> ModuleType:
    """The adapter module at ``path``, loaded once per process (under a name of its own).

    Raises:
        InvalidParameterError: the file defines no ``build`` or no ``open_search`` function.

    """
    path = Path(path).resolve()
    name = f"_weftsearch_peer_{path.stem}"
    module = sys.modules.get(name)
    if module is None or getattr(module, "__file__", None) != str(path):
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise InvalidParameterError(f"{path}: not a Python file a peer adapter can be loaded from")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses in the adapter look their module up while it runs
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    missing = [f for f in ("build", "open_search") if not callable(getattr(module, f, None))]
    if missing:
        raise InvalidParameterError(f"{path}: not a peer adapter (no {' or '.join(missing)} function)")
    return module


def build_peer(
    adapter: Path, path: Path, keys: Sequence[str], texts: Sequence[str], vectors: NDArray[np.float32] | None
) -> None:
    """Build the index of the peer whose adapter is ``adapter`` at ``path``."""
    load_adapter(adapter).build(path, keys, texts, vectors)


@dataclass(frozen=True)
class PeerSearcher:
    """A :class:`~weftsearch.bench.workloads.Searcher` over a peer adapter (picklable: it holds paths).

    ``open`` loads the adapter in the calling process (a worker process loads
    it itself) and opens the peer's index at ``path``.
    """

    adapter: str
    path: str
    workload: Workload
    k: int = 10
    depth: int = 100

    def open(self) -> Callable[[int], object]:
        """The peer's search function of query number ``item``."""
        search: Callable[[int], object] = load_adapter(self.adapter).open_search(
            self.path, self.workload, self.k, self.depth
        )
        return search
