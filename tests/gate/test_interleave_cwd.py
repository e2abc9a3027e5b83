"""The interleaved gate survives its cwd being replaced between ABBA pairs (issue 16 follow-up).

On the lent H200 the gate ran from a checkout that the device machine re-sent (removed and
copied again) while the gate was in its second pair; every later `validators run` child
inherited a cwd that no longer existed, died in `Path.cwd()` with a bare
"[Errno 2] No such file or directory", and the gate stopped with exit 3. Here the same thing
happens on purpose, through the real CLI: a real builder env layered over a base site
(`builder build --base-site`, as on the H200), a known-good record, then `gate --interleave-with`
with 3 ABBA pairs whose cwd folder is removed and made again when pair 2 starts.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stackgate.errors import EnvironmentProblem
from tests.gate.conftest import ROOT, Project
from tests.helpers.interpreter import base_python
from tests.helpers.synthetic_stack import write_synthetic_stack
from validators.core.runs import parse_run_output

PAIRS = "3"


def _base_site(project: Project) -> str:
    """A real site-packages of the env's Python X.Y to layer over (an empty uv venv's)."""
    venv = project.root / "base-venv"
    subprocess.run(["uv", "venv", "-q", "--python", base_python(), str(venv)], check=True,
                   env=project.env)  # fmt: skip
    return str(next(venv.glob("lib/python3.*/site-packages")))


@pytest.mark.slow
def test_interleaved_gate_survives_its_cwd_replaced_between_pairs(project: Project) -> None:
    write_synthetic_stack(project.stacks, project.root, "syn", 400.0, output_len=16,
                          concurrencies=(1,))  # fmt: skip
    py = base_python()
    project.run("builder", "lock", "syn", "--python", py, check=True)
    project.run("builder", "build", "syn", "--python", py, "--base-site", _base_site(project),
                check=True)  # fmt: skip
    current = project.root / "envs" / "syn" / "current"
    assert current.is_symlink()
    ref = project.stacks / "refs" / "main.json"
    project.run("validators", "run", "syn", "--env", str(current), "--option",
                f"record_reference={ref}", check=True)  # fmt: skip
    runs = []
    for i in range(int(PAIRS)):
        done = project.run("validators", "run", "syn", "--env", str(current), "--json")
        assert done.returncode == 0, done.stderr
        (project.root / f"k{i}.json").write_text(done.stdout)
        runs += ["--run", str(project.root / f"k{i}.json")]
    project.run("validators", "mark-good", "syn", *runs, "--allow-host-mismatch", check=True)

    checkout = project.root / "checkout"  # the gate's cwd; paths given relative to it
    checkout.mkdir()
    rel_env = "../envs/syn/current"
    # the candidate named by a relative manifest path (how a candidate manifest outside
    # stacks/ is gated, e.g. benchmarks/gate_h200/nocb/): fixed at start like --env
    rel_manifest = str(Path("..") / project.stacks.name / "syn.toml")
    gate = subprocess.Popen(
        [sys.executable, "-m", "validators", "gate", rel_manifest, "--env", rel_env,
         "--interleave-with", rel_env, "--baseline", "syn", "--repeats", PAIRS,
         "--min-repeats", PAIRS, "--html", "gate.html", "--all", "--json",
         "--keep-runs", "../kept"],
        cwd=checkout,
        env={**project.env, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert gate.stderr is not None
    seen = []
    for line in gate.stderr:
        seen.append(line)
        if line.startswith("pair 2/"):
            shutil.rmtree(checkout)  # what the device did: the checkout re-sent under the gate
            checkout.mkdir()
            break
    stdout, rest = gate.communicate(timeout=900)
    stderr = "".join(seen) + rest
    assert any(line.startswith("pair 2/") for line in seen), stderr
    assert "gave no report" not in stderr, stderr
    # a verdict, not exit 3; PASS or REFUSED: on a loaded 2-core host TTFT-like metrics can
    # refuse even equal envs (benchmarks/gate/results/gate_interleaved_cpu/README.md)
    assert gate.returncode in (0, 1), stderr
    payload = json.loads(stdout)
    assert "re-measured interleaved" in payload["baseline_numbers"]
    assert f"pair {PAIRS}/{PAIRS}: baseline" in stderr
    assert (checkout / "gate.html").is_file()  # written by name into the new folder
    # every child's report and stderr kept, named by pair and side, outside the replaced cwd
    kept = project.root / "kept"
    names = sorted(p.name for p in kept.iterdir())
    assert names == sorted(
        f"pair-{i:02d}-{side}.{ext}"
        for i in range(1, int(PAIRS) + 1)
        for side in ("baseline", "candidate")
        for ext in ("json", "err")
    )
    for report in kept.glob("*.json"):
        assert json.loads(report.read_text())["stack"] == "syn"
    assert all(err.read_text().endswith("[exit 0]\n") for err in kept.glob("*.err"))


def test_a_run_without_report_keeps_its_stderr_tail_and_names_the_run() -> None:
    stderr = "".join(f"line {i}\n" for i in range(40)) + "error: [Errno 2] No such file\n"
    with pytest.raises(EnvironmentProblem) as caught:
        parse_run_output("", stderr, 3, what="pair 2/4, baseline run")
    exc = caught.value
    assert "(pair 2/4, baseline run)" in exc.message
    assert "exit 3" in exc.message
    assert exc.details[0] == "its stderr, last 15 of 41 lines:"
    assert exc.details[-1] == "error: [Errno 2] No such file"
    assert exc.details[1] == "line 26"


def test_a_run_with_nothing_on_either_stream_says_so() -> None:
    with pytest.raises(EnvironmentProblem) as caught:
        parse_run_output("not json", "", 137)
    assert caught.value.details == ["its stdout, last 1 of 1 lines:", "not json"]
    with pytest.raises(EnvironmentProblem) as caught:
        parse_run_output("", "", 137)
    assert caught.value.details == ["its stdout: empty"]
