"""What `build` tells a newcomer, run as a user runs it (piped, as in CI logs)."""

from __future__ import annotations

import re

from .conftest import LocalStack


def test_a_piped_build_prints_steps_and_a_reused_build_says_so(local_stack: LocalStack) -> None:
    assert local_stack.lock().returncode == 0
    first = local_stack.build()
    assert first.returncode == 0, first.stderr
    # One line per step with the time since the start, and a verdict at the end.
    steps = re.findall(r"^  done (\S+)\s+[\d.]+ s  \(t\+\d+ s\)$", first.stderr, re.M)
    assert {"lock", "python", "install", "record", "switch"} <= set(steps), first.stderr
    assert first.stderr.strip().splitlines()[-1].startswith("OK localstack built: ")
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
