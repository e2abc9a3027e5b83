"""Pre-install ABI verdicts from the lock: time and bytes, cold cache vs warm cache.

For each candidate lock (benchmarks/lockcheck/locks/*/uv.lock, made with `uv lock` from PyPI) runs
`python -m validators static --lock LOCK --cache C --json` twice: with an empty facts cache
(network) and again `--offline` from the filled cache. Prints, per run: wall seconds, bytes
fetched, the lock's total wheel bytes, the bytes of the torch + sgl-kernel wheels, the ABI
verdict and the findings named. Results: benchmarks/lockcheck/results/lockcheck_abi.md.

    uv run python benchmarks/lockcheck/lockcheck_abi.py [--locks DIR ...] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_LOCKS = sorted((ROOT / "benchmarks" / "lockcheck" / "locks").glob("*/uv.lock"))
WANTED = (
    "c10::cuda::c10_cuda_check_implementation(",
    "c10::MessageLogger::MessageLogger(",
)


def wheel_bytes(lock: Path, names: set[str]) -> int:
    data = tomllib.loads(lock.read_text())
    total = 0
    for pkg in data.get("package", []):
        if pkg["name"] in names:
            total += max((w.get("size", 0) for w in pkg.get("wheels", [])), default=0)
    return total


def run(lock: Path, cache: Path, offline: bool) -> dict[str, object]:
    cmd = [sys.executable, "-m", "validators", "static", "--lock", str(lock), "--cache", str(cache), "--json"]
    if offline:
        cmd.append("--offline")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    # as a user runs it: bytecode cached (this machine's shells set PYTHONDONTWRITEBYTECODE,
    # which makes every run compile ~1,400 modules, ~3 s)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False, env=env)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    results = json.loads(proc.stdout)["results"] if proc.stdout.strip() else []
    fetch = next((r for r in results if r["check"] == "static.lock.fetch"), None)
    abi_fail = [r for r in results if r["check"].startswith("static.abi.") and r["status"] == "FAIL"]
    kernel = next((r for r in results if r["check"] == "static.abi.sgl_kernel"), None)
    return {
        "lock": str(lock.relative_to(ROOT)),
        "mode": "warm --offline" if offline else "cold",
        "exit": proc.returncode,
        "seconds": round(seconds, 1),
        "cpu_seconds": round(cpu, 1),
        "load_average_1m": round(os.getloadavg()[0], 1),
        "bytes_fetched": fetch["evidence"]["bytes_fetched"] if fetch else None,
        "lock_wheel_bytes": fetch["evidence"]["wheel_bytes_total"] if fetch else None,
        "torch_sgl_kernel_wheel_bytes": wheel_bytes(lock, {"torch", "sgl-kernel"}),
        "partial_members": fetch["evidence"]["objects_from_partial_members"] if fetch else None,
        "abi_failures": [r["check"] for r in abi_fail],
        "sgl_kernel": kernel["status"] if kernel else None,
        "names_both_symbols": bool(kernel) and all(w in kernel["reason"] for w in WANTED),
        "names_both_packages": bool(kernel)
        and "sgl-kernel" in kernel["reason"]
        and "torch" in kernel["reason"],
        "sgl_kernel_reason": kernel["reason"][:600] if kernel else None,
        "stderr_tail": proc.stderr[-400:] if proc.returncode not in (0, 1) else "",
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--locks", nargs="*", type=Path, default=DEFAULT_LOCKS)
    parser.add_argument("--out", type=Path, default=None, help="append the rows as JSON lines")
    args = parser.parse_args()
    rows = []
    for lock in args.locks:
        with tempfile.TemporaryDirectory(prefix="lockcheck-bench-") as tmp:
            cache = Path(tmp) / "cache"
            for offline in (False, True):
                row = run(lock.resolve(), cache, offline)
                rows.append(row)
                fetched = row["bytes_fetched"] or 0
                lock_bytes = row["lock_wheel_bytes"] or 1
                pair = row["torch_sgl_kernel_wheel_bytes"] or 1
                print(
                    f"{row['lock']} {row['mode']}: exit {row['exit']}, {row['seconds']} s wall, "
                    f"{row['cpu_seconds']} s CPU (load {row['load_average_1m']}), "
                    f"fetched {fetched / 1e6:.1f} MB = {100 * fetched / lock_bytes:.2f}% of the "
                    f"lock's {lock_bytes / 1e6:.0f} MB of wheels, {100 * fetched / pair:.2f}% of "
                    f"torch + sgl-kernel ({pair / 1e6:.0f} MB); ABI FAIL: {row['abi_failures']}; "
                    f"both symbols named: {row['names_both_symbols']}",
                    flush=True,
                )
    if args.out:
        with args.out.open("a", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
