"""`validators bisect` end to end: real uv locks against a real index on 127.0.0.1, real
`static --lock`, real builds by the builder, real gates of the synthetic token server
(tests/bisect/index.py says which package does what). Each test asserts what was spent
(gates, builds, steps refused before install), not only the answer.

Gates compare with the baseline record's numbers (`--no-interleave`) except in the 8-unit
test, which runs the default: the baseline re-measured beside every step (ABBA). The metric
bisected is the server's output throughput (`--metric`), which the packages halve.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.bisect.conftest import BASE_PACKAGES, ROOT, BisectProject
from tests.bisect.index import NEUTRAL, PAIRS, bisect_manifest
from tests.helpers.interpreter import base_python
from tests.helpers.range_server import serve
from validators.commands.bisect import add_arguments, prepare
from validators.records.reference import Lookup
from validators.records.store import RecordStore

pytestmark = pytest.mark.slow
# Two groups (noxfile: --dist loadgroup): each worker builds the module's baseline once and
# the two halves of the ~30 gates run side by side.
FIRST = pytest.mark.xdist_group("bisect-1")
SECOND = pytest.mark.xdist_group("bisect-2")

THROUGHPUT = ("--metric", "*output_throughput*")
FAST = ("--no-interleave", *THROUGHPUT)


def _labels(data: dict[str, Any]) -> list[list[str]]:
    return [[u["label"] for u in group] for group in data["culprits"]]


def _venv(project: BisectProject, name: str) -> tuple[str, str]:
    return ("--venv-root", str(project.root / f"envs-{name}"))


@FIRST
def test_one_culprit_in_8_units_from_a_real_refused_gate_in_4_interleaved_gates(
    bisect_project: BisectProject,
) -> None:
    """The release engineer's order: `gate` refuses the upgrade (a real gate of the built
    candidate), its --json output is the bisect's --bad. The refusal is the whole candidate's verdict (no gate spent on it), so
    the bisect's own gates (interleaved ABBA) stay within ceil(log2 8) + 1 = 4, a second
    look at a SAME included."""
    p = bisect_project
    p.candidate("cand8", {**dict.fromkeys(NEUTRAL[:6], "2.0"), "slowpkg": "2.0"},
                env={"BISECT_NEUTRAL": "1"})  # fmt: skip
    p.run("builder", "build", "cand8", "--python", base_python(), check=True)
    # the gate against the record's numbers (5 runs a side); the bisect's steps are
    # interleaved, PAIRS ABBA pairs each (the fewest whose sign flips can reach the 1% goal)
    refused = p.run("validators", "gate", "cand8", "--baseline", "base", "--json")
    assert refused.returncode == 1, refused.stderr
    gate_json = p.root / "cand8-gate.json"
    gate_json.write_text(refused.stdout)
    assert json.loads(refused.stdout)["candidate"].startswith("cand8@")
    code, data, err = p.bisect(str(gate_json), "--search", "binary", *THROUGHPUT, *_venv(p, "8"),
                               "--repeats", str(PAIRS), "--html", str(p.root / "cand8.html"))  # fmt: skip
    assert code == 0, err
    assert _labels(data) == [["slowpkg 1.0 -> 2.0"]]
    assert data["confidence"][0] >= 0.5
    # 7 packages + the serving profile's new environment variable: 8 units
    assert len(data["units"]) == 8
    assert any(u["label"].startswith("serving.main.env.BISECT_NEUTRAL") for u in data["units"])
    counts = data["counts"]
    first = data["steps"][0]
    assert first["refused_gate"] == str(gate_json) and first["verdict"] == "REGRESSED"
    assert first["env"] is None  # the whole candidate is neither built nor gated again
    assert 3 <= counts["gates"] <= 4  # log2(8), + a second look when a SAME could be a miss
    assert counts["builds"] + counts["builds_reused"] == counts["gates"]
    assert counts["before_install"] == 0 and counts["cached"] == 0
    assert all(s["metrics"] for s in data["steps"])  # numbers of every gate
    assert (
        "re-measured"
        in json.loads(Path(data["steps"][1]["gate_json"]).read_text())["baseline_numbers"]
    )
    page = (p.root / "cand8.html").read_text()
    assert page.count("<tr class=") == counts["gates"] + 1 and "slowpkg 1.0 -&gt; 2.0" in page
    assert "the refused gate" in page
    assert "OK culprit(s): u" in err and "% likely)" in err
    _refusals_that_are_not_this_one(p, gate_json)


def _refusals_that_are_not_this_one(p: BisectProject, gate_json: Path) -> None:
    """Variants of the real refused gate's output: each refused before any lock or gate,
    naming the file and the field."""
    real = json.loads(gate_json.read_text())
    variants: list[tuple[str, object, int, str]] = [
        ("baseline", "base@000000000000", 2, "baseline: the gate compared with base@0000"),
        ("versions", [{"key": "slowpkg", "kind": "changed", "a": "1.0", "b": "3.0"}], 2,
         "versions: the gate measured another candidate"),
        ("passed", True, 2, "ok: False but passed: True"),
        ("metrics", "none", 2, "not a gate's --json output"),
    ]  # fmt: skip
    for field, value, code, words in variants:
        changed = p.root / f"gate-{field}.json"
        changed.write_text(json.dumps({**real, field: value}))
        done = p.run("validators", "bisect", "--good", "base", "--bad", str(changed))
        assert done.returncode == code and str(changed) in done.stderr, (field, done.stderr)
        assert words in done.stderr, (field, done.stderr)
    passed = p.root / "gate-passed-ok.json"
    passed.write_text(json.dumps({**real, "ok": True, "passed": True, "reasons": []}))
    done = p.run("validators", "bisect", "--good", "base", "--bad", str(passed))
    assert done.returncode == 1 and "nothing to bisect" in done.stderr, done.stderr
    # junk, and JSON nested 5,000 deep (was a RecursionError traceback), or with a key twice
    for text in ("[1, 2]", "{not json", "[" * 5000 + "]" * 5000, '{"a": 1, "a": 2}'):
        (p.root / "gate-junk.json").write_text(text)
        done = p.run(
            "validators", "bisect", "--good", "base", "--bad", str(p.root / "gate-junk.json")
        )
        assert done.returncode == 2 and "gate-junk.json" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
    done = p.run("validators", "bisect", "--good", "base", "--bad", str(p.root / "absent.json"))
    assert done.returncode == 2 and "no such file" in done.stderr, done.stderr


@SECOND
def test_one_culprit_in_16_units_named_in_5_gates(bisect_project: BisectProject) -> None:
    p = bisect_project
    p.candidate("cand16", {**dict.fromkeys(NEUTRAL[:15], "2.0"), "slowtoo": "2.0"})
    code, data, err = p.bisect("cand16", "--search", "binary", *FAST, *_venv(p, "16"))
    assert code == 0, err
    assert len(data["units"]) == 16
    assert _labels(data) == [["slowtoo 1.0 -> 2.0"]]
    assert data["counts"]["gates"] == 5
    assert data["counts"]["builds"] == 5


@SECOND
def test_two_units_that_regress_only_together_are_both_named(
    bisect_project: BisectProject,
) -> None:
    p = bisect_project
    p.candidate("duo", {"duoa": "2.0", "duob": "2.0", "n01": "2.0", "n02": "2.0"})
    code, data, err = p.bisect("duo", *FAST, *_venv(p, "duo"))
    assert code == 0, err
    assert _labels(data) == [["duoa 1.0 -> 2.0", "duob 1.0 -> 2.0"]]
    # {duoa,duob} (regresses: the whole candidate need not be gated), {duoa}, {duob} (alone:
    # no, each measured twice before a partner is looked for), {n01,n02} (the rest: no)
    assert data["counts"]["gates"] == 6
    assert data["counts"]["builds"] == 4 and data["counts"]["builds_reused"] == 2
    verdicts = {"+".join(s["applied"]): s["verdict"] for s in data["steps"]}
    assert verdicts["u01"] == verdicts["u02"] == "SAME"


@FIRST
def test_two_independent_culprits_are_both_named(bisect_project: BisectProject) -> None:
    p = bisect_project
    p.candidate("two", {"slowpkg": "2.0", "slowtoo": "2.0", "n01": "2.0"})
    code, data, err = p.bisect("two", *FAST, *_venv(p, "two"))
    assert code == 0, err
    assert _labels(data) == [["slowpkg 1.0 -> 2.0"], ["slowtoo 1.0 -> 2.0"]]
    # {n01,slowpkg}, {n01}, {slowpkg}; the rest {n01,slowtoo} regresses: {slowtoo}
    assert data["counts"]["gates"] == 5
    assert data["counts"]["builds"] == 5


@SECOND
def test_a_forced_co_change_is_merged_with_the_reason_and_a_budget_stops_and_resumes(
    bisect_project: BisectProject,
) -> None:
    p = bisect_project
    p.candidate("coupled", {"coupled": "2.0", "partner": "2.0", "n01": "2.0", "n02": "2.0"})
    work = p.root / "work-coupled"
    args = ("--search", "binary", *FAST, *_venv(p, "coupled"), "--work", str(work))
    code, data, err = p.bisect("coupled", *args, "--max-gates", "1")
    assert code == 1, err
    assert data["status"] == "budget-spent" and data["counts"]["gates"] == 1
    assert "--max-gates 1 reached" in err
    code, data, err = p.bisect("coupled", *args)
    assert code == 0, err
    (culprit,) = data["culprits"]
    assert [u["label"] for u in culprit] == ["coupled 1.0 -> 2.0, partner 1.0 -> 2.0"]
    why = culprit[0]["merged_because"]
    assert "needs partner 1.0 -> 2.0" in why and "partner" in why.split(":", 1)[1], why
    assert len(data["units"]) == 3
    # the resumed run: {coupled+partner, n01} from the state file, one new gate
    assert data["counts"]["cached"] == 1
    assert data["counts"]["gates"] == 1 and data["counts"]["builds"] == 1


@FIRST
def test_a_culprit_that_cannot_load_is_found_before_install_without_a_build(
    bisect_project: BisectProject,
) -> None:
    p = bisect_project
    p.candidate("broken", {"brokenpkg": "2.0", "n01": "2.0", "n02": "2.0"})
    code, data, err = p.bisect("broken", "--search", "binary", *FAST, *_venv(p, "broken"))
    assert code == 0, err
    assert _labels(data) == [["brokenpkg 1.0 -> 2.0"]]
    counts = data["counts"]
    assert counts["before_install"] == 2  # {brokenpkg, n01} and {brokenpkg}
    assert counts["builds"] == 0 and counts["gates"] == 0
    assert not (p.root / "envs-broken").exists() or not any((p.root / "envs-broken").iterdir())
    assert "bisect_missing_symbol" in data["steps"][0]["reasons"][0]


@SECOND
def test_a_flaky_equal_candidate_has_nothing_to_bisect(bisect_project: BisectProject) -> None:
    p = bisect_project
    p.candidate("flaky", {"jitter": "2.0", "n01": "2.0"})
    code, data, err = p.bisect("flaky", *FAST, *_venv(p, "flaky"))
    assert code == 1, err
    assert data["status"] == "no-regression" and data["culprits"] == []
    # {jitter}, then the whole candidate: its pass contradicts the gate that started the
    # bisect, so it is measured a second time (same env) before nothing is named
    assert data["counts"]["gates"] == 3 and data["counts"]["builds"] == 2
    steps = [(s["applied"], s["attempt"], s["verdict"]) for s in data["steps"]]
    assert steps == [(["u01"], 1, "SAME"), (["u01", "u02"], 1, "SAME"), (["u01", "u02"], 2, "SAME")]
    assert data["counts"]["builds_reused"] == 1
    assert "nothing to bisect" in err


@SECOND
def test_a_killed_bisect_repeats_no_finished_build_or_gate(bisect_project: BisectProject) -> None:
    p = bisect_project
    p.candidate("killed", {"n01": "2.0", "n02": "2.0", "n03": "2.0", "slowpkg": "2.0"})
    work = p.root / "work-killed"
    argv = [sys.executable, "-m", "validators", "bisect", "--good", "base", "--bad", "killed",
            "--json", "--python", base_python(), "--search", "binary", *FAST,
            *_venv(p, "killed"), "--work", str(work)]  # fmt: skip
    seen = []
    with subprocess.Popen(argv, cwd=ROOT, env=p.env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, start_new_session=True) as child:  # fmt: skip
        assert child.stderr is not None
        for line in child.stderr:
            seen.append(line)
            first_done = any(
                x.startswith("step 1: u") and x.rstrip().endswith("SAME") for x in seen
            )
            if first_done and line.startswith("validation run 1/"):
                os.killpg(child.pid, signal.SIGKILL)  # the second gate is under way
                break
        child.wait(timeout=600)
    assert child.returncode == -signal.SIGKILL, "".join(seen)
    _stop_orphaned_servers(p.root / "envs-killed")
    steps = json.loads((work / "steps.json").read_text())["steps"]
    assert len(steps) == 1  # the first step's gate ({n01,n02}: SAME) had finished
    code, data, err = p.bisect("killed", "--search", "binary", *FAST, *_venv(p, "killed"),
                               "--work", str(work))  # fmt: skip
    assert code == 0, err
    assert _labels(data) == [["slowpkg 1.0 -> 2.0"]]
    counts = data["counts"]
    assert counts["cached"] == 1  # step 1 from the state file: not gated again
    assert counts["gates"] == 2  # the interrupted step 2, then step 3
    assert counts["builds_reused"] == 1  # step 2's env, built before the kill
    assert counts["builds"] == 1  # step 3's


def _stop_orphaned_servers(envs: Path) -> None:
    """The killed gate's synthetic server: serve-bench starts it in its own session (so that
    teardown can signal its group), so the SIGKILL of the bisect's group does not reach it."""
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if any(str(envs) in part for part in cmdline) and "--rate-plugins" in cmdline:
            proc.terminate()
            proc.wait(timeout=30)


