"""Static verdict time on one env (or one lock): cold, warm facts, warm, with wall AND CPU time
and the load average during each run, optionally interleaved with another checkout of the tool.

    python benchmarks/static/static_speed.py ENV [--targets 9.0,12.0a] [--warm 2] \
        [--before-tree /path/to/old/checkout | --before-rev GIT_REV] \
        [--out benchmarks/static/results/static_speed_x.json]
    python benchmarks/static/static_speed.py --lock path/to/uv.lock [--seed-lockcheck DIR] ...

Each run is the CLI a user runs, `python -m validators static --env ENV --targets ... --json`
(or `static --lock LOCK --offline ...`), in a child process with the default caches under a
fresh $STACKGATE_CACHE. In this order:

- before (if --before-tree, or --before-rev: a detached worktree of that revision made for
  the run and removed after; the same interpreter and packages): the old code, cold;
- cold: an empty cache (with --lock, a copy of --seed-lockcheck's wheel facts: the fetches
  are not what is timed; without a seed the cold lock run fetches from the index);
- warm-facts: every file's facts cached, the resolution memo (resolution_cache.py) removed: what a
  run costs after a change to the env;
- warm x N: nothing changed since the last run;
- before again.

CPU is user+sys of the child and its children (the confirming loads too). The load average
is sampled every 0.25 s while the child runs (min / mean / max of the 1-minute value): this
machine's 2 cores are shared, so a wall time means little without the load beside it; the
summary line says whether the runs were quiet (max 1-min load < the core count). Bytecode
writing is left on (a user's Python writes .pyc files; PYTHONDONTWRITEBYTECODE=1 would make
every run compile the tool and torch again).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


class LoadSampler:
    """The 1-minute load average, sampled while a child runs."""

    def __init__(self, every: float = 0.25) -> None:
        self.every = every
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append(os.getloadavg()[0])
            self._stop.wait(self.every)

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def summary(self) -> dict[str, float]:
        s = self.samples or [os.getloadavg()[0]]
        return {
            "load_min": round(min(s), 2),
            "load_mean": round(sum(s) / len(s), 2),
            "load_max": round(max(s), 2),
        }


def _items(report: dict[str, Any]) -> list[dict[str, Any]]:
    results = report["results"]
    if isinstance(results, list):
        return results
    return [dict(check=k, **v) for k, v in results.items()]


def one_run(tree: Path, what: list[str], targets: str, cache: Path, label: str) -> dict[str, Any]:
    child_env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    child_env["STACKGATE_CACHE"] = str(cache)
    argv = [sys.executable, "-m", "validators", "static", *what, "--targets", targets, "--json"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with LoadSampler() as load:
        started = time.perf_counter()
        done = subprocess.run(
            argv, cwd=tree, env=child_env, capture_output=True, text=True, check=False
        )
        wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    try:
        items = _items(json.loads(done.stdout))
    except (ValueError, KeyError):
        raise SystemExit(
            f"{label}: no JSON report (exit {done.returncode}): {done.stderr[-2000:]}"
        ) from None
    summary = next((r for r in items if r["check"] == "static.abi.summary"), None)
    arch = [r for r in items if r["check"].startswith("static.arch.")]
    evidence = summary["evidence"] if summary else {}
    env_row = next((r for r in items if r["check"] == "static.env"), None)
    env_evidence = env_row["evidence"] if env_row else {}
    row = {
        "label": label,
        "tree": str(tree),
        "argv": argv[3:],
        "exit": done.returncode,
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        **load.summary(),
        "abi_s": summary["duration_s"] if summary else None,
        "confirm_s": evidence.get("confirm_seconds"),
        "resolution_memo": evidence.get("resolution_memo"),
        "resolution_memo_changed": evidence.get("resolution_memo_changed"),
        "arch_scan_s": arch[0]["evidence"].get("scan_s") if arch else None,
        # facts of uncached files read by worker processes (prefetch.py), and whether the
        # first confirming child was started while the env was read (confirm.Prewarmed)
        "fact_workers_s": env_evidence.get("fact_workers_s"),
        "confirm_prewarmed": bool(
            summary and "started while the env was read" in summary["reason"]
        ),
        "verdicts": {r["check"]: r["status"] for r in items if r["status"] != "PASS"},
        "summary": summary["reason"] if summary else None,
    }
    shown: tuple[str, ...] = (
        "label",
        "wall_s",
        "cpu_s",
        "load_min",
        "load_mean",
        "load_max",
        "resolution_memo",
    )
    shown += ("confirm_s", "fact_workers_s", "confirm_prewarmed")
    shown += ("resolution_memo_changed",) if row["resolution_memo_changed"] else ()
    print(json.dumps({k: row[k] for k in shown}), flush=True)
    return row


def drop_memo(cache: Path) -> None:
    """Remove the resolution memos (static/v*/memo-*, lockcheck/memo), keep every file's
    facts."""
    for folder in cache.glob("static/v*/memo-*"):
        shutil.rmtree(folder)
    shutil.rmtree(cache / "lockcheck" / "memo", ignore_errors=True)


def _all_runs(args: argparse.Namespace, what: list[str], cache: Path) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = []
    if args.seed_lockcheck:
        shutil.copytree(args.seed_lockcheck, cache / "lockcheck")
        drop_memo(cache)
    if args.cold_pairs:  # before / after cold, alternating, each with an empty cache
        for i in range(args.cold_pairs):
            for tree, label in ((args.before_tree, "before-cold"), (REPO, "cold")):
                if tree is not None:
                    shutil.rmtree(cache, ignore_errors=True)
                    cache.mkdir()
                    runs.append(one_run(tree, what, args.targets, cache, f"{label}-{i + 1}"))
        return runs
    if args.before_tree:
        runs.append(one_run(args.before_tree, what, args.targets, cache, "before"))
        shutil.rmtree(cache / "static", ignore_errors=True)
    runs.append(one_run(REPO, what, args.targets, cache, "cold"))
    drop_memo(cache)
    runs.append(one_run(REPO, what, args.targets, cache, "warm-facts"))
    for i in range(args.warm):
        runs.append(one_run(REPO, what, args.targets, cache, f"warm-{i + 1}"))
    if args.before_tree:
        runs.append(one_run(args.before_tree, what, args.targets, cache, "before"))
    return runs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("env", type=Path, nargs="?")
    parser.add_argument("--lock", type=Path, help="time `static --lock LOCK --offline` instead")
    parser.add_argument(
        "--seed-lockcheck",
        type=Path,
        help="with --lock: a lockcheck facts folder copied into the fresh cache (e.g. "
        "~/.cache/stackgate/lockcheck), so that no run fetches",
    )
    parser.add_argument("--targets", default="9.0,12.0a")
    parser.add_argument("--warm", type=int, default=2)
    parser.add_argument("--before-tree", type=Path)
    parser.add_argument(
        "--before-rev", help="a git revision of this repo to time as `before` (e.g. main~1)"
    )
    parser.add_argument(
        "--cold-pairs",
        type=int,
        default=0,
        help="only cold runs: N pairs of (before, this tree), alternating, each with an "
        "empty cache (no warm runs)",
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if (args.env is None) == (args.lock is None):
        parser.error("give ENV or --lock LOCK")
    if args.lock is not None:
        what = ["--lock", str(args.lock.resolve())]
        what += ["--offline"] if args.seed_lockcheck else []
    else:
        what = ["--env", str(args.env.resolve())]
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="static-speed-") as scratch:
        cache = Path(scratch) / "cache"
        cache.mkdir()
        if args.before_rev:
            args.before_tree = Path(scratch) / "before"
            git = ["git", "-C", str(REPO), "worktree"]
            subprocess.run(
                [*git, "add", "-q", "--detach", str(args.before_tree), args.before_rev], check=True
            )
            # a user's checkout has its bytecode: not the new worktree's compile time
            folders = [str(args.before_tree / d) for d in ("stackgate", "validators")]
            subprocess.run([sys.executable, "-m", "compileall", "-q", *folders], check=False)
        try:
            runs = _all_runs(args, what, cache)
        finally:
            if args.before_rev:
                subprocess.run([*git, "remove", "--force", str(args.before_tree)], check=False)
    cpus = os.cpu_count() or 1
    quiet = all(r["load_max"] < cpus for r in runs)
    out = {
        "what": what,
        "targets": args.targets,
        "cpus": cpus,
        "quiet": quiet,
        "runs": runs,
    }
    print(
        f"{'quiet' if quiet else 'NOT quiet'}: max 1-min load {max(r['load_max'] for r in runs)} "
        f"on {cpus} cores; wall times under load are not a quiet machine's",
        flush=True,
    )
    if args.out:
        args.out.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
