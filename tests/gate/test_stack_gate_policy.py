"""A stack's own gate policy, [validation.gate], through the real CLI (issue 16.1): its
margins and repeats replace the defaults, a flag beats them, `interleave = true` refuses a
sequential gate, and a bad value is exit 2 naming the file and the field."""

from __future__ import annotations

import json

import pytest

from tests.gate.conftest import Project, fake_env_with_build_record
from tests.gate.test_cli import _write_runs


def _declare(project: Project, body: str) -> None:
    manifest = project.stacks / "cu128.toml"
    manifest.write_text(manifest.read_text() + "\n[validation.gate]\n" + body + "\n")


def _baseline_and_slower_candidate(project: Project) -> list[str]:
    base = fake_env_with_build_record(project.root / "base", "cu128")
    runs = _write_runs(project, "base", "cu128", base, seed=11)
    project.run("validators", "mark-good", "cu128", *runs, "--allow-host-mismatch", check=True)
    cand = fake_env_with_build_record(project.root / "cand", "cu128", tree="cd" * 32)
    return _write_runs(project, "cand", "cu128", cand, seed=12, slowdown=0.05)


def test_the_stacks_tolerance_decides_and_a_flag_beats_it(project: Project) -> None:
    _declare(project, "tolerance = 0.10\ntail_tolerance = 0.2")
    runs = _baseline_and_slower_candidate(project)
    # 5% slower: within the stack's 10% margin
    done = project.run("validators", "gate", "cu128", *runs, "--json")
    assert done.returncode == 0, done.stderr
    payload = json.loads(done.stdout)
    assert payload["policy"]["tolerance"] == 0.10 and payload["policy"]["tail_tolerance"] == 0.2
    assert "cu128.toml [validation.gate]" in done.stderr
    # the command line's margin wins over the manifest's
    done = project.run("validators", "gate", "cu128", *runs, "--tolerance", "0.0125", "--json")
    assert done.returncode == 1, done.stderr
    payload = json.loads(done.stdout)
    assert payload["policy"]["tolerance"] == 0.0125
    assert any("output_throughput@c16: REGRESSION" in r for r in payload["reasons"])


def test_the_stacks_repeats_is_the_minimum_a_side_needs(project: Project) -> None:
    _declare(project, "repeats = 10")
    runs = _baseline_and_slower_candidate(project)  # 8 runs a side
    done = project.run("validators", "gate", "cu128", *runs, "--json")
    assert done.returncode == 1, done.stderr
    payload = json.loads(done.stdout)
    assert payload["policy"]["min_repeats"] == 10
    assert any("TOO_FEW" in r and "need >= 10" in r for r in payload["reasons"])


def test_interleave_true_refuses_a_sequential_gate_before_any_run(project: Project) -> None:
    _declare(project, "interleave = true")
    runs = _baseline_and_slower_candidate(project)
    done = project.run("validators", "gate", "cu128", *runs)
    assert done.returncode == 2, done.stderr
    assert "cu128.toml: [validation.gate] interleave = true" in done.stderr
    assert "--interleave-with BASELINE_ENV" in done.stderr
    # no run is made for a stack candidate either: refused before validating
    done = project.run("validators", "gate", "cu128", "--env", str(project.root / "cand"))
    assert done.returncode == 2, done.stderr
    assert "validation run" not in done.stderr and "interleave = true" in done.stderr


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ("tolerance = 1.5", "validation.gate.tolerance"),
        ("tolerance = -0.01", "validation.gate.tolerance"),
        ("tail_tolerance = nan", "validation.gate.tail_tolerance"),
        ("repeats = 1", "validation.gate.repeats"),
        ("repeats = 8.0", "validation.gate.repeats"),
        ('interleave = "yes"', "validation.gate.interleave"),
        ("tolerence = 0.02", "validation.gate.tolerence"),
    ],
)
def test_a_bad_gate_setting_is_exit_2_naming_file_and_field(
    project: Project, body: str, field: str
) -> None:
    _declare(project, body)
    done = project.run("validators", "gate", "cu128", "--baseline", "cu128")
    assert done.returncode == 2, done.stderr
    assert "cu128.toml" in done.stderr and field in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