@FIRST
def test_an_index_that_cannot_be_reached_exits_3(bisect_project: BisectProject) -> None:
    """The candidate's own index (another real server on 127.0.0.1) is gone when the bisect
    locks its first step: exit 3 naming the index, no gate, no build."""
    p = bisect_project
    with serve(p.root / "served") as mirror:
        url = f"http://127.0.0.1:{mirror.server_port}/simple"
        changes = {**BASE_PACKAGES, "slowpkg": "2.0", "n01": "2.0"}
        (p.stacks / "gone.toml").write_text(bisect_manifest("gone", url, changes, index="mirror"))
        p.run("builder", "lock", "gone", "--python", base_python(), check=True)
    done = p.run("validators", "bisect", "--good", "base", "--bad", "gone", "--json",
                 "--python", base_python(), *_venv(p, "gone"))  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert "index 'mirror'" in done.stderr and url in done.stderr, done.stderr
    assert "cannot be reached" in done.stderr
    assert not (p.root / "envs-gone").exists()


@FIRST
def test_bad_input_exits_2_naming_it(bisect_project: BisectProject) -> None:
    p = bisect_project
    done = p.run("validators", "bisect", "--good", "base", "--bad", "no-such-stack")
    assert done.returncode == 2 and "unknown stack 'no-such-stack'" in done.stderr
    done = p.run("validators", "bisect", "--good", "base", "--bad", "base")
    assert done.returncode == 2 and "do not differ" in done.stderr
    done = p.run("validators", "bisect", "--good", "base", "--bad", "base", "--max-gates", "0")
    assert done.returncode == 2 and "--max-gates" in done.stderr


@FIRST
def test_the_setup_reads_each_manifest_and_record_once(
    bisect_project: BisectProject, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The baseline's manifest is asked for twice (its side of the bisect, its stack's
    [validation.gate]) and read once, like every other manifest and record (the command's
    Lookup counts them)."""
    p = bisect_project
    for key, value in p.env.items():
        if key.startswith("STACKGATE_"):
            monkeypatch.setenv(key, value)
    p.candidate("once", {"slowpkg": "2.0", "n01": "2.0"})
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--good", "base", "--bad", "once", "--python", base_python()])
    with RecordStore.open(None, read_only=True) as store:
        lookup = Lookup(store)
        bisect, units, refusal = prepare(args, lookup)
    base = f"stack {(p.stacks / 'base.toml').resolve()}"
    assert lookup.counts[base] == 2 and lookup.loads[base] == 1, lookup.counts
    assert all(n == 1 for n in lookup.loads.values()), lookup.loads
    assert len(lookup.loads) == 3  # the baseline's manifest, the candidate's, the record
    assert [u.label for u in units] == ["n01 1.0 -> 2.0", "slowpkg 1.0 -> 2.0"]
    assert refusal is None and bisect.sides.cand.manifest.name == "once"
