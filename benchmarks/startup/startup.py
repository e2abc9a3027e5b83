"""CLI start-up: this tree against a base commit, and against importing every command first.

Runs, interleaved in one run, `python -m builder --help`, `python -m builder check cu130`
(stderr piped, as in scripts and CI), the same `check` with stderr on a pseudo-terminal (the
path that still renders through rich) and `python -m validators --help`, each:
  - "head": this tree as it is,
  - "base": the tree of `--base REV` (a temporary git worktree, same interpreter and venv:
    `python -m` puts the worktree's own packages first on sys.path), when given,
  - "eager": this tree with every command module of both packages imported before main
    (what discovery did before lazy discovery), unless --no-eager.
Reports per case and mode the median wall time, the median and the least CPU time (user+sys
of the child) and the fastest run's wall time (on a shared machine the least CPU and the
fastest run are the closest to idle), and ratios.

Bytecode: every child runs with bytecode caching allowed (PYTHONDONTWRITEBYTECODE removed
from its environment) and one warm-up run per case writes the .pyc files first, as a user's
second run finds them. With PYTHONDONTWRITEBYTECODE=1 and no __pycache__ (uv does not compile
bytecode unless asked) every run compiles each imported module of the venv and the tree from
source: that doubled `check` (see benchmarks/startup/results/startup.md); `--no-bytecode` measures
that condition instead (children get PYTHONDONTWRITEBYTECODE=1 and an empty pycache prefix,
so the non-frozen standard library is compiled too: an upper bound).

    python benchmarks/startup/startup.py [--repeats 15] [--base REV] [--no-eager] [--no-bytecode]
                                 [--out benchmarks/startup/results/startup_<label>.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import pty
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

EAGER = (
    "import importlib, pkgutil, sys\n"
    "for pkg in ('builder', 'validators'):\n"
    "    mod = importlib.import_module(pkg + '.commands')\n"
    "    for info in pkgutil.iter_modules(mod.__path__):\n"
    "        if not info.name.startswith('_'):\n"
    "            importlib.import_module(f'{pkg}.commands.{info.name}')\n"
    "from stackgate.cli import main_for\n"
    "pkg = sys.argv[1]\n"
    "sys.exit(main_for([pkg], 'python -m ' + pkg, 'd', sys.argv[2:]))\n"
)

# Where `check cu130`'s CPU goes, in the order its imports happen (each stage's process time,
# measured inside one fresh process; the libraries a stage names first are charged to it).
STAGES = [
    ("interpreter start-up (to the first line)", ""),
    ("stackgate.cli and its standard library", "import stackgate.cli"),
    ("pydantic (BaseModel, Field, validators)",
     "from pydantic import BaseModel, Field, AfterValidator, model_validator, ValidationError"),
    ("pydantic's plugin loader (importlib.metadata)", "import pydantic.plugin._loader"),
    ("packaging (version, specifiers, requirements)", "import packaging.requirements"),
    ("stackgate.engines + the first model class", "import stackgate.engines, stackgate.model"),
    ("manifest models", "import stackgate.manifest"),
    ("loading + rule models", "import stackgate.manifest.loading, stackgate.manifest.rules"),
    ("builder.commands.check + stackgate.lines", "import builder.commands.check"),
    ("load_stack('cu130')", "from stackgate.manifest.loading import load_stack; m = load_stack('cu130')"),
    ("load_rules + evaluate",
     "from stackgate.manifest.rules import StackFacts, evaluate, load_rules\n"
     "f = evaluate(load_rules(None), StackFacts.from_manifest(m.manifest))"),
]  # fmt: skip

# name -> (words after `python -m`, stderr on a pseudo-terminal)
CASES: dict[str, tuple[list[str], bool]] = {
    "builder --help": (["builder", "--help"], False),
    "builder check cu130": (["builder", "check", "cu130"], False),
    "builder check cu130 (stderr on a pty)": (["builder", "check", "cu130"], True),
    "validators --help": (["validators", "--help"], False),
}


def _drain(fd: int) -> None:
    while True:
        try:
            if not os.read(fd, 65536):
                return
        except OSError:  # EIO: the child closed its side
            return


def timed(argv: list[str], cwd: Path, env: dict[str, str], on_pty: bool) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    if on_pty:
        leader, follower = pty.openpty()
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=follower)
        os.close(follower)
        _drain(leader)
        os.close(leader)
        code = proc.wait()
        err = b""
    else:
        done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, check=False)
        code, err = done.returncode, done.stderr
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if code != 0:
        raise SystemExit(f"{argv} in {cwd} exited {code}: {err.decode()[-500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def breakdown(repeats: int, env: dict[str, str], flags: list[str]) -> dict[str, float]:
    """Minimum CPU ms of each stage over `repeats` fresh processes of this tree."""
    code = "import time, json\nT = [time.process_time()]\n"
    for _label, stmt in STAGES[1:]:
        code += f"{stmt}\nT.append(time.process_time())\n"
    code += "print('STAGES' + json.dumps([T[0]] + [b - a for a, b in zip(T, T[1:])]))\n"
    runs: list[list[float]] = []
    for _ in range(repeats):
        out = subprocess.run(
            [sys.executable, *flags, "-c", code], cwd=ROOT, env=env,
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        line = next(x for x in out.splitlines() if x.startswith("STAGES"))
        runs.append(json.loads(line.removeprefix("STAGES")))
    result = {
        label: round(min(r[i] for r in runs) * 1000, 1) for i, (label, _) in enumerate(STAGES)
    }
    result["sum of the minimums"] = round(sum(result.values()), 1)
    return result


@contextmanager
def base_tree(rev: str | None) -> Iterator[tuple[Path | None, str | None]]:
    """A detached worktree of `rev` in a temporary folder, removed afterwards."""
    if rev is None:
        yield None, None
        return
    commit = subprocess.run(
        ["git", "rev-parse", "--verify", f"{rev}^{{commit}}"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    folder = Path(tempfile.mkdtemp(prefix="startup-base-"))
    tree = folder / "tree"
    subprocess.run(
        ["git", "worktree", "add", "--detach", str(tree), commit],
        cwd=ROOT, capture_output=True, check=True,
    )  # fmt: skip
    try:
        yield tree, commit
    finally:
        subprocess.run(
            ["git", "worktree", "remove", "--force", str(tree)],
            cwd=ROOT, capture_output=True, check=False,
        )  # fmt: skip
        shutil.rmtree(folder, ignore_errors=True)


def child_env(no_bytecode: bool, prefix: Path) -> tuple[dict[str, str], list[str]]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["TERM"] = env.get("TERM", "xterm-256color")
    for name in ("CI", "NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE"):
        env.pop(name, None)  # the pty case renders colours, as for a user at a terminal
    if not no_bytecode:
        return env, []
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env, ["-X", f"pycache_prefix={prefix}"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--base", default=None, help="git revision to compare against (worktree)")
    ap.add_argument("--no-eager", action="store_true", help="skip the eager-import mode")
    ap.add_argument("--no-bytecode", action="store_true", help="no .pyc (see the docstring)")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    py = sys.executable
    with base_tree(args.base) as (base, commit), tempfile.TemporaryDirectory() as empty:
        env, flags = child_env(args.no_bytecode, Path(empty))
        modes: dict[str, tuple[Path, list[str]]] = {"head": (ROOT, [py, *flags, "-m"])}
        if base is not None:
            modes["base"] = (base, [py, *flags, "-m"])
        if not args.no_eager:
            modes["eager"] = (ROOT, [py, *flags, "-c", EAGER])
        samples: dict[str, dict[str, list[tuple[float, float]]]] = {
            name: {mode: [] for mode in modes} for name in CASES
        }
        for words, on_pty in CASES.values():  # warm the page cache and write the .pyc files
            for cwd, prefix in modes.values():
                timed([*prefix, *words], cwd, env, on_pty)
        for _ in range(args.repeats):
            for name, (words, on_pty) in CASES.items():
                for mode, (cwd, prefix) in modes.items():
                    samples[name][mode].append(timed([*prefix, *words], cwd, env, on_pty))
        baseline = [timed([py, "-c", "pass"], ROOT, env, False) for _ in range(args.repeats)]
        stages = breakdown(args.repeats, env, flags)
    rows: dict[str, dict[str, float]] = {}
    for name, by_mode in samples.items():
        row: dict[str, float] = {}
        for mode, pairs in by_mode.items():
            row[f"{mode}_wall_s"] = round(statistics.median(p[0] for p in pairs), 3)
            row[f"{mode}_cpu_s"] = round(statistics.median(p[1] for p in pairs), 3)
            row[f"{mode}_min_cpu_s"] = round(min(p[1] for p in pairs), 3)
            # The fastest run is the one least disturbed by neighbours: the best idle estimate
            # a shared machine gives.
            row[f"{mode}_min_wall_s"] = round(min(p[0] for p in pairs), 3)
        for other in ("base", "eager"):
            if other in by_mode:
                row[f"{other}_over_head_cpu"] = round(
                    row[f"{other}_cpu_s"] / max(row["head_cpu_s"], 1e-3), 2
                )
                row[f"{other}_over_head_min_wall"] = round(
                    row[f"{other}_min_wall_s"] / max(row["head_min_wall_s"], 1e-3), 2
                )
        rows[name] = row
    result = {
        "host": {"machine": platform.machine(), "cpus": len(os.sched_getaffinity(0)),
                 "loadavg_at_end": os.getloadavg(), "python": platform.python_version()},
        "repeats": args.repeats,
        "base_commit": commit,
        "bytecode": "none (compiled every run)" if args.no_bytecode else "cached (.pyc written)",
        "bare_python_wall_s": round(statistics.median(b[0] for b in baseline), 3),
        "bare_python_min_wall_s": round(min(b[0] for b in baseline), 3),
        "bare_python_cpu_s": round(statistics.median(b[1] for b in baseline), 3),
        "cases": rows,
        "check_cu130_cpu_ms_by_stage_head": stages,
    }  # fmt: skip
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
