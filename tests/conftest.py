"""Marker guards: tests that need a tool, a registry or hardware say so with a marker.

- Under CI=true a `buildah` test whose tool is missing FAILS (CI must install it); locally it
  skips with the reason. `gpu` tests skip where there is no NVIDIA driver (CI has none).
- An unmarked test that opens a connection to anything but loopback fails: mark it `network`.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

IN_CI = os.environ.get("CI") == "true"
ROOT = Path(__file__).resolve().parent.parent


def _has_gpu() -> bool:
    return shutil.which("nvidia-smi") is not None and Path("/dev/nvidia0").exists()


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("gpu") and not _has_gpu():
        pytest.skip("no NVIDIA GPU on this machine")
    if item.get_closest_marker("buildah") and shutil.which("buildah") is None:
        if IN_CI:
            pytest.fail(
                "buildah is not installed, but CI must run buildah tests (.ci/run installs it)"
            )
        pytest.skip("buildah not installed (apt-get install buildah)")
    if item.get_closest_marker("slurm"):
        from tests.fleet.slurm_cluster import missing_tools

        missing = missing_tools()
        why = (
            f"Slurm tools missing: {', '.join(missing)} (apt-get install slurmctld slurmd "
            "slurm-client munge)"
            if missing
            else ("the one-host Slurm cluster runs its daemons as root" if os.getuid() else "")
        )
        if why:
            if IN_CI:
                pytest.fail(f"{why}; CI must run the Slurm tests (.ci/bootstrap installs them)")
            pytest.skip(why)
    if item.get_closest_marker("network") and os.environ.get("STACKGATE_OFFLINE") == "1":
        pytest.skip("STACKGATE_OFFLINE=1")


def _loopback(address: Any) -> bool:
    if isinstance(address, tuple) and address:
        host = address[0]
        if host in ("localhost", ""):
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False
    return True  # unix sockets


@pytest.fixture(autouse=True)
def _no_network_unless_marked(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    if request.node.get_closest_marker("network"):
        yield
        return
    real_connect = socket.socket.connect

    def guarded(self: socket.socket, address: Any) -> Any:
        if not _loopback(address):
            pytest.fail(f"unmarked test tried to reach {address!r}: mark it @pytest.mark.network")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    yield


@pytest.fixture
def repo_root() -> Path:
    return ROOT
