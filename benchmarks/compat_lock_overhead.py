"""What the compatibility check adds to a warm `builder lock` (issue 27: <= 10%), per shipped
stack, in one run: `builder lock STACK --locks-dir COPY` of the committed lock (uv's cache
warm: the lock does not change) with --no-compat, and with the check

- `cached`: the lock's verdict is in the cache (stackgate.compat.cached_lock: no child);
- `same binaries`: the verdict by the lock's bytes cleared, the one by its binary wheels kept:
  a re-lock that moved only pure-Python packages (the child finds it by the binaries);
- `facts warm`: both verdicts cleared, the wheels' facts cached: what a lock whose binary
  wheels changed pays when they are known (the child `validators compat --lock` runs the check);
- `first`: the first run with the check on this cache (its wheels' facts as the cache has them).

Rounds alternate off / cached / facts-warm so a drift in load hits all three alike.
Bytecode writing is left on (a user's Python writes .pyc files; the agents' shell sets
PYTHONDONTWRITEBYTECODE=1, which makes every child compile its imports: ~2 s each here).

    python benchmarks/compat_lock_overhead.py --cache /tmp/x --out results.json cu128 ...
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _lock(stack: str, locks: Path, env: dict[str, str], *extra: str) -> tuple[float, str]:
    argv = [sys.executable, "-m", "builder", "lock", f"stacks/{stack}.toml"]
    argv += ["--locks-dir", str(locks), *extra]
    t = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - t
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
        with tempfile.TemporaryDirectory(prefix="compat27-locks-") as tmp:
            locks = Path(tmp) / "locks"
            shutil.copytree(ROOT / "stacks" / "locks", locks)
            _lock(stack, locks, env, "--no-compat")  # uv's cache warm for this stack
            first, first_line = _lock(stack, locks, env)
            times: dict[str, list[float]] = {
                "off": [], "cached": [], "same_binaries": [], "facts_warm": []
            }  # fmt: skip
            lines: dict[str, str] = {}
            for _ in range(args.rounds):
                times["off"].append(_lock(stack, locks, env, "--no-compat")[0])
                seconds, lines["cached"] = _lock(stack, locks, env)
                times["cached"].append(seconds)
                compat = args.cache / "lockcheck" / "compat"
                shutil.rmtree(compat / "locks", ignore_errors=True)
                seconds, lines["same_binaries"] = _lock(stack, locks, env)
                times["same_binaries"].append(seconds)
                shutil.rmtree(compat / "locks", ignore_errors=True)
                shutil.rmtree(compat / "locks-by-binaries", ignore_errors=True)
                seconds, lines["facts_warm"] = _lock(stack, locks, env)
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
            "lines": lines,
            "load": round(os.getloadavg()[0], 1),
        }
        out["stacks"][stack] = row  # type: ignore[index]
        print(json.dumps({stack: row}), flush=True)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
