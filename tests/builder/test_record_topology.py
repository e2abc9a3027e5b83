"""The build record's field names (a contract the gate reads as JSON), the topology choice,
and the environment profile file the env runs at start-up."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from builder.venv.envprofile import apply_profile
from builder.venv.topology import TopologyChoice, choose_topology
from stackgate.build_record import BuildRecord


def test_record_fields_on_disk_are_kept() -> None:
    """Records already written carry these names: renaming one would orphan them."""
    for name in ("stack", "manifest_hash", "lock_hash", "env_name", "env_path", "host", "tools",
                 "timings_s", "topology", "topology_source", "env_profile", "job_plan",
                 "peak_rss_per_job_bytes", "packages", "tree", "patches", "offline"):
        assert name in BuildRecord.model_fields, name


def test_flag_wins_and_a_host_without_nvml_gets_no_guess() -> None:
    assert choose_topology("nvlink") == TopologyChoice("nvlink", "flag", "--topology nvlink")
    detected = choose_topology(None)
    if Path("/dev/nvidia0").exists():
        assert detected.source == "nvml" and detected.topology in ("pcie", "nvlink")
    else:
        assert detected.topology is None and detected.source == "none" and detected.detail


def test_profile_reaches_processes_but_explicit_variables_win(tmp_path: Path) -> None:
    env = tmp_path / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    apply_profile(env, {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"},
                  TopologyChoice("pcie", "flag", ""))
    code = "import os; print(os.environ['NCCL_PROTO'], os.environ['NCCL_ALGO'], os.environ['STACKGATE_TOPOLOGY'])"
    plain = subprocess.run([env / "bin" / "python", "-c", code], capture_output=True, text=True,
                           env={"PATH": "/usr/bin:/bin"}, check=True)
    assert plain.stdout.split() == ["LL", "Ring", "pcie"]
    mine = subprocess.run([env / "bin" / "python", "-c", code], capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "NCCL_PROTO": "Simple"}, check=True)
    assert mine.stdout.split() == ["Simple", "Ring", "pcie"]
    assert "export NCCL_PROTO=LL" in (env / "stackgate" / "env.sh").read_text()
