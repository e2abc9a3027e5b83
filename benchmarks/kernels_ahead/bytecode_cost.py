"""What byte-code at build time costs and saves, measured in one run on this host.

1. Build time: the same stack built twice from a warm uv cache into two fresh venv roots,
   with the byte-code step off and on (builder.venv.build.BuildOptions.bytecode), in the
   order off, on; the first env is removed before the second is built (disk).
2. Import time in the built env, three arms interleaved over ROUNDS rounds, each a fresh
   interpreter with PYTHONDONTWRITEBYTECODE=1 (nothing written during the measured runs):
   - none: PYTHONPYCACHEPREFIX at an empty folder: every module compiled from source, as on
     a host whose env has no byte-code (the first server start);
   - timestamp: PYTHONPYCACHEPREFIX at a folder one warm-up import filled with the default
     (timestamp) .pyc: what a second server start reads without this step;
   - checked-hash: the env's own build-time .pyc (the interpreter hashes each source to
     check it against its .pyc).
   CPU seconds (user + sys of the child) are the measure (the host is shared; wall is also
   printed); the ratios use each arm's median.

Usage: python benchmarks/kernels_ahead/bytecode_cost.py STACK --import MODULE [--import ...]
       [--base-site DIR] [--rounds N] [--out results/FILE.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from builder.venv.build import BuildOptions, build_env  # noqa: E402
from stackgate.manifest.loading import load_stack  # noqa: E402

ARMS = ("none", "timestamp", "checked-hash")


@dataclass(frozen=True)
class Built:
    env: str
    wall_s: float
    timings_s: dict[str, float]
    tree_sha256: str
    tree_files: int
    bytecode: dict[str, object] | None
    jobs: int


def _build(stack: str, root: Path, *, bytecode: bool, base_site: Path | None) -> Built:
    loaded = load_stack(stack)
    started = time.monotonic()
    outcome = build_env(
        loaded, BuildOptions(venv_root=root, base_site=base_site, bytecode=bytecode)
    )
    wall = time.monotonic() - started
    record = outcome.record
    return Built(
        env=str(outcome.env),
        wall_s=round(wall, 2),
        timings_s=record.timings_s,
        tree_sha256=record.tree.sha256,
        tree_files=record.tree.files,
        bytecode=record.bytecode.model_dump() if record.bytecode else None,
        jobs=record.job_plan.jobs,
    )


def _import_once(python: Path, modules: list[str], prefix: Path | None) -> tuple[float, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if prefix is not None:
        env["PYTHONPYCACHEPREFIX"] = str(prefix)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    subprocess.run(
        [str(python), "-c", "; ".join(f"import {m}" for m in modules)],
        env=env,
        check=True,
        timeout=600,
    )
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def _warm_timestamp(python: Path, modules: list[str], prefix: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPYCACHEPREFIX"] = str(prefix)
    subprocess.run(
        [str(python), "-c", "; ".join(f"import {m}" for m in modules)],
        env=env,
        check=True,
        timeout=600,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stack")
    parser.add_argument("--import", dest="modules", action="append", required=True)
    parser.add_argument("--base-site", type=Path)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bytecode-cost-", dir=os.environ.get("BENCH_TMP")))
    result: dict[str, object] = {"stack": args.stack, "modules": args.modules}

    def save() -> None:
        if args.out is not None:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(result, indent=2) + "\n")

    try:
        off = _build(args.stack, work / "off", bytecode=False, base_site=args.base_site)
        shutil.rmtree(work / "off")
        on = _build(args.stack, work / "on", bytecode=True, base_site=args.base_site)
        result["build_off"], result["build_on"] = asdict(off), asdict(on)
        result["load_after_builds"] = os.getloadavg()
        save()  # the build numbers stand even when an import below fails
        print(
            f"build without byte-code: {off.wall_s} s; with: {on.wall_s} s (bytecode step "
            f"{on.timings_s.get('bytecode')} s, {on.jobs} job(s)); tree hashes equal: "
            f"{off.tree_sha256 == on.tree_sha256}"
        )
        python = Path(on.env) / "bin" / "python"
        empty, stamped = work / "prefix-empty", work / "prefix-timestamp"
        empty.mkdir()
        _warm_timestamp(python, args.modules, stamped)
        samples: dict[str, list[tuple[float, float]]] = {arm: [] for arm in ARMS}
        prefixes = {"none": empty, "timestamp": stamped, "checked-hash": None}
        _import_once(python, args.modules, None)  # page cache warm for every arm alike
        for round_no in range(args.rounds):
            order = ARMS if round_no % 2 == 0 else tuple(reversed(ARMS))
            for arm in order:
                samples[arm].append(_import_once(python, args.modules, prefixes[arm]))
        assert not any(empty.iterdir()), "the no-byte-code arm wrote byte-code"
        cpu = {arm: statistics.median(c for c, _ in s) for arm, s in samples.items()}
        wall = {arm: statistics.median(w for _, w in s) for arm, s in samples.items()}
        ratios = {
            "checked-hash / none": round(cpu["checked-hash"] / cpu["none"], 3),
            "timestamp / none": round(cpu["timestamp"] / cpu["none"], 3),
            "checked-hash / timestamp": round(cpu["checked-hash"] / cpu["timestamp"], 3),
            "build on / off (wall)": round(on.wall_s / off.wall_s, 3),
        }
        result["imports"] = {
            arm: {
                "cpu_s": round(cpu[arm], 3),
                "wall_s": round(wall[arm], 3),
                "cpu_samples": [round(c, 3) for c, _ in samples[arm]],
            }
            for arm in ARMS
        }
        result["ratios"] = ratios
        result["load"] = os.getloadavg()
        for arm in ARMS:
            print(
                f"import {', '.join(args.modules)} [{arm}]: median {cpu[arm]:.3f} CPU-s, "
                f"{wall[arm]:.3f} s wall over {args.rounds} runs"
            )
        for name, value in ratios.items():
            print(f"ratio {name}: {value}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    save()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
