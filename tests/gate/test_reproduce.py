"""reproduce, for real: a tiny stack locked and built by the builder CLI into one venv root,
validated and marked good, then rebuilt from the record into a second root (the stand-in for
a second machine) -> REPRODUCED with equal env tree hashes. The stack asks for the Python
running the tests, so nothing else is needed."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from stackgate.envtree import compute_tree, own_paths_of
from tests.gate.conftest import Project, write_tiny_stack
from tests.helpers.interpreter import base_python
from tests.helpers.wheels import make_index, make_wheel


def _mark_tiny_good(project: Project) -> tuple[str, dict[str, object]]:
    write_tiny_stack(project, required=("static",))
    project.run("builder", "lock", "tiny", "--python", base_python(), check=True)
    built = json.loads(
        project.run(
            "builder",
            "build",
            "tiny",
            "--venv-root",
            str(project.root / "machine-a"),
            "--python",
            base_python(),
            "--json",
            check=True,
        ).stdout
    )
    run = project.run("validators", "run", "tiny", "--env", built["env"], "--json")
    assert run.returncode == 0, run.stderr
    report = project.root / "run.json"
    report.write_text(run.stdout)
    marked = project.run(
        "validators", "mark-good", "tiny", "--run", str(report), "--allow-host-mismatch", "--json"
    )
    assert marked.returncode == 0, marked.stderr
    return str(json.loads(marked.stdout)["record_id"]), built


def test_a_record_rebuilt_in_a_clean_root_is_reproduced(project: Project) -> None:
    record_id, built = _mark_tiny_good(project)
    second = project.root / "machine-b"
    done = project.run(
        "validators",
        "reproduce",
        record_id[:10],
        "--venv-root",
        str(second),
        "--python",
        base_python(),
        "--json",
    )
    assert done.returncode == 0, done.stderr + done.stdout
    outcome = json.loads(done.stdout)
    assert outcome["verdict"] == "REPRODUCED", outcome["reasons"]
    tree = outcome["env_tree"]
    assert tree["recorded"] == tree["built"] == built["record"]["tree"]["sha256"]  # type: ignore[index]
    assert Path(outcome["env"]).is_relative_to(second)
    assert set(outcome["timings_s"]) >= {"preflight", "build", "validate", "compare"}
    assert "REPRODUCED" in done.stderr and "(equal)" in done.stderr


def test_a_record_whose_lock_is_gone_fails_to_reproduce(project: Project) -> None:
    record_id, _ = _mark_tiny_good(project)
    lock = project.stacks / "locks" / "tiny" / "uv.lock"
    lock.write_text(lock.read_text() + "\n# changed after the record was made\n")
    done = project.run(
        "validators",
        "reproduce",
        record_id[:10],
        "--venv-root",
        str(project.root / "machine-b"),
        "--json",
    )
    assert done.returncode == 1
    outcome = json.loads(done.stdout)
    assert outcome["verdict"] == "FAILED"
    assert "the lock the record was built from" in outcome["reasons"][0]
    assert not (project.root / "machine-b").exists()


def test_gate_runs_the_validators_itself_when_given_an_env(project: Project) -> None:
    record_id, built = _mark_tiny_good(project)
    done = project.run(
        "validators",
        "gate",
        "tiny",
        "--env",
        str(built["env"]),
        "--repeats",
        "2",
        "--min-repeats",
        "2",
        "--baseline",
        record_id,
        "--json",
    )
    assert done.returncode == 0, done.stderr + done.stdout
    payload = json.loads(done.stdout)
    assert payload["passed"] is True
    assert "validation run 2/2 of tiny" in done.stderr
    assert {c["status"] for c in payload["checks"]} <= {"OK", "SKIPPED"}


def _git(project: Project, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(project.root), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True, capture_output=True,
    )  # fmt: skip


def test_an_older_record_is_rebuilt_from_its_manifest_and_lock_in_git_history(
    project: Project,
) -> None:
    _git(project, "init", "-q")
    record_id, built = _mark_tiny_good(project)
    _git(project, "add", "stacks")
    _git(project, "commit", "-q", "-m", "known-good tiny")
    # The stack moves on: another pin, a new lock, committed. The record still names the old.
    make_wheel(project.root / "wheels", "tinyextra", "0.1.0")
    make_index(project.root / "index", list((project.root / "wheels").glob("*.whl")))
    manifest = project.stacks / "tiny.toml"
    manifest.write_text(
        manifest.read_text().replace(
            "[validation]",
            '[packages.tinyextra]\nversion = "0.1.0"\nindex = "local"\n\n[validation]',
        )
    )
    project.run("builder", "lock", "tiny", "--python", base_python(), check=True)
    _git(project, "commit", "-q", "-am", "tiny: add tinyextra")
    done = project.run(
        "validators", "reproduce", record_id[:10], "--venv-root", str(project.root / "b"),
        "--python", base_python(), "--json",
    )  # fmt: skip
    outcome = json.loads(done.stdout)
    assert outcome["verdict"] == "REPRODUCED", outcome["reasons"]
    assert outcome["env_tree"]["built"] == built["record"]["tree"]["sha256"]  # type: ignore[index]
    assert any(n.startswith("lock from git ") for n in outcome["notes"])
    assert any(n.startswith("manifest from git ") for n in outcome["notes"])


def test_mark_good_runs_the_validators_itself_given_an_env(project: Project) -> None:
    """As many runs as the stack's own gate needs: a stack declaring `repeats = 3` gets a
    3-run record (mark-good used to make 8 whatever the stack declared, and a stack declaring
    12 got a baseline its own gate called TOO_FEW); --repeats beats the manifest."""
    manifest = write_tiny_stack(project, required=("static",))
    manifest.write_text(manifest.read_text() + "\n[validation.gate]\nrepeats = 3\n")
    project.run("builder", "lock", "tiny", "--python", base_python(), check=True)
    built = project.run("builder", "build", "tiny", "--python", base_python(), "--json",
                        check=True)  # fmt: skip
    env = json.loads(built.stdout)["env"]
    done = project.run("validators", "mark-good", "tiny", "--env", env,
                       "--allow-host-mismatch", "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["runs"] == 3
    assert "validation run 3/3 of tiny" in done.stderr
    assert "TOO_FEW" not in done.stderr
    done = project.run("validators", "mark-good", "tiny", "--env", env, "--repeats", "2",
                       "--allow-host-mismatch", "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["runs"] == 2
    assert "validation run 2/2 of tiny" in done.stderr
    assert "a gate against tiny needs >= 3 per side" in done.stderr
    bare = project.run("validators", "mark-good", "tiny")
    assert bare.returncode == 2 and "give the runs" in bare.stderr


def test_bad_options_are_refused_with_exit_2_before_anything_is_built(project: Project) -> None:
    """reproduce's own options and those the builder checks (an index the record's manifest
    does not have) are bad input: exit 2, no env root made. The old code reported an unknown
    index as a FAILED reproduction (exit 1) and ran one validation for --runs 0."""
    record_id, _ = _mark_tiny_good(project)
    second = project.root / "machine-b"
    not_a_folder = project.root / "a-file"
    not_a_folder.write_text("")
    cases: list[tuple[list[str], str]] = [
        (["--runs", "0"], "argument --runs: 0 is outside [1, 1000]"),
        (["--index-map", "just-a-name"], "write NAME=URL"),
        (["--index-map", "nosuch=http://127.0.0.1:9/simple"], "no index or git package 'nosuch'"),
        (["--venv-root", str(not_a_folder)], "not a folder"),
    ]
    for extra, words in cases:
        done = project.run(
            "validators", "reproduce", record_id[:10], "--venv-root", str(second), *extra
        )
        assert done.returncode == 2, (extra, done.returncode, done.stderr)
        assert words in done.stderr, (extra, done.stderr)
        assert not second.exists(), extra


def test_a_record_of_an_older_tree_hash_scheme_is_compared_under_its_scheme(
    project: Project,
) -> None:
    # The H200 record (scheme 1, 2026-11-30) rebuilt by today's builder (scheme 3): comparing
    # the two build records' hashes said "env tree hash differs" for an identical env.
    write_tiny_stack(project, required=("static",))
    project.run("builder", "lock", "tiny", "--python", base_python(), check=True)
    built = json.loads(
        project.run("builder", "build", "tiny", "--venv-root", str(project.root / "machine-a"),
                    "--python", base_python(), "--json", check=True).stdout
    )  # fmt: skip
    env = Path(built["env"]).resolve()
    own = env / "stackgate" / "build-record.json"
    old = json.loads(own.read_text())
    old["tree"] = {k: v for k, v in old["tree"].items() if k != "scheme"}
    old["tree"]["sha256"] = compute_tree(env, own_paths=own_paths_of(env), scheme=1).sha256
    assert old["tree"]["sha256"] != built["record"]["tree"]["sha256"]
    own.write_text(json.dumps(old))  # what a scheme-1 builder wrote
    run = project.run("validators", "run", "tiny", "--env", str(env), "--json")
    assert run.returncode == 0, run.stderr
    (project.root / "run.json").write_text(run.stdout)
    marked = project.run("validators", "mark-good", "tiny", "--run", str(project.root / "run.json"),
                         "--allow-host-mismatch", "--json", check=True)  # fmt: skip
    record_id = json.loads(marked.stdout)["record_id"]
    done = project.run("validators", "reproduce", record_id[:10], "--venv-root",
                       str(project.root / "machine-b"), "--python", base_python(), "--json")  # fmt: skip
    outcome = json.loads(done.stdout)
    assert outcome["verdict"] == "REPRODUCED", outcome["reasons"]
    assert outcome["env_tree"]["built"] == outcome["env_tree"]["recorded"] == old["tree"]["sha256"]
    assert any("under the record's hash scheme 1" in n for n in outcome["notes"]), outcome
