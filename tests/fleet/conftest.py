"""A tiny real stack with a wheelhouse, for fleet runs: wheels made here, served over HTTP on
127.0.0.1 while the lock and the wheelhouse are made, then the server is gone (the nodes build
offline from the wheelhouse, as on a real fleet)."""

from __future__ import annotations

import functools
import http.server
import json
import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.interpreter import base_python
from tests.helpers.tiny_stack import Serving, tiny_index, tiny_manifest

ROOT = Path(__file__).resolve().parents[2]

ENGINE = Path(__file__).resolve().parent / "node_engine.py"
# Serve-bench on the synthetic server: a real process over real HTTP per node, small enough to
# run a few nodes at once on two cores. n5 answers wrongly, n6 is 30% slower
# (tests/fleet/node_engine.py).
DESCRIPTION = "two wheels made by the test; each node serves the synthetic engine"
FAULTY_NODE = "n5"
SLOW_NODE = "n6"  # streams 30% slower: a lemon


@dataclass(frozen=True)
class FleetStack:
    root: Path
    stacks: Path
    wheelhouse: Path
    env: dict[str, str]

    def cli(
        self, *argv: str, env: dict[str, str] | None = None, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        merged = {k: v for k, v in {**self.env, **(env or {})}.items() if v != ""}
        return subprocess.run(
            [sys.executable, "-m", *argv],
            cwd=ROOT,
            env=merged,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def ok(self, *argv: str, env: dict[str, str] | None = None) -> str:
        done = self.cli(*argv, env=env)
        assert done.returncode == 0, f"{argv}: exit {done.returncode}\n{done.stdout}\n{done.stderr}"
        return done.stdout


@pytest.fixture
def fleet_stack(tmp_path: Path) -> FleetStack:
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    tiny_index(tmp_path)
    handler = functools.partial(
        http.server.SimpleHTTPRequestHandler, directory=str(tmp_path / "index")
    )
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/simple"
    command = [sys.executable, str(ENGINE), "--port", "{port}", "--model", "{served_model_name}"]
    command += ["--rate", "100", "--faulty-node", FAULTY_NODE]
    command += ["--slow-node", SLOW_NODE, "--slow-factor", "0.7"]
    serving = Serving(command=command)
    (stacks / "fleetsmoke.toml").write_text(
        tiny_manifest("fleetsmoke", url, description=DESCRIPTION,
                      required=("static", "serve-bench"), serving=serving)
    )
    (stacks / "refs").mkdir()
    env = {
        **os.environ,
        "STACKGATE_STACKS_DIR": str(stacks),
        "STACKGATE_STATE_DIR": str(tmp_path / "state"),
        "UV_PYTHON_DOWNLOADS": "never",
        "NO_COLOR": "1",
        "PYTHONPATH": str(ROOT),
    }
    env.pop("VIRTUAL_ENV", None)
    stack = FleetStack(tmp_path, stacks, tmp_path / "wheelhouse", env)
    try:
        online = {"UV_OFFLINE": ""}
        stack.ok("builder", "lock", "fleetsmoke", "--python", base_python(), env=online)
        out = stack.ok("builder", "wheelhouse", "fleetsmoke", "--to", str(stack.wheelhouse), "--json")
        assert json.loads(out)["files"] == 2
    finally:
        server.shutdown()
        server.server_close()
    # The correctness reference: what the engine answers on a healthy node, recorded once.
    built = stack.ok("builder", "build", "fleetsmoke", "--wheelhouse", str(stack.wheelhouse),
                     "--venv-root", str(tmp_path / "ref-envs"), "--python", base_python(), "--json")  # fmt: skip
    reference = f"record_reference={stacks / 'refs' / 'main.json'}"
    stack.ok("validators", "run", "fleetsmoke", "--env", json.loads(built)["env"], "--only",
             "serve-bench", "--option", reference)  # fmt: skip
    assert (stacks / "refs" / "main.json").is_file()
    return stack
