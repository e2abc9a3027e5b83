"""Where a first-time (cold) static run spends its time: each phase's wall time, the CPU of
this process and of its children (fact workers, confirming child) during it.

    python benchmarks/static/static_cold_trace.py ENV [--targets 9.0,12.0a] [--keep-cache DIR]

Runs the CLI's `static --env ENV --targets ... --json` in this process with an empty
$STACKGATE_CACHE (a temporary folder unless --keep-cache), with the static group's phases
wrapped to print `[start +wall] phase own_cpu children_cpu` lines on stderr, and the load
average before and after. Children's CPU is counted when they are reaped: the confirming
child started early (confirm.Prewarmed) shows under the confirming phase.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import resource
import runpy
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def _cpu() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


def _wrap(module: Any, name: str, t0: float) -> None:
    inner: Callable[..., Any] = getattr(module, name)

    @functools.wraps(inner)
    def timed(*args: Any, **kwargs: Any) -> Any:
        start, before = time.perf_counter(), _cpu()
        try:
            return inner(*args, **kwargs)
        finally:
            after = _cpu()
            print(
                f"[{start - t0:6.2f} +{time.perf_counter() - start:6.2f}s] {name:<20} "
                f"own_cpu {after[0] - before[0]:5.2f}  children_cpu {after[1] - before[1]:5.2f}",
                file=sys.stderr,
                flush=True,
            )

    setattr(module, name, timed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("env", type=Path)
    parser.add_argument("--targets", default="9.0,12.0a")
    parser.add_argument("--keep-cache", type=Path, help="use (and keep) this cache folder")
    args = parser.parse_args()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="static-trace-") as scratch:
        cache = args.keep_cache or Path(scratch) / "cache"
        os.environ["STACKGATE_CACHE"] = str(cache)
        sys.path.insert(0, str(REPO))
        import validators.static.abi_results as abi
        import validators.static.run as group

        print(f"load average before: {os.getloadavg()}", file=sys.stderr)
        print(f"[{time.perf_counter() - t0:6.2f}] tool imported", file=sys.stderr)
        for name in ("load_environment", "_dist_results", "prefetch", "prewarm_confirming"):
            _wrap(group, name, t0)
        for name in ("resolve", "classify", "_confirm"):
            _wrap(abi, name, t0)
        _wrap(group, "_arch_results", t0)
        _wrap(group, "abi_results", t0)
        sys.argv = ["validators", "static", "--env", str(args.env), "--targets", args.targets]
        sys.argv.append("--json")
        with contextlib.suppress(SystemExit):
            runpy.run_module("validators", run_name="__main__")
        own, kids = _cpu()
        print(
            f"[{time.perf_counter() - t0:6.2f}] end: own_cpu {own:.2f} children_cpu {kids:.2f}; "
            f"load average after: {os.getloadavg()}",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
