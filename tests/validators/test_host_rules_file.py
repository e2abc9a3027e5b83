"""The host group on a stack in a stacks folder of its own (STACKGATE_STACKS_DIR, as the
gate's synthetic-server tests use): the old code looked for rules.toml only there and crashed
the whole group ("host.crashed: ManifestError: 1 problem in the manifest") when it was
absent. A folder without a rules file gets the checkout's rules; a broken rules file is one
ERROR naming it, never a crash of the group. Real CLI, real host probes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.synthetic_stack import write_synthetic_stack

ROOT = Path(__file__).resolve().parents[2]


def _host_run(
    stacks: Path, work: Path, manifest: str, codes: tuple[int, ...] = (0, 1, 3)
) -> dict[str, object]:
    """The host group's JSON report; it may fail checks (1) or be undecided where the driver
    or GPUs were skipped (INCOMPLETE, 3), not crash."""
    env = {**os.environ, "STACKGATE_STACKS_DIR": str(stacks), "NO_COLOR": "1"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "validators",
            "run",
            manifest,
            "--only",
            "host",
            "--env",
            sys.prefix,
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=work,
        timeout=120,
        check=False,
    )
    assert done.returncode in codes, done.stderr
    report: dict[str, object] = json.loads(done.stdout)
    report["exit"] = done.returncode
    return report


def _results(report: dict[str, object]) -> dict[str, dict[str, object]]:
    return {r["check"]: r for r in report["results"]}  # type: ignore[attr-defined,index]


def test_a_stacks_folder_without_rules_uses_the_checkouts(tmp_path: Path) -> None:
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    write_synthetic_stack(stacks, tmp_path / "work", "syn", 400.0)
    for manifest in ("syn", "stacks/syn.toml"):  # by name, and a path relative to the cwd
        report = _host_run(stacks, tmp_path, manifest)
        results = _results(report)
        assert "host.crashed" not in results, results["host.crashed"]
        assert {"host.driver", "host.memory", "host.nvcc"} <= set(results)
        statuses = {r["status"] for r in results.values()}
        skipped = {results[c]["status"] for c in ("host.driver", "host.gpus")} & {"SKIP"}
        want = 1 if statuses & {"FAIL"} else 3 if skipped or statuses & {"ERROR"} else 0
        assert report["exit"] == want, (report["exit"], statuses)
        fired = [c for c in results if c.startswith("host.rule.")]
        if not fired:
            rules = results["host.rules"]
            assert rules["status"] == "PASS"
            assert rules["evidence"] == {"rules": str(ROOT / "stacks" / "rules.toml")}


def test_a_broken_rules_file_is_one_error_naming_it(tmp_path: Path) -> None:
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    write_synthetic_stack(stacks, tmp_path / "work", "syn", 400.0)
    (stacks / "rules.toml").write_text("[[rules]]\nid = 'x'\nnot toml at all\n")
    report = _host_run(stacks, tmp_path, "syn", codes=(3,))  # an ERROR result: exit 3
    results = _results(report)
    assert "host.crashed" not in results, results["host.crashed"]
    assert results["host.rules"]["status"] == "ERROR"
    assert "rules.toml" in str(results["host.rules"]["reason"])
    assert "invalid TOML" in str(results["host.rules"]["reason"])
    assert {"host.driver", "host.memory", "host.nvcc"} <= set(results)
