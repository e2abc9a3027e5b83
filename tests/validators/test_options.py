"""Typed group options: a wrong --option is exit 2 before any group runs; values arrive typed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from stackgate.errors import BadInput
from validators.core.options import SECTIONS, GroupOptions, parse_options

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "validators", *args], cwd=ROOT,
                          capture_output=True, text=True)  # fmt: skip


def test_values_arrive_typed() -> None:
    opts = parse_options(["nccl_iters=300", "targets=12.0a,10.0f", "port=30001",
                          "concurrencies=1,4", "jit_timeout=12.5"])  # fmt: skip
    assert opts.runtime.nccl_iters == 300 and opts.runtime.jit_timeout == 12.5
    assert opts.static.targets == ("12.0a", "10.0f")
    assert opts.serve.port == 30001 and opts.serve.concurrencies == (1, 4)
    assert parse_options([]) == GroupOptions()


def test_keys_are_unique_across_groups() -> None:
    per_section = [set(info.annotation.model_fields) for info in GroupOptions.model_fields.values()]  # type: ignore[union-attr]
    assert sum(len(s) for s in per_section) == len(SECTIONS)


def test_every_bad_item_is_reported_at_once() -> None:
    with pytest.raises(BadInput) as caught:
        parse_options(["nccl_iter=3", "novalue", "port=99999"])
    details = caught.value.details
    assert any("nccl_iter: unknown option; did you mean 'nccl_iters'?" in d for d in details)
    assert any("'novalue': expected KEY=VALUE" in d for d in details)
    with pytest.raises(BadInput, match="invalid --option") as caught:
        parse_options(["port=99999", "targets=sm_120"])
    assert any(d.startswith("--option port:") for d in caught.value.details)
    assert any("did you mean '12.0'?" in d for d in caught.value.details)


def test_run_with_a_typo_exits_2_before_anything_runs(tmp_path: Path) -> None:
    done = _cli("run", "cu128", "--env", str(tmp_path), "--only", "host", "--option", "nccl_iter=3")
    assert done.returncode == 2, done.stderr
    assert "nccl_iters" in done.stderr and "Traceback" not in done.stderr
    assert "host." not in done.stdout  # no group ran


def test_static_targets_sm_style_is_exit_2_with_the_spelling(tmp_path: Path) -> None:
    done = _cli("static", "--env", str(tmp_path), "--targets", "sm_120")
    assert done.returncode == 2, done.stderr
    assert "did you mean '12.0'?" in done.stderr
