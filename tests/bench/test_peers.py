"""Tests of weftsearch.bench.peers: ``bench load`` finds its peers' adapters outside the package.

The adapters (tantivy, LanceDB) live in the repository's ``bench/peers``; the
installed package carries none and says so in one line when asked to run a peer.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from tests.bench.conftest import QUICK_LOAD
from weftsearch import cli as weft_cli
from weftsearch.bench import loadgen, peers
from weftsearch.bench.workloads import Workload
from weftsearch.errors import InvalidParameterError, MissingDependencyError

ROOT = Path(__file__).resolve().parents[2]
PEERS_DIR = ROOT / "bench" / "peers"
PACKAGE_DIR = ROOT / "src" / "weftsearch"

#: A stand-in adapter: its index is a file of keys, its search returns the first k of them.
FAKE_ADAPTER = """
from pathlib import Path


def build(path, keys, texts, vectors):
    path.mkdir(parents=True)
    (path / "keys.txt").write_text("\\n".join(keys))


def open_search(path, workload, k, depth):
    keys = (Path(path) / "keys.txt").read_text().split("\\n")

    def search(item):
        return keys[:k]

    return search
"""


@pytest.fixture
def packages_present(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every package ``bench load`` checks for counts as installed (they are not this test's subject)."""
    monkeypatch.setattr(loadgen, "_module_missing", lambda module: False)


def test_a_checkout_finds_its_own_peer_adapters() -> None:
    assert peers.default_peers_dir() == PEERS_DIR
    files = peers.find_peer_files(None, ["bm25", "hybrid"])
    assert files == {"bm25": PEERS_DIR / "tantivy_peer.py", "hybrid": PEERS_DIR / "lancedb_peer.py"}
    for path in files.values():
        adapter = peers.load_adapter(path)
        assert callable(adapter.build) and callable(adapter.open_search)


def test_an_installed_package_has_no_default_peers_folder(tmp_path: Path) -> None:
    installed = tmp_path / "lib" / "site-packages" / "weftsearch"
    installed.mkdir(parents=True)
    (tmp_path / "lib" / "bench" / "peers").mkdir(parents=True)  # a stray folder that is no checkout's
    assert peers.default_peers_dir(installed) is None
    checkout = tmp_path / "repo" / "src" / "weftsearch"
    checkout.mkdir(parents=True)
    assert peers.default_peers_dir(checkout) is None  # a checkout without bench/peers
    (tmp_path / "repo" / "bench" / "peers").mkdir(parents=True)
    assert peers.default_peers_dir(checkout) == tmp_path / "repo" / "bench" / "peers"


def test_without_a_peers_folder_bench_load_says_what_to_do_before_any_work(
    no_work: list[str],
    packages_present: None,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(peers, "default_peers_dir", lambda: None)  # as in an installed wheel
    assert weft_cli.main(QUICK_LOAD) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert "bench/peers" in err and "--peers-dir DIR" in err and "--no-peer" in err
    assert no_work == []
    # Where no peer runs, no folder is needed: the command goes on to draw the corpus.
    with pytest.raises(AssertionError, match="ran before"):  # it went on to draw the corpus
        weft_cli.main([*QUICK_LOAD, "--no-peer"])


def test_a_peers_dir_without_the_arms_adapter_is_refused_naming_the_file(
    tmp_path: Path, no_work: list[str], packages_present: None, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "tantivy_peer.py").write_text(FAKE_ADAPTER)
    assert weft_cli.main([*QUICK_LOAD, "--arms", "bm25,hybrid", "--peers-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"--peers-dir {tmp_path}: no lancedb_peer.py there" in err and "--no-peer" in err
    assert no_work == []
    with pytest.raises(MissingDependencyError, match=r"no tantivy_peer\.py"):
        peers.find_peer_files(tmp_path / "absent", ["bm25"])


def test_a_file_without_the_adapter_functions_is_not_an_adapter(tmp_path: Path) -> None:
    path = tmp_path / "half.py"
    path.write_text("def build(path, keys, texts, vectors):\n    pass\n")
    with pytest.raises(InvalidParameterError, match=r"half.py: not a peer adapter \(no open_search"):
        peers.load_adapter(path)


def test_a_peer_from_peers_dir_runs_beside_weft_in_a_worker_process(
    tmp_path: Path, packages_present: None, capsys: pytest.CaptureFixture[str]
) -> None:
    # The worker process is spawned: it loads the adapter from its file itself.
    folder = tmp_path / "peers"
    folder.mkdir()
    (folder / "tantivy_peer.py").write_text(FAKE_ADAPTER)
    out = tmp_path / "load.json"
    status = weft_cli.main(
        [*QUICK_LOAD, "--target", "processes:1", "--peers-dir", str(folder), "--json", str(out),
         "--workdir", str(tmp_path)]
    )  # fmt: skip
    assert status == 0, capsys.readouterr().err
    ladders = json.loads(out.read_text())["ladders"]
    assert [(ladder["engine"], ladder["target"]) for ladder in ladders] == [
        ("weft-search", "weft processes:1"),
        ("tantivy", "tantivy processes:1"),
    ]
    for ladder in ladders:
        assert all(rung["errors"] == 0 and rung["completed"] > 0 for rung in ladder["rungs"])


def test_the_tantivy_adapter_finds_a_documents_own_text_first(tmp_path: Path) -> None:
    pytest.importorskip("tantivy", reason="the bm25 peer needs the bench extra")
    adapter = peers.load_adapter(PEERS_DIR / "tantivy_peer.py")
    keys = ["a", "b", "c"]
    texts = ["alpha beta", "gamma delta", "alpha gamma epsilon"]
    adapter.build(tmp_path / "t", keys, texts, None)
    search = adapter.open_search(str(tmp_path / "t"), Workload(("delta", "epsilon zeta", "omega")), 2, 100)
    assert search(0) == ["b"] and search(1) == ["c"] and search(2) == []


def test_the_lancedb_adapter_refuses_documents_without_vectors(tmp_path: Path) -> None:
    adapter = peers.load_adapter(PEERS_DIR / "lancedb_peer.py")
    with pytest.raises(InvalidParameterError, match="needs document vectors"):
        adapter.build(tmp_path / "l", ["a"], ["alpha"], None)


# ---------------------------------------------------------------------- the wheel holds no peer

#: The peers' engines: no module of the installed package may import them.
PEER_ENGINES = frozenset(module.split(".")[0] for peer in peers.PEERS.values() for module in peer.modules)


def test_the_installed_package_holds_no_peer_adapter() -> None:
    """Every file the wheel takes from ``src/weftsearch``: none is an adapter or imports a peer engine."""
    assert {"tantivy", "lancedb"} <= PEER_ENGINES
    problems: list[str] = []
    for path in sorted(PACKAGE_DIR.rglob("*")):
        name = path.relative_to(PACKAGE_DIR).as_posix()
        if path.name in {peer.adapter for peer in peers.PEERS.values()} or "peers/" in name:
            problems.append(f"{name} is a peer adapter")
        if path.suffix != ".py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                found = [node.module or ""]
            else:
                continue
            problems.extend(
                f"{name}:{node.lineno} imports {m}" for m in found if m.split(".")[0] in PEER_ENGINES
            )
    assert problems == []
    assert (PEERS_DIR / "tantivy_peer.py").is_file() and (PEERS_DIR / "lancedb_peer.py").is_file()
