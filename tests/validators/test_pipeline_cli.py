"""The pipeline (order, stop at the first failing group, --keep-going, missing groups) and the
CLI (exit codes, JSON/JUnit reports, bad input without tracebacks), run as real processes."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from stackgate.manifest.loading import load_stack
from tests.validators import elf_env
from validators.core.context import GroupRunner, RunContext
from validators.core.pipeline import load_group, run_pipeline
from validators.core.results import Report, Result

ROOT = Path(__file__).resolve().parents[2]


# One real check id per group (validators.core.checks): a stand-in group emits what a real one can.
ONE_CHECK = {"host": "host.driver", "static": "static.dists.pins", "runtime": "runtime.torch",
             "serve-bench": "serve-bench.launch"}  # fmt: skip


def _group(name: str, status: str, calls: list[str]) -> GroupRunner:
    def run(ctx: RunContext) -> list[Result]:
        calls.append(name)
        return [Result(check=ONE_CHECK[name], group=name, status=status, reason="because")]  # type: ignore[arg-type]

    return run


def test_cheapest_first_and_stop_at_first_failing_group() -> None:
    calls: list[str] = []
    statuses = {"host": "PASS", "static": "FAIL", "runtime": "PASS", "serve-bench": "PASS"}
    ctx = RunContext(stack=load_stack("cu130"))
    report = run_pipeline(
        ctx,
        ["serve-bench", "runtime", "static", "host"],
        loader=lambda g: _group(g, statuses[g], calls),
    )
    assert calls == ["host", "static"]
    assert report.groups_run == ["host", "static"]
    assert set(report.groups_skipped) == {"runtime", "serve-bench"}
    assert "static' failed" in report.groups_skipped["runtime"]
    assert report.failed


def test_keep_going_runs_everything() -> None:
    calls: list[str] = []
    ctx = RunContext(stack=load_stack("cu130"), keep_going=True)
    report = run_pipeline(
        ctx, ["host", "static", "runtime"], loader=lambda g: _group(g, "FAIL", calls)
    )
    assert calls == ["host", "static", "runtime"]
    assert report.groups_skipped == {}


def test_absent_group_and_crashing_group_are_errors() -> None:
    ctx = RunContext(stack=load_stack("cu130"), keep_going=True)

    def crash(ctx: RunContext) -> list[Result]:
        raise RuntimeError("boom")

    def loader(g: str) -> GroupRunner | str:
        return "serve-bench not available (test)" if g == "serve-bench" else crash

    report = run_pipeline(ctx, ["static", "serve-bench"], loader=loader)
    by = {r.check: r for r in report.results}
    assert by["serve-bench.available"].status == "ERROR"
    assert by["static.crashed"].reason == "RuntimeError: boom"


def test_load_group_real_modules() -> None:
    for name in ("host", "static", "runtime"):
        assert callable(load_group(name))


def _cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "validators", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=240,
    )


def test_static_cli_on_a_failing_env_json_and_exit_1(tmp_path: Path) -> None:
    site = elf_env.new_env(tmp_path / "env")
    elf_env.versioned_pair(site, tmp_path / "build", old_provider=True)
    done = _cli("static", "--env", str(tmp_path / "env"), "--targets", "12.0a", "--json")
    assert done.returncode == 1, done.stderr
    payload = json.loads(done.stdout)
    by = {r["check"]: r for r in payload["results"]}
    assert by["static.abi.consumer"]["status"] == "FAIL"
    assert "Traceback" not in done.stderr


def test_run_cli_report_and_junit(tmp_path: Path) -> None:
    site = elf_env.new_env(tmp_path / "env")
    elf_env.versioned_pair(site, tmp_path / "build", old_provider=False)
    junit = tmp_path / "junit.xml"
    done = _cli(
        "run",
        "cu130",
        "--env",
        str(tmp_path / "env"),
        "--only",
        "host",
        "static",
        "--keep-going",
        "--json",
        "--junit",
        str(junit),
    )
    report = Report.model_validate(json.loads(done.stdout))
    assert report.schema_version == 1
    assert report.groups_run == ["host", "static"]
    # the lock is absent and the pins are not installed here: pins FAIL -> exit 1
    assert done.returncode == 1
    suites = {s.get("name"): s for s in ET.parse(junit).getroot()}
    assert set(suites) == {"host", "static"}
    assert int(suites["static"].get("failures") or 0) >= 1


def test_bad_inputs_exit_2_without_traceback(tmp_path: Path) -> None:
    missing = _cli("static", "--env", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "no such directory" in missing.stderr
    (tmp_path / "notenv").mkdir()
    notenv = _cli("static", "--env", str(tmp_path / "notenv"), "--json")
    assert notenv.returncode == 2
    assert json.loads(notenv.stdout)["results"][0]["reason"].endswith("(not a Python environment)")
    unknown = _cli("run", "no-such-stack", "--env", str(tmp_path))
    assert unknown.returncode == 2
    for done in (missing, notenv, unknown):
        assert "Traceback" not in done.stderr


def test_preflight_cli_on_this_host() -> None:
    done = _cli("preflight", "cu130", "--json")
    assert "Traceback" not in done.stderr
    by = {r["check"]: r for r in json.loads(done.stdout)["results"]}
    assert {"host.driver", "host.gpus", "host.memory", "host.disk", "host.nvcc"} <= set(by)
    # a FAIL: 1; else 3 (INCOMPLETE) where the driver or GPU checks that decide were skipped,
    # as on this host; else 0
    failed = any(r["status"] == "FAIL" for r in by.values())
    skipped = by["host.driver"]["status"] == "SKIP" or by["host.gpus"]["status"] == "SKIP"
    assert done.returncode == (1 if failed else 3 if skipped else 0), done.stderr[-2000:]


def test_accepted_findings_become_skips_with_both_reasons() -> None:
    loaded = load_stack("cu130")
    validation = loaded.manifest.validation.model_copy(
        update={"accepted_findings": {"static.dists.pins": "torchao's C++ ops are unused here"}}
    )
    manifest = loaded.manifest.model_copy(update={"validation": validation})
    ctx = RunContext(stack=type(loaded)(loaded.path, manifest, loaded.raw))
    calls: list[str] = []
    report = run_pipeline(ctx, ["static", "runtime"], loader=lambda g: _group(g, "FAIL", calls))
    by = {r.check: r for r in report.results}
    assert by["static.dists.pins"].status == "SKIP"
    assert "torchao's C++ ops are unused here -- finding: because" in by["static.dists.pins"].reason
    # an accepted FAIL does not stop the run; an unaccepted one still does
    assert calls == ["static", "runtime"]
    assert by["runtime.torch"].status == "FAIL"
