"""The serve-bench command's dry run and the port policy."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from validators.serve import lifecycle
from validators.serve.lifecycle import PortInUse, choose_port

ROOT = Path(__file__).resolve().parents[2]


def test_dry_run_prints_the_kimi_launch() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "validators", "serve-bench", "cu130", "--profile", "kimi-k25-tp8",
         "--topology", "pcie", "--env", "/opt/envs/cu130", "--dry-run", "--json"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )
    data = json.loads(out.stdout)
    assert data["argv"][:3] == ["/opt/envs/cu130/bin/python", "-m", "sglang.launch_server"]
    assert data["env"]["NCCL_PROTO"] == "LL"
    assert data["health"] == "http://127.0.0.1:30000/health"


def test_dry_run_uses_the_venv_root_a_real_run_uses(tmp_path: Path) -> None:
    """No --env: the interpreter printed is the one a real run takes (stackgate.layout), under
    $STACKGATE_VENV_ROOT, not ./envs."""
    env = {**os.environ, "STACKGATE_VENV_ROOT": str(tmp_path / "venvs")}
    out = subprocess.run(
        [sys.executable, "-m", "validators", "serve-bench", "cu130", "--profile", "kimi-k25-tp8",
         "--topology", "pcie", "--dry-run", "--json"],
        cwd=ROOT, capture_output=True, text=True, check=True, env=env,
    )
    python = json.loads(out.stdout)["argv"][0]
    assert python == str(tmp_path / "venvs" / "cu130" / "current" / "bin" / "python")


def test_dry_run_with_unknown_profile_is_bad_input() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "validators", "serve-bench", "cu130", "--profile", "nope",
         "--dry-run"], cwd=ROOT, capture_output=True, text=True,
    )
    assert out.returncode == 2 and "unknown serving profile 'nope'" in out.stderr


def test_taken_engine_default_port_falls_back_to_a_free_one(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        monkeypatch.setitem(lifecycle.DEFAULT_PORTS, "sglang", taken)
        port, why = choose_port("127.0.0.1", None, "sglang")
        assert port != taken and f"default {taken} in use" in why
        with pytest.raises(PortInUse):
            choose_port("127.0.0.1", taken, "sglang")
