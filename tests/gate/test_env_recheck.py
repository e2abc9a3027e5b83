"""mark-good and `gate --interleave-with` hash the env again and refuse one changed since its
build record was written (issue 10.3), naming the changed file."""

from __future__ import annotations

from pathlib import Path

from tests.gate.conftest import Project, fake_env_with_build_record
from tests.gate.test_cli import _write_runs


def _damage(env: Path) -> None:
    standin = next(env.glob("lib/python3.*/site-packages/standin.py"))
    standin.write_text("SEED = 'replaced after the build'\n")


def test_mark_good_refuses_an_env_changed_after_its_build(project: Project) -> None:
    env = fake_env_with_build_record(project.root / "base", "cu128")
    runs = _write_runs(project, "base", "cu128", env, seed=11)
    _damage(env)
    done = project.run("validators", "mark-good", "cu128", *runs, "--allow-host-mismatch")
    assert done.returncode == 1, done.stderr
    assert "no longer match its build record" in done.stderr
    assert "changed: lib/python3.12/site-packages/standin.py" in done.stderr
    listed = project.run("validators", "records", "list", "--json")
    assert "cu128" not in listed.stdout


def test_interleaved_gate_refuses_a_changed_baseline_env(project: Project) -> None:
    base = fake_env_with_build_record(project.root / "base", "cu128")
    runs = _write_runs(project, "base", "cu128", base, seed=11)
    project.run("validators", "mark-good", "cu128", *runs, "--allow-host-mismatch", check=True)
    cand = fake_env_with_build_record(project.root / "cand", "cu128", tree="cd" * 32)
    _damage(base)
    done = project.run("validators", "gate", "cu128", "--interleave-with", str(base),
                       "--env", str(cand))  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert "changed: lib/python3.12/site-packages/standin.py" in done.stderr
