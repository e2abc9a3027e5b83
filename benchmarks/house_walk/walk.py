"""The three walks issue 28 asks about, on real commands in a scratch project:
`builder build` (the tiny two-wheel stack from a local index, into a fresh venv root),
`validators static --lock` (that stack's lock) and `validators gate` (cu128 candidate runs
against a baseline made by mark-good, as tests/gate/test_cli.py does), and a fourth: the gate
of that baseline's exported record file against its own id prefix (both sides resolved).

Usage: python benchmarks/house_walk/walk.py RESULTS.json [--measured]   (from the checkout root)
--measured: the gate's run reports carry typed measurements, as the serve-bench group writes
them since issue 28 §1 (without it: as reports before measurements, which a tree before
that change can read too).
Each walk runs in its own `python benchmarks/house_walk/trace.py`; see trace.py for how
modules and returns are counted.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.helpers.build_records import write_hashed_sample_env  # noqa: E402
from tests.helpers.interpreter import base_python  # noqa: E402
from tests.helpers.project_env import isolated_env  # noqa: E402
from tests.helpers.synth_reports import make_report, measured_cv  # noqa: E402
from tests.helpers.tiny_stack import tiny_index, tiny_manifest  # noqa: E402

TRACE = Path(__file__).with_name("trace.py")


def _runs(work: Path, name: str, env: Path, sha: str, seed: int, measured: bool) -> list[str]:
    rng = np.random.default_rng(seed)
    args: list[str] = []
    for i in range(8):
        report = make_report(
            rng,
            stack="cu128",
            cv=measured_cv(),
            env_path=str(env),
            manifest_sha256=sha,
            measured=measured,
        )
        path = work / f"{name}-{i}.json"
        path.write_text(report.model_dump_json())
        args += ["--run", str(path)]
    return args


def main(out: Path, measured: bool) -> int:
    with tempfile.TemporaryDirectory(prefix="house-walk-") as tmp:
        work = Path(tmp)
        stacks = work / "stacks"
        stacks.mkdir()
        for name in ("cu128.toml", "rules.toml"):
            (stacks / name).write_bytes((ROOT / "stacks" / name).read_bytes())
        url = tiny_index(work)
        (stacks / "tiny.toml").write_text(
            tiny_manifest("tiny", url, description="tiny", required=("static",))
        )
        env = isolated_env(work, stacks)

        def py(*argv: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, *argv],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                check=False,
                timeout=600,
            )

        def traced(label: str, *argv: str) -> dict[str, object]:
            path = work / f"{label}.json"
            done = py(str(TRACE), str(path), *argv)
            if not path.exists():
                raise SystemExit(f"{label}: no trace\n{done.stderr[-3000:]}")
            result: dict[str, object] = json.loads(path.read_text())
            print(
                f"{label}: exit {result['exit']}, entered {result['entered']}, "
                f"returns {result['returns']}",
                file=sys.stderr,
            )
            return result

        locked = py("-m", "builder", "lock", "tiny", "--python", base_python())
        assert locked.returncode == 0, locked.stderr
        walks = {
            "builder build": traced(
                "build", "builder", "build", "tiny", "--python", base_python(), "--json"
            ),
        }
        lock = next(
            p
            for p in [stacks / "tiny.lock", stacks / "tiny" / "uv.lock", *stacks.rglob("*.lock")]
            if p.exists()
        )
        walks["validators static --lock"] = traced(
            "static",
            "validators",
            "static",
            "--lock",
            str(lock),
            "--cache",
            str(work / "cache"),
            "--json",
        )
        sha = hashlib.sha256((stacks / "cu128.toml").read_bytes()).hexdigest()
        base_env = write_hashed_sample_env(work / "base", "cu128", seed="ab" * 32)
        marked = py(
            "-m",
            "validators",
            "mark-good",
            "cu128",
            *_runs(work, "base", base_env, sha, 11, measured),
            "--allow-host-mismatch",
            "--export",
            str(work / "exported"),
            "--json",
        )
        assert marked.returncode == 0, marked.stderr
        record_id = str(json.loads(marked.stdout)["record_id"])
        exported = next((work / "exported").rglob("*.json"))
        cand_env = write_hashed_sample_env(work / "cand", "cu128", seed="ab" * 32)
        walks["validators gate"] = traced(
            "gate",
            "validators",
            "gate",
            "cu128",
            *_runs(work, "cand", cand_env, sha, 13, measured),
            "--json",
        )
        # a record against a record: the candidate by file, the baseline by id prefix
        walks["validators gate (record file vs id)"] = traced(
            "gate-records",
            "validators",
            "gate",
            str(exported),
            "--baseline",
            record_id[:12],
            "--json",
        )
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        out.write_text(
            json.dumps({"commit": commit, "measured": measured, "walks": walks}, indent=2) + "\n"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1]), "--measured" in sys.argv[2:]))
