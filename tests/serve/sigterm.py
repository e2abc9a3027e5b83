"""SIGTERM to a running `serve-bench` CLI and what must follow: exit 130 within 60 s and every
recorded server process gone (shared by the benchmark-phase and other-phase signal tests)."""

from __future__ import annotations

import signal
import subprocess
import time

import psutil
import pytest


def sigterm_and_expect_teardown(
    cli: subprocess.Popen[str],
    servers: list[psutil.Process],
    *,
    delay_s: float,
    point: str,
    seen: str = "",
) -> None:
    time.sleep(delay_s)  # where the signal lands, not a timing assert
    cli.send_signal(signal.SIGTERM)
    try:
        _, rest = cli.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        cli.kill()
        _, rest = cli.communicate()
        pytest.fail(f"serve-bench still running 60 s after SIGTERM ({point}): {rest[-2000:]}")
    assert cli.returncode == 130, seen[-1500:] + rest[-1500:]
    _gone, alive = psutil.wait_procs(servers, timeout=10)
    assert not alive, f"left running after SIGTERM ({point}): {alive}"
