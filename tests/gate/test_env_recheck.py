"""mark-good and `gate --interleave-with` hash the env again and refuse one changed since its
build record was written (issue 10.3), naming the changed file."""

from __future__ import annotations

import json
from pathlib import Path

from stackgate.envtree import compute_tree, own_paths_of
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


def test_interleaved_gate_hashes_the_baseline_env_by_the_records_scheme(project: Project) -> None:
    # The H200 record (scheme 1) vs the same env rebuilt by today's builder (scheme 3): the
    # gate compared the two build records' hashes and refused its own baseline env (exit 2).
    base = fake_env_with_build_record(project.root / "base", "cu128")
    own = base / "stackgate" / "build-record.json"
    (base / "stackgate" / "env.sh").write_text("export A=1\n")  # hashed from scheme 2 on
    real = base.resolve()
    record = json.loads(own.read_text())
    record["tree"]["sha256"] = compute_tree(real, own_paths=own_paths_of(real)).sha256
    today = json.dumps(record)
    old = json.loads(today)
    old["tree"] = {k: v for k, v in old["tree"].items() if k != "scheme"}
    old["tree"]["sha256"] = compute_tree(real, own_paths=own_paths_of(real), scheme=1).sha256
    own.write_text(json.dumps(old))
    runs = _write_runs(project, "base", "cu128", base, seed=11)
    project.run("validators", "mark-good", "cu128", *runs, "--allow-host-mismatch", check=True)
    own.write_text(today)  # the env as today's builder records it
    assert json.loads(today)["tree"]["sha256"] != old["tree"]["sha256"]
    cand = fake_env_with_build_record(project.root / "cand", "cu128", tree="cd" * 32)
    done = project.run("validators", "gate", "cu128", "--interleave-with", str(base),
                       "--env", str(cand), "--repeats", "2", "--min-repeats", "2")  # fmt: skip
    assert "is not the environment" not in done.stderr, done.stderr
    assert "pair 1/2: baseline cu128" in done.stderr, done.stderr
    # and a different env is still refused under the record's scheme
    other = fake_env_with_build_record(project.root / "other", "cu128", tree="ef" * 32)
    done = project.run("validators", "gate", "cu128", "--interleave-with", str(other),
                       "--env", str(cand))  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "is not the environment of cu128@" in done.stderr
    assert "(tree-hash scheme 1)" in done.stderr
