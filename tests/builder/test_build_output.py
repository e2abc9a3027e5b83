"""What `build` tells a newcomer, run as a user runs it: piped (as in CI logs), and on a
terminal (a real pty)."""

from __future__ import annotations

import fcntl
import os
import re
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

from builder.compile.terminal_lines import TerminalLines

from .conftest import ROOT, LocalStack, builder_env

DATA = Path(__file__).parent / "data"


def test_a_piped_build_prints_steps_and_a_reused_build_says_so(local_stack: LocalStack) -> None:
    assert local_stack.lock().returncode == 0
    first = local_stack.build()
    assert first.returncode == 0, first.stderr
    # One line per step with the time since the start, and a verdict at the end.
    steps = re.findall(r"^  done (\S+)\s+[\d.]+ s  \(t\+\d+ s\)$", first.stderr, re.M)
    assert {"lock", "python", "install", "record", "switch"} <= set(steps), first.stderr
    assert first.stderr.strip().splitlines()[-1].startswith("OK localstack built: ")
    # Piped output stays as it was: uv's summary lines, never its bars or escape sequences.
    assert re.search(r"^    uv: Installed \d+ packages? in ", first.stderr, re.M), first.stderr
    assert "Installing wheels" not in first.stderr
    assert "\x1b" not in first.stderr and "\r" not in first.stderr
    # No source builds in this stack: no job plan, and no "none (none)" for a host without GPUs.
    assert "job plan" not in first.stderr
    assert "none (none)" not in first.stderr
    assert re.search(r"topology\W+common environment only \(no interconnect detected\)",
                     first.stderr), first.stderr

    again = local_stack.build()
    assert again.returncode == 0, again.stderr
    assert "reused (already built for this lock)" in again.stderr
    time_row = next(line for line in again.stderr.splitlines() if " time " in f" {line} ")
    assert "now (reused); the original build:" in time_row
    assert again.stderr.strip().splitlines()[-1].startswith("OK localstack reused: ")
    # Rows are never wrapped when piped: the tree-hash row is one line.
    assert re.search(r"tree hash\W+\S{16} \(\d+ files, [\d.]+ GiB\)", again.stderr)


def run_on_a_terminal(argv: list[str], env: dict[str, str], timeout: float = 300
                      ) -> tuple[int, str]:
    """Run argv with stdin, stdout and stderr on a new 30x120 pty; (exit code, all it drew)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 120, 0, 0))
    try:
        child = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env,
                                 cwd=ROOT, start_new_session=True)
    finally:
        os.close(slave)
    drawn = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the build and everything it started have closed the pty
                break
            if not chunk:
                break
            drawn += chunk
        else:
            child.kill()
        return child.wait(timeout=30), drawn.decode(errors="replace")
    finally:
        os.close(master)


def test_on_a_terminal_uv_draws_its_own_progress_and_the_log_stays_clean(
    local_stack: LocalStack,
) -> None:
    assert local_stack.lock().returncode == 0
    # COLUMNS/LINES (xdist's workers export 80x24) would override the pty's size for rich.
    env = builder_env({"CI": "", "TERM": "xterm-256color", "COLUMNS": "", "LINES": ""})
    argv = [sys.executable, "-m", "builder", *map(str, local_stack.build_args())]
    code, drawn = run_on_a_terminal(argv, env)
    assert code == 0, drawn
    # uv's own bar, drawn in place on the pty ("[2/5] Installing wheels...", redrawn after \r).
    assert re.search(r"\[\d+/\d+\]", drawn), drawn
    assert "Installing wheels" in drawn or "Preparing packages" in drawn, drawn
    # uv's lines for good, stackgate's step lines around them and the verdict at the end.
    plain = re.sub(r"\x1b\[[0-?]*[ -/]*[@-~]", "", drawn)  # colours and cursor moves
    assert re.search(r"\rInstalled \d+ packages? in ", plain), drawn
    assert re.search(r"  done install +[\d.]+ s  \(t\+\d+ s\)\r\n", plain), drawn
    verdict = plain.rsplit("OK localstack built:", 1)
    assert len(verdict) == 2, drawn
    assert re.fullmatch(r"/\S+/localstack-[0-9a-f]{12}", re.sub(r"\s", "", verdict[1])), drawn
    # The log has uv's lines as a terminal keeps them: no redraws, no escape sequences.
    log = (local_stack.stack_dir / "build.log").read_text()
    assert "\x1b" not in log and "\r" not in log, log
    assert "Installing wheels" not in log and "Preparing packages" not in log, log
    assert re.search(r"^Installed \d+ packages? in ", log, re.M), log
    assert re.search(r"^ \+ sglang==0\.5\.9$", log, re.M), log


def test_the_lines_a_terminal_keeps_from_a_recorded_uv_download() -> None:
    """uv 0.13 on a 30x100 pty downloading three 24 MiB wheels over HTTP (two bars at once:
    cursor up/down and erase), then installing them; fed in small pieces as a pty gives it."""
    raw = (DATA / "uv_pty_install.raw").read_bytes().decode()
    assert "\x1b[1A" in raw and "MiB/23.84 MiB" in raw  # the recording has redrawn bars
    screen = TerminalLines()
    kept = [line for i in range(0, len(raw), 37) for line in screen.feed(raw[i:i + 37])]
    kept += screen.finish()
    assert kept == [
        "Using Python 3.11.7 environment at: venv2",
        "Resolved 3 packages in 51ms",
        "Prepared 3 packages in 378ms",
        "Installed 3 packages in 3ms",
        " + big0==1.0",
        " + big1==1.0",
        " + big2==1.0",
    ]


def test_a_line_still_on_the_screen_when_the_output_ends_is_kept() -> None:
    screen = TerminalLines()
    assert screen.feed("\x1b[2m50%\x1b[0m\r\x1b[2Kerror: killed") == []
    assert screen.finish() == ["error: killed"]
    assert screen.feed("\r\x1b[2K") == [] and screen.finish() == []
