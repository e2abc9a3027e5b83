"""Records at fleet scale: import N record files into a fresh store, then list it.

    python benchmarks/records/records_scale.py --records 1000 --records 10000 --out results.json

Makes N synthetic known-good records (5 stacks, ~16 KB of JSON each, like a serve-bench
record with 8 runs), writes them as files the way `records export` lays them out, then times
the user-facing commands as subprocesses (interpreter start included), each with its wall and
CPU seconds and its own peak memory (GNU time's %M):

- `records import --dir FOLDER --store NEW` into an empty store;
- `records list --store S` (what the command shows by default);
- `records list --store S --limit 50 --offset N/2` (a page in the middle), where supported;
- `records verify --store S` (reads every record once).

It runs against whatever code is checked out, so the same script measures before and after a
change. Synthetic data: the numbers are not meant to look like a GPU, only to have the size
and shape (keys, nesting) of real records.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from validators.core.results import Result  # noqa: E402
from validators.records.model import BuildFacts, GpuInfo, HostFingerprint, Record  # noqa: E402

STACKS = ("cu128", "cu130", "cu130-fi", "cu128-eagle", "cu130-nightly")
_FIELDS = ("output_throughput", "mean_ttft_ms", "p99_ttft_ms", "mean_itl_ms", "p99_itl_ms")


def synthetic_record(i: int, rng: np.random.Generator) -> Record:
    """One record of ~16 KB: 8 runs x 5 fields x 6 concurrency levels, 30 checks."""
    created = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=i)
    metrics = {
        f"serve-bench.sweep/{f}@c{c}": [round(float(v), 3) for v in rng.uniform(10, 1000, 8)]
        for f in _FIELDS
        for c in (1, 4, 16, 64, 128, 256)
    }
    checks = [
        Result(
            check=f"static.abi.pkg{j}.mod",
            group="static",
            status="PASS",
            reason=f"all {100 + j} undefined symbols resolved",
            duration_s=0.01,
        )
        for j in range(30)
    ]
    return Record(
        kind="known-good",
        stack=STACKS[i % len(STACKS)],
        created_at=created.isoformat(timespec="seconds"),
        created_by="bench@fleet",
        stackgate_version="0.1.0",
        note=f"node{i:05d}",
        manifest={"name": STACKS[i % len(STACKS)], "python": "3.12"},
        build=BuildFacts(env_tree_sha256=f"{i:064x}", packages={"torch": "2.9.1"}),
        host=HostFingerprint(
            hostname=f"node{i:05d}",
            gpu=GpuInfo(model="RTX PRO 6000", count=8, compute_capabilities=["12.0"]),
            driver="580.65",
            interconnect="pcie",
        ),
        runs=8,
        checks=checks,
        metrics=metrics,
    ).sealed()


def write_records(folder: Path, n: int) -> int:
    rng = np.random.default_rng(n)
    total = 0
    for i in range(n):
        record = synthetic_record(i, rng)
        target = folder / record.stack / f"{i:06d}-{record.short_id}.json"
        target.parent.mkdir(parents=True, exist_ok=True)
        text = record.to_json()
        target.write_text(text, encoding="utf-8")
        total += len(text)
    return total


GNU_TIME = shutil.which("time", path="/usr/bin:/bin")
_RSS_TAG = "records-scale-maxrss-kib="


def timed_rusage(argv: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Wall and CPU seconds from wait4; peak RSS from GNU time when present.

    wait4's ru_maxrss of a child starts from the parent's own peak (the forked copy), so a
    command smaller than this script would be reported at the script's size; GNU time is a
    small parent and reports the command's own peak.
    """
    measured = [GNU_TIME, "-f", f"{_RSS_TAG}%M", *argv] if GNU_TIME else argv
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(measured, cwd=ROOT, env=env, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        stdout_bytes = len(out.read())
        lines = err.read().decode(errors="replace").strip().splitlines()
    peak_kib = usage.ru_maxrss
    if lines and lines[-1].startswith(_RSS_TAG):
        peak_kib = int(lines.pop()[len(_RSS_TAG) :])
    return {
        "command": " ".join(argv[3:]),
        "rc": proc.returncode,
        "wall_s": round(wall, 3),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 3),
        "max_rss_mib": round(peak_kib / 1024, 1),
        "rss_from": "GNU time" if GNU_TIME else "wait4 (floor: this script's own peak)",
        "stdout_bytes": stdout_bytes,
        "stderr_tail": lines[-2:],
    }


def measure(n: int, workdir: Path) -> dict[str, Any]:
    folder = workdir / f"records-{n}"
    store = workdir / f"store-{n}.sqlite"
    size = write_records(folder, n)
    env = {**os.environ, "STACKGATE_STATE_DIR": str(workdir / "state"), "COLUMNS": "200"}
    cli = [sys.executable, "-m", "validators"]
    helptext = subprocess.run(
        [*cli, "records", "--help"], cwd=ROOT, env=env, capture_output=True, text=True
    ).stdout
    steps = {
        "import": timed_rusage(
            [*cli, "records", "import", "--dir", str(folder), "--store", str(store)], env
        ),
        "list_default": timed_rusage([*cli, "records", "list", "--store", str(store)], env),
    }
    if "--limit" in helptext:
        steps["list_page_middle"] = timed_rusage(
            [
                *cli,
                "records",
                "list",
                "--store",
                str(store),
                "--limit",
                "50",
                "--offset",
                str(n // 2),
            ],
            env,
        )
    steps["verify"] = timed_rusage([*cli, "records", "verify", "--store", str(store)], env)
    return {
        "records": n,
        "json_bytes_per_record": size // n,
        "store_mib": round(store.stat().st_size / (1 << 20), 1),
        "steps": steps,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, action="append", default=[])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--label", default="", help="kept in the output (e.g. before/after)")
    args = parser.parse_args()
    counts = args.records or [1000]
    git = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    results = []
    with tempfile.TemporaryDirectory(prefix="records-scale-") as tmp:
        for n in counts:
            result = measure(n, Path(tmp))
            results.append(result)
            for name, step in result["steps"].items():
                print(
                    f"n={n:>6} {name:<17} rc={step['rc']} wall {step['wall_s']:>8.2f} s  "
                    f"cpu {step['cpu_s']:>8.2f} s  peak {step['max_rss_mib']:>7.1f} MiB"
                )
    payload = {
        "label": args.label,
        "commit": git,
        "cpus": len(os.sched_getaffinity(0)),
        "results": results,
    }
    if args.out:
        args.out.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
