"""README's "Deploy the server" section, run for real: its shell commands, then its two configurations.

The first shell block is run by bash as written (``pip install`` left out: the test runs in
the installed environment), with the ``weft-search serve`` line put in the background and
stopped at the end; the second block (``curl -fsS``: any HTTP error fails it) runs against
that server. The port is a free one in place of 8080. The Prometheus and nginx configurations
cannot run here; they are checked against the commands (same address and port, a real
route, a body limit no smaller than the server's).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.server.serving import SRC, free_port
from weftsearch.server.app import ServerLimits

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def section() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.index("\n## Deploy the server\n")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def blocks(language: str) -> list[str]:
    return [body for lang, body in FENCE.findall(section()) if lang == language]


def logical_lines(block: str) -> list[str]:
    return [line for line in block.replace("\\\n", " ").splitlines() if line.strip()]


def serve_address() -> tuple[str, str]:
    (line,) = [line for line in logical_lines(blocks("sh")[0]) if line.startswith("weft-search serve")]
    host = re.search(r"--host (\S+)", line)
    port = re.search(r"--port (\d+)", line)
    assert host is not None and port is not None, "the serve command names its --host and --port"
    return host.group(1), port.group(1)


def test_the_section_has_its_blocks() -> None:
    assert len(blocks("sh")) == 2 and len(blocks("yaml")) == 1 and len(blocks("nginx")) == 1


@pytest.mark.data
def test_the_deploy_commands_run(tmp_path: Path) -> None:
    for tool in ("bash", "curl", "openssl"):
        if shutil.which(tool) is None:
            pytest.skip(f"the deploy section's commands need {tool}")
    if not (SHARED / "datasets" / "scifact" / "vectors").is_dir():
        pytest.skip(f"SciFact with its frozen vectors is not at {SHARED / 'datasets' / 'scifact'}")
    if importlib.util.find_spec("onnxruntime") is None:
        pytest.skip("the deploy section installs the embed extra (onnxruntime is missing)")
    port = str(free_port())
    _host, documented = serve_address()
    setup, calls = (logical_lines(block) for block in blocks("sh"))
    script = ["set -euo pipefail"]
    for line in setup:
        if line.startswith("pip install"):
            continue  # the test runs in the environment that install made
        if line.startswith("weft-search serve"):
            script += [
                line.split("  #")[0] + " &",
                "SERVER=$!",
                "trap 'kill -INT $SERVER; wait $SERVER' EXIT",
            ]
            # A bounded start-up wait (the model loads in each worker) until every worker
            # answers: /health is answered by the first one up, and a worker still loading
            # is not yet counted in /metrics (on a loaded machine the second took seconds more).
            workers = re.search(r"--workers (\d+)", line)
            ready = f"weft_server_processes {int(workers.group(1)) if workers else 1}.0"
            script.append(
                f"for _ in $(seq 1200); do curl -fs localhost:{documented}/metrics 2>/dev/null "
                f"| grep -q '^{ready}' && break; kill -0 $SERVER; sleep 0.1; done"
            )
        else:
            script.append(line)
    script += [f"{line}\necho" for line in calls]  # a newline after each answer
    text = "\n".join(script).replace(documented, port)
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "shared").symlink_to(SHARED)  # ../shared/datasets as from a checkout
    shims = tmp_path / "bin"
    shims.mkdir()
    shim = shims / "weft-search"
    main = "from weftsearch.cli import main; raise SystemExit(main())"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -c "{main}" "$@"\n')
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{shims}:{os.environ['PATH']}", "PYTHONPATH": SRC}
    done = subprocess.run(
        ["bash", "-c", text], cwd=work, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    out = done.stdout
    assert '"name":"hybrid","version":1' in out
    assert '"query_vector":{"source":"server","model":"sentence-transformers/all-MiniLM-L6-v2"' in out
    assert '"upserted":1' in out
    assert "weft_server_processes 2.0" in out
    assert re.search(r'weft_requests_total\{endpoint="/v1/search",method="POST",status="200"\} 1\.0', out)


def test_the_prometheus_config_scrapes_the_served_address() -> None:
    (config,) = blocks("yaml")
    host, port = serve_address()
    assert f'targets: ["{host}:{port}"]' in config
    assert "metrics_path: /metrics" in config


def test_the_nginx_config_proxies_the_served_address() -> None:
    (config,) = blocks("nginx")
    host, port = serve_address()
    assert f"proxy_pass http://{host}:{port};" in config
    assert "location /metrics { deny all; }" in config
    size = re.search(r"client_max_body_size (\d+)m;", config)
    assert size is not None
    # The proxy lets through what the server takes, so clients meet the server's JSON 413.
    assert int(size.group(1)) * 1024 * 1024 >= ServerLimits().max_body_bytes


def serve_it_block() -> str:
    """README's "Serve it" shell block: start a server, publish a profile, search with it."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.index("\n## Serve it\n")
    end = text.index("\n## ", start + 1)
    (block,) = [body for lang, body in FENCE.findall(text[start:end]) if lang == "sh"]
    return str(block)


def test_the_serve_it_commands_run_against_a_fresh_index(tmp_path: Path) -> None:
    # The block must work on a fresh index: a profile it searches with is one it publishes itself.
    for tool in ("bash", "curl"):
        if shutil.which(tool) is None:
            pytest.skip(f"the section's commands need {tool}")
    lines = logical_lines(serve_it_block())
    (serve,) = [line for line in lines if line.startswith("weft-search serve")]
    documented = re.search(r"--port (\d+)", serve)
    index = re.search(r"--index (\S+)", serve)
    assert documented is not None and index is not None
    assert all(line.startswith("curl -fsS ") for line in lines if line.startswith("curl"))  # -f: errors fail
    work = tmp_path / "work"
    work.mkdir()
    corpus = work / "corpus.jsonl"
    corpus.write_text(
        '{"id": "d1", "text": "Vitamin D and bone density in the elderly"}\n'
        '{"id": "d2", "text": "Rain over the sea"}\n',
        encoding="utf-8",
    )
    shims = tmp_path / "bin"
    shims.mkdir()
    shim = shims / "weft-search"
    main = "from weftsearch.cli import main; raise SystemExit(main())"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -c "{main}" "$@"\n')
    shim.chmod(0o755)
    port = str(free_port())
    script = ["set -euo pipefail", f"weft-search index corpus.jsonl --index {index.group(1)} >/dev/null"]
    for line in lines:
        if line is serve:
            script += [
                line + " &",
                "SERVER=$!",
                "trap 'kill -INT $SERVER; wait $SERVER' EXIT",
                f"for _ in $(seq 600); do curl -fs localhost:{port}/health >/dev/null && break; "
                "kill -0 $SERVER; sleep 0.1; done",
            ]
        else:
            script.append(f"{line}\necho")
    text = "\n".join(script).replace(documented.group(1), port)
    env = {**os.environ, "PATH": f"{shims}:{os.environ['PATH']}", "PYTHONPATH": SRC}
    done = subprocess.run(
        ["bash", "-c", text], cwd=work, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert '"name":"text-v1","version":1' in done.stdout
    assert '"key":"d1"' in done.stdout and '"ranking":{"profile":"text-v1","version":1}' in done.stdout
