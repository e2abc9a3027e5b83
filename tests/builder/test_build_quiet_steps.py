"""A piped build is never silent for long (issue 29 item 3): a cold install printed nothing for
60-95 s after `done venv` (uv downloads without a line when not on a terminal). Here the
install step is made slow for real: STACKGATE_UV points at a wrapper that waits 20 s before
the real `uv sync` (as a cold download would), and the piped build says the step is still
running while it waits."""

from __future__ import annotations

from pathlib import Path

from tests.builder.conftest import LocalStack, uv_wrapper


def test_a_quiet_step_says_it_is_still_running(local_stack: LocalStack, tmp_path: Path) -> None:
    assert local_stack.lock().returncode == 0
    wrapper = uv_wrapper(tmp_path / "slow-uv", "sleep 20")
    done = local_stack.build("--topology", "pcie", env={"STACKGATE_UV": str(wrapper)})
    assert done.returncode == 0, done.stderr
    beats = [line for line in done.stderr.splitlines() if "still running" in line]
    assert beats, done.stderr
    assert beats[0].startswith("  ... install still running (")
