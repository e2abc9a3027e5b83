"""SIGTERM to `serve-bench` in the phases before and after the benchmark (the benchmark's
own are in test_group_synthetic): while the server loads (wait_ready), while a correctness
request is waiting on a slow stream, and while the teardown waits out a helper that ignores
SIGTERM. Each must end with exit 130, every process of the server gone, and no hang. Real
processes, real signals (the old handler raised KeyboardInterrupt wherever the signal
landed, and the teardown ignored SIGTERM: a signal there ended with exit 0)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.serve.conftest import synthetic_command, write_stack
from tests.serve.sigterm import sigterm_and_expect_teardown

ROOT = Path(__file__).resolve().parents[2]

# Where SIGTERM lands: (stderr line to wait for, seconds after it, server flags).
# (launch: see below.) loading: the server takes 60 s to load; the signal comes while wait_ready polls.
# correctness: answers stream at 5 tok/s, so 1 s after the phase starts a request is waiting.
# teardown: a helper of the server ignores SIGTERM, so the teardown waits its grace (5 s)
# before SIGKILL; the signal comes 0.5 s into it.
_POINTS: dict[str, tuple[str | None, float, tuple[str, ...]]] = {
    # launch: the moment the server process exists (start() is still recording it): no line to
    # wait for, the test polls for the child and signals at once.
    "launch": (None, 0.0, ("--load-s", "60")),
    "loading": ("[serve] phase", 0.5, ("--load-s", "60")),
    "correctness": ("[serve] correctness", 1.0, ("--rate", "5")),
    "teardown": ("[serve] teardown", 0.5, ("--orphan",)),
}


@pytest.mark.parametrize("point", sorted(_POINTS))
def test_sigterm_in_any_phase_is_exit_130_with_the_server_gone(tmp_path: Path, point: str) -> None:
    marker, delay_s, flags = _POINTS[point]
    stack = write_stack(tmp_path, "sig", {"main": {
        "engine": "openai-command", "model_path": "synthetic",
        "command": synthetic_command(*flags), "stop_grace_s": 5,
        "bench": {"input_len": 8, "output_len": 16, "concurrencies": [1],
                  "single_stream_requests": 1, "request_timeout_s": 120},
    }})  # fmt: skip
    env = tmp_path / "env" / "bin"
    env.mkdir(parents=True)
    (env / "python").symlink_to(sys.executable)
    cli = subprocess.Popen(
        [sys.executable, "-m", "validators", "serve-bench", str(stack), "--env", str(env.parent),
         "--out-dir", str(tmp_path / "out")],
        cwd=ROOT, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert cli.stderr is not None
    seen: list[str] = []
    servers: list[psutil.Process] = []
    if marker is None:
        deadline = time.monotonic() + 120
        while not servers and cli.poll() is None and time.monotonic() < deadline:
            servers = psutil.Process(cli.pid).children()
    else:
        for line in cli.stderr:
            seen.append(line)
            if marker in line:
                servers = psutil.Process(cli.pid).children(recursive=True)
                break
    assert servers, f"serve-bench never printed {marker!r}: {''.join(seen)[-2000:]}"
    sigterm_and_expect_teardown(cli, servers, delay_s=delay_s, point=point, seen="".join(seen))
