"""The builder's own CPU in a warm build with the cyclic GC paused (as shipped) and with it
running (builder.venv.build.collector_paused replaced by a no-op), alternating ABAB in one run.

CPU, not wall: on the shared host the wall time of one build moves 2x with other jobs, while
the builder's own CPU seconds (getrusage of this process: the early reader, the tree hash, the
RECORD check, the listing) move less. uv's CPU (the children) is reported beside.

Usage: python benchmarks/builder/gc_pause_cpu.py [STACK] [--pairs N] [--out FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _cpu(who: int) -> float:
    used = resource.getrusage(who)
    return used.ru_utime + used.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("stack", nargs="?", default="cu128")
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    import builder.venv.build as build_module
    from stackgate.loading import load_stack

    shipped = build_module.collector_paused
    loaded = load_stack(args.stack)
    runs: list[dict[str, object]] = []
    for i in range(2 * args.pairs):
        paused = i % 2 == 0
        build_module.collector_paused = shipped if paused else contextlib.nullcontext  # type: ignore[assignment]
        root = Path(tempfile.mkdtemp(prefix="sg-gc-pause-"))
        try:
            own, kids, started = (
                _cpu(resource.RUSAGE_SELF),
                _cpu(resource.RUSAGE_CHILDREN),
                time.monotonic(),
            )
            out = build_module.build_env(loaded, build_module.BuildOptions(venv_root=root))
            entry = {
                "gc": "paused" if paused else "running",
                "wall_s": round(time.monotonic() - started, 2),
                "builder_cpu_s": round(_cpu(resource.RUSAGE_SELF) - own, 2),
                "uv_cpu_s": round(_cpu(resource.RUSAGE_CHILDREN) - kids, 2),
                "install_s": out.record.timings_s.get("install"),
                "tree": out.record.tree.sha256[:12],
            }
        finally:
            shutil.rmtree(root, ignore_errors=True)
        runs.append(entry)
        print(json.dumps(entry), flush=True)
    build_module.collector_paused = shipped  # type: ignore[assignment]
    cpu = {
        kind: [float(r["builder_cpu_s"]) for r in runs if r["gc"] == kind]  # type: ignore[arg-type]
        for kind in ("paused", "running")
    }
    result = {
        "benchmark": "gc_pause_cpu",
        "stack": args.stack,
        "runs": runs,
        "builder_cpu_ratio_paused_over_running": round(
            statistics.median(cpu["paused"]) / statistics.median(cpu["running"]), 3
        ),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    print(
        f"builder CPU, GC paused / GC running = {result['builder_cpu_ratio_paused_over_running']}"
        f" (medians {statistics.median(cpu['paused']):.2f} / {statistics.median(cpu['running']):.2f}"
        f" s over {args.pairs} pair(s))"
    )
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
