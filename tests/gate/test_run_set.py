"""A record's runs, env and host must belong together (validators/records/run_set.py).

Each test is an outsider's variant that mark-good or the gate accepted before (exit 0): the
same report given eight times, `--env` naming another env than the runs judged, a `current`
link moved to a new build between the runs and mark-good, an env built for another stack,
and runs from two hosts merged as repeats of one measurement.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from stackgate.build_record import read_build_record
from tests.gate.conftest import Project, fake_env_with_build_record
from tests.gate.test_cli import _mark_baseline
from tests.helpers.synth_reports import make_report, measured_cv
from validators.core.host_facts import HostFacts
from validators.gate.policy import DEFAULT_REPEATS
from validators.records.model import HostFingerprint


def _runs(
    project: Project, name: str, env: Path, *, n: int = DEFAULT_REPEATS, **update: Any
) -> list[str]:
    """n synthetic run reports of cu128 on env (`update`: report fields a real run sets)."""
    rng = np.random.default_rng(7)
    sha = hashlib.sha256((project.stacks / "cu128.toml").read_bytes()).hexdigest()
    args = []
    for i in range(n):
        report = make_report(rng, cv=measured_cv(), env_path=str(env), manifest_sha256=sha)
        fields = {k: (v(i) if callable(v) else v) for k, v in update.items()}
        path = project.root / f"{name}-{i}.json"
        path.write_text(report.model_copy(update=fields).model_dump_json())
        args += ["--run", str(path)]
    return args


def _tree(env: Path) -> str:
    return read_build_record(env).tree.sha256


def _mark_good(project: Project, *argv: str) -> Any:
    return project.run("validators", "mark-good", "cu128", *argv, "--allow-host-mismatch")


def _nothing_recorded(project: Project) -> bool:
    listed = project.run("validators", "records", "list", "--json", check=True)
    return json.loads(listed.stdout) == []


def test_the_same_report_eight_times_is_one_run(project: Project) -> None:
    env = fake_env_with_build_record(project.root / "a", "cu128")
    once = _runs(project, "r", env, n=1)
    done = _mark_good(project, *(once * DEFAULT_REPEATS))
    assert done.returncode == 1, done.stderr
    assert "run 2 is run 1 again (the same report twice)" in done.stdout + done.stderr
    assert _nothing_recorded(project)
    _mark_baseline(project)
    gated = project.run("validators", "gate", "cu128", *(once * DEFAULT_REPEATS))
    assert gated.returncode == 2, gated.stderr
    assert "the same report twice" in gated.stderr and "PASSED" not in gated.stderr


def test_env_flag_naming_another_env_than_the_runs_judged(project: Project) -> None:
    judged = fake_env_with_build_record(project.root / "a", "cu128")
    other = fake_env_with_build_record(project.root / "b", "cu128", tree="cd" * 32)
    # Reports of an older stackgate (no env_tree_sha256): compared by resolved path.
    done = _mark_good(project, *_runs(project, "r", judged), "--env", str(other))
    assert done.returncode == 1, done.stderr
    assert f"judged {judged.resolve()}, not {other.resolve()}" in done.stdout + done.stderr
    # Reports that carry the tree: compared by tree.
    runs = _runs(project, "t", judged, env_tree_sha256=_tree(judged))
    done = _mark_good(project, *runs, "--env", str(other))
    assert done.returncode == 1, done.stderr
    assert f"holds tree {_tree(other)[:16]}" in done.stdout + done.stderr
    assert _nothing_recorded(project)


def test_current_link_moved_to_a_new_build_after_the_runs(project: Project) -> None:
    first = fake_env_with_build_record(project.root / "a", "cu128")
    second = fake_env_with_build_record(project.root / "b", "cu128", tree="cd" * 32)
    current = project.root / "current"
    current.symlink_to(first)
    runs = _runs(project, "r", current, env_tree_sha256=_tree(first))
    current.unlink()
    current.symlink_to(second)  # what `builder build` does when it selects a new build
    done = _mark_good(project, *runs)
    assert done.returncode == 1, done.stderr
    assert "`current` link moved since the run" in done.stdout + done.stderr
    assert _nothing_recorded(project)
    current.unlink()
    current.symlink_to(first)
    _mark_good(project, *runs).check_returncode()  # the env the runs judged: recorded


def test_a_real_run_report_names_the_tree_of_the_env_it_judged(project: Project) -> None:
    env = fake_env_with_build_record(project.root / "a", "cu128")
    link = project.root / "current"
    link.symlink_to(env)
    done = project.run("validators", "run", "cu128", "--env", str(link), "--only", "host", "--json")
    report = json.loads(done.stdout)
    assert report["env_path"] == str(link)
    assert report["env_tree_sha256"] == _tree(env)


def test_an_env_built_for_another_stack(project: Project) -> None:
    env = fake_env_with_build_record(project.root / "a", "cu128")
    read_build_record(env).model_copy(update={"stack": "weak"}).write(env)
    done = _mark_good(project, *_runs(project, "r", env))
    assert done.returncode == 1, done.stderr
    assert "built for stack 'weak', not 'cu128'" in done.stdout + done.stderr
    assert _nothing_recorded(project)


def test_runs_from_two_hosts_are_not_repeats(project: Project) -> None:
    env = fake_env_with_build_record(project.root / "a", "cu128")

    def host(i: int) -> HostFacts:
        name = "node-a" if i % 2 else "node-b"
        return HostFacts(fingerprint=HostFingerprint(hostname=name).model_dump(mode="json"))

    runs = _runs(project, "r", env, host=host)
    done = _mark_good(project, *runs)
    assert done.returncode == 1, done.stderr
    assert "was made on another host than run 1: hostname" in done.stdout + done.stderr
    _mark_baseline(project)
    gated = project.run("validators", "gate", "cu128", *runs)
    assert gated.returncode == 2, gated.stderr
    assert "another host" in gated.stderr


HF_SHAPED = "hf_" + "Zq7" * 12  # made up, the shape of a Hugging Face token


def test_a_token_in_run_evidence_never_reaches_the_store(project: Project) -> None:
    """An engine argv in serve-bench evidence carried a token into the record (and git)."""
    env = fake_env_with_build_record(project.root / "a", "cu128")
    runs = _runs(project, "r", env)
    first = Path(runs[1])
    report = json.loads(first.read_text())
    report["results"][-1]["evidence"]["argv"] = ["sglang", "--api-key", HF_SHAPED]
    first.write_text(json.dumps(report))
    done = _mark_good(project, *runs)
    assert done.returncode == 2, done.stderr
    assert "holds secrets" in done.stderr and "evidence.argv.2" in done.stderr
    assert HF_SHAPED not in done.stdout + done.stderr
    assert _nothing_recorded(project)


def test_records_import_refuses_a_record_file_holding_a_token(project: Project) -> None:
    rid = _mark_baseline(project)
    shown = project.run("validators", "records", "show", rid, "--json", check=True)
    data = json.loads(shown.stdout)
    data = data.get("record", data)
    data["note"] = f"pushed with {HF_SHAPED}"
    data.pop("record_id")
    from validators.records.model import content_sha256

    data["record_id"] = content_sha256(data)
    folder = project.root / "incoming" / "cu128"
    folder.mkdir(parents=True)
    (folder / "x.json").write_text(json.dumps(data))
    done = project.run("validators", "records", "import", str(project.root / "incoming"))
    assert done.returncode == 2, done.stderr
    assert "x.json" in done.stderr and "note: what looks like a hf_ token" in done.stderr
    assert HF_SHAPED not in done.stdout + done.stderr


def test_runs_under_two_versions_of_the_manifest_are_not_one_candidate(project: Project) -> None:
    """Half the runs before a manifest edit, half after: mark-good said so (it compares each
    with the current file), the gate merged them into one candidate."""
    _mark_baseline(project)
    env = fake_env_with_build_record(project.root / "a", "cu128")
    runs = _runs(project, "r", env, manifest_sha256=lambda i: ("ab" if i % 2 else "cd") * 32)
    gated = project.run("validators", "gate", "cu128", *runs)
    assert gated.returncode == 2, gated.stderr
    assert "different versions of the manifest" in gated.stderr
