"""The gate's policy cannot be loosened by the change being gated.

`[validation.gate]` is read from the stack's manifest in the working tree, the same file an
upgrade edits: a pull request bumping a package could add `tolerance = 0.9` (or `repeats = 2`,
or drop `interleave = true`) beside it and its 30%-slower candidate PASSED. The baseline record
keeps a sealed copy of the manifest it was proven under; its settings are the floor, the working
tree can only tighten them (a looser policy takes a new known-good record)."""

from __future__ import annotations

from tests.gate.conftest import Project, fake_env_with_build_record
from tests.gate.test_cli import _mark_baseline, _write_runs


def _loosen(project: Project, table: str) -> None:
    manifest = project.stacks / "cu128.toml"
    text = manifest.read_text()
    assert "[validation.gate]" not in text
    manifest.write_text(text + f"\n[validation.gate]\n{table}\n")


def test_a_tolerance_added_with_the_change_does_not_pass_a_slower_candidate(
    project: Project,
) -> None:
    _mark_baseline(project)  # proven under the defaults (1.25%)
    _loosen(project, "tolerance = 0.9\ntail_tolerance = 0.9")
    env = fake_env_with_build_record(project.root / "cand", "cu128")
    runs = _write_runs(project, "slow", "cu128", env, seed=21, slowdown=0.30)
    done = project.run("validators", "gate", "cu128", *runs)
    assert done.returncode == 1, done.stderr
    assert "REGRESSION" in done.stderr and "PASSED" not in done.stderr
    assert "looser than the one the baseline was proven under" in done.stderr
    assert "tolerance 0.9 (baseline" in done.stderr


def test_fewer_runs_declared_with_the_change_are_too_few(project: Project) -> None:
    _mark_baseline(project)
    _loosen(project, "repeats = 2")
    env = fake_env_with_build_record(project.root / "cand", "cu128")
    runs = _write_runs(project, "few", "cu128", env, seed=22, n=2)
    done = project.run("validators", "gate", "cu128", *runs)
    assert done.returncode == 1, done.stderr
    assert "TOO_FEW" in done.stderr and "PASSED" not in done.stderr


def test_the_tree_can_still_tighten_the_gate(project: Project) -> None:
    _mark_baseline(project)
    _loosen(project, "interleave = true")
    env = fake_env_with_build_record(project.root / "cand", "cu128")
    runs = _write_runs(project, "eq", "cu128", env, seed=23)
    done = project.run("validators", "gate", "cu128", *runs)
    assert done.returncode == 2, done.stderr
    assert "interleave = true" in done.stderr
