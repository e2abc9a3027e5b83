"""Benchmark sizes and serve-bench arguments are bounded where they are read (issue 23 §5):
what the real run refuses, `check` and `serve-bench --dry-run` refuse too (exit 2, naming the
field), instead of a crash in the middle of a sweep."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import FAST_BENCH, synthetic_command, write_stack

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


def _stack(tmp_path: Path, **bench: object) -> Path:
    profile = {"engine": "openai-command", "model_path": "synthetic",
               "command": synthetic_command(), "bench": {**FAST_BENCH, **bench}}
    return write_stack(tmp_path, "synthetic", {"main": profile})


@pytest.mark.parametrize(
    ("bench", "field"),
    [
        ({"concurrencies": [100000000]}, "concurrencies.0"),
        ({"concurrencies": [0]}, "concurrencies.0"),
        ({"seed": -1}, "seed"),
        ({"input_len": 1 << 30}, "input_len"),
        ({"request_timeout_s": 1e12}, "request_timeout_s"),
        ({"token_id_range": [0, 1 << 40]}, "token_id_range"),
        ({"rounds": 1000, "concurrencies": [4096], "input_len": 4096}, "prompt tokens"),
    ],
)
def test_check_refuses_a_benchmark_the_run_cannot_do(tmp_path: Path, bench: dict[str, object],
                                                     field: str) -> None:
    out = _cli("-m", "builder", "check", _stack(tmp_path, **bench))
    assert out.returncode == 2, out.stderr
    assert field in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--port", "99999"], "--port"),
        (["--port", "0"], "--port"),
        (["--concurrency", "0"], "--concurrencies"),
        (["--concurrency", "100000000"], "--concurrencies"),
        (["--concurrency", "1,x"], "comma-separated integers"),
    ],
)
def test_dry_run_refuses_what_the_real_run_refuses(tmp_path: Path, flags: list[str],
                                                   said: str) -> None:
    out = _cli("-m", "validators", "serve-bench", _stack(tmp_path), "--profile", "main",
               "--env", tmp_path, "--dry-run", *flags)
    assert out.returncode == 2, out.stdout + out.stderr
    assert said in out.stderr and "Traceback" not in out.stderr


def test_levels_given_on_the_command_line_are_bounded_with_the_profile(tmp_path: Path) -> None:
    """4096 is a level serve-bench allows, but not with this profile's 64 Ki-token prompts x
    1000 rounds: refused before anything is launched."""
    stack = _stack(tmp_path, input_len=65536, rounds=1000, concurrencies=[1])
    out = _cli("-m", "validators", "serve-bench", stack, "--profile", "main", "--env", tmp_path,
               "--dry-run", "--concurrency", "4096")
    assert out.returncode == 2 and "prompt tokens" in out.stderr, out.stderr
