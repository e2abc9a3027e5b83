"""What the compatibility check adds to a warm `builder lock` (issue 27: <= 10%), per shipped
stack, in one run: `builder lock STACK --locks-dir COPY` of the committed lock (uv's cache
warm: the lock does not change) with --no-compat, and with the check

- `cached`: the lock's verdict is in the cache (stackgate.lock.torch_abi.cached_lock: no child);
- `same binaries`: the verdict by the lock's bytes cleared, the one by its binary wheels kept:
  a re-lock that moved only pure-Python packages (the child finds it by the binaries);
- `facts warm`: both verdicts cleared, the wheels' facts cached: what a lock whose binary
  wheels changed pays when they are known (the child `validators compat --lock` runs the check);
- `first`: the first run with the check on this cache (its wheels' facts as the cache has them).

Rounds alternate off / cached / same binaries / facts-warm so a drift in load hits all alike.
Each row carries the load average (1 min) before and after the stack's rounds and the CPU
time (user+sys) of every `builder lock` process, its children included, beside its wall time.
Bytecode writing is left on (a user's Python writes .pyc files; the agents' shell sets
PYTHONDONTWRITEBYTECODE=1, which makes every child compile its imports: ~2 s each here).

    python benchmarks/compat/compat_lock_overhead.py --cache /tmp/x --out results.json cu128 ...
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
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)  # waited-for children and theirs
    return r.ru_utime + r.ru_stime


def _lock(
    stack: str, locks: Path, env: dict[str, str], *extra: str, cpu: list[float] | None = None
) -> tuple[float, str]:
    """Wall seconds and the compat line of one `builder lock`; its CPU seconds (user+sys,
    children included) appended to `cpu`."""
    argv = [sys.executable, "-m", "builder", "lock", f"stacks/{stack}.toml"]
    argv += ["--locks-dir", str(locks), *extra]
    t, c = time.perf_counter(), _children_cpu()
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - t
    if cpu is not None:
        cpu.append(_children_cpu() - c)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)}: exit {done.returncode}\n{done.stderr[-3000:]}")
    line = next((x for x in done.stderr.splitlines() if "compat:" in x), "")
    return seconds, line.strip()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("stacks", nargs="+")
    parser.add_argument("--cache", type=Path, required=True, help="STACKGATE_CACHE for the runs")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["STACKGATE_CACHE"] = str(args.cache)
    out: dict[str, object] = {"rounds": args.rounds, "stacks": {}}
    for stack in args.stacks:
        load_before = os.getloadavg()[0]
        with tempfile.TemporaryDirectory(prefix="compat27-locks-") as tmp:
            locks = Path(tmp) / "locks"
            shutil.copytree(ROOT / "stacks" / "locks", locks)
            _lock(stack, locks, env, "--no-compat")  # uv's cache warm for this stack
            first, first_line = _lock(stack, locks, env)
            times: dict[str, list[float]] = {
                "off": [], "cached": [], "same_binaries": [], "facts_warm": []
            }  # fmt: skip
            cpu: dict[str, list[float]] = {k: [] for k in times}
            lines: dict[str, str] = {}
            for _ in range(args.rounds):
                times["off"].append(_lock(stack, locks, env, "--no-compat", cpu=cpu["off"])[0])
                seconds, lines["cached"] = _lock(stack, locks, env, cpu=cpu["cached"])
                times["cached"].append(seconds)
                compat = args.cache / "lockcheck" / "compat"
                shutil.rmtree(compat / "locks", ignore_errors=True)
                seconds, lines["same_binaries"] = _lock(stack, locks, env, cpu=cpu["same_binaries"])
                times["same_binaries"].append(seconds)
                shutil.rmtree(compat / "locks", ignore_errors=True)
                shutil.rmtree(compat / "locks-by-binaries", ignore_errors=True)
                seconds, lines["facts_warm"] = _lock(stack, locks, env, cpu=cpu["facts_warm"])
                times["facts_warm"].append(seconds)
        off = statistics.median(times["off"])
        row = {
            "first_s": round(first, 2),
            "first_line": first_line,
            "median_s": {k: round(statistics.median(v), 2) for k, v in times.items()},
            "all_s": {k: [round(x, 2) for x in v] for k, v in times.items()},
            "added_pct": {
                k: round(100 * (statistics.median(v) - off) / off, 1)
                for k, v in times.items()
                if k != "off"
            },
            "cpu_median_s": {k: round(statistics.median(v), 2) for k, v in cpu.items()},
            "cpu_all_s": {k: [round(x, 2) for x in v] for k, v in cpu.items()},
            "lines": lines,
            "load_before": round(load_before, 1),
            "load": round(os.getloadavg()[0], 1),
        }
        out["stacks"][stack] = row  # type: ignore[index]
        print(json.dumps({stack: row}), flush=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
