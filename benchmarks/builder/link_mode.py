"""What copying an env out of uv's cache costs, against hardlinking it (issue 24 item 3).

uv links installed files to its cache by default (hardlinks on one filesystem): an edit of one
file of one env edits the cache and every env linked to it, and a later build copies the damage
while its build record hashes the damaged tree. The builder now installs with
`--link-mode copy`. This measures, on this machine, with real wheels from the uv cache (numpy,
pydantic-core, pydantic, rich, jinja2: the packages this checkout's own venv resolved):

- the wall time of `uv pip install --offline --no-deps --link-mode M` into a fresh venv, for
  M = hardlink, copy, clone (reflink; uv falls back to copying where the filesystem has none),
  REPS times each, interleaved;
- the proof of the damage: after a hardlink install, one byte edited in one installed file is
  in the cache too (same inode); after a copy install it is not.

Run:  .venv/bin/python benchmarks/builder/link_mode.py [--reps 5]
Writes benchmarks/builder/results/link_mode.json and .md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "builder" / "results"
MODES = ("hardlink", "copy", "clone")


def _uv() -> str:
    found = shutil.which("uv") or str(ROOT.parent / "main" / ".tools" / "bin" / "uv")
    return found


def _pins() -> list[str]:
    """The exact versions this checkout's venv has, so the wheels are in the uv cache."""
    out = subprocess.run([_uv(), "pip", "freeze", "--python", str(ROOT / ".venv" / "bin" / "python")],
                         capture_output=True, text=True, check=True).stdout  # fmt: skip
    wanted = ("numpy", "pydantic-core", "pydantic", "rich", "jinja2", "markupsafe", "pygments")
    return [line for line in out.splitlines() if line.split("==")[0].lower() in wanted]


def _tree_bytes(root: Path) -> tuple[int, int]:
    files = total = 0
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            files += 1
            total += path.stat().st_size
    return files, total


def install(mode: str, pins: list[str], scratch: Path) -> tuple[float, Path]:
    venv = Path(tempfile.mkdtemp(dir=scratch, prefix=f"{mode}-"))
    subprocess.run([_uv(), "venv", "-q", "--python", str(ROOT / ".venv" / "bin" / "python"), str(venv)], check=True)
    start = time.perf_counter()
    subprocess.run([_uv(), "pip", "install", "-q", "--offline", "--no-deps", "--link-mode", mode,
                    "--python", str(venv / "bin" / "python"), *pins], check=True)  # fmt: skip
    return time.perf_counter() - start, venv


def damage(mode: str, pins: list[str], scratch: Path) -> dict[str, object]:
    """Edit one installed file; does a second, fresh install of the same wheel see the edit?"""
    _, venv = install(mode, pins, scratch)
    target = next(venv.glob("lib/python*/site-packages/rich/__init__.py"))
    links = target.stat().st_nlink
    with target.open("ab") as handle:
        handle.write(b"\n# damaged\n")
    _, fresh = install(mode, pins, scratch)
    seen = next(fresh.glob("lib/python*/site-packages/rich/__init__.py")).read_bytes().endswith(b"# damaged\n")
    target.write_bytes(target.read_bytes()[: -len(b"\n# damaged\n")])  # undo: the cache too
    return {"links_of_installed_file": links, "edit_reaches_a_fresh_install": seen}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    pins = _pins()
    scratch = Path(tempfile.mkdtemp(prefix="link-mode-", dir=os.environ.get("TMPDIR", "/tmp")))
    try:
        install("copy", pins, scratch)  # warm: every wheel unpacked in the cache
        times: dict[str, list[float]] = {m: [] for m in MODES}
        size = (0, 0)
        for _ in range(args.reps):
            for mode in MODES:
                seconds, venv = install(mode, pins, scratch)
                times[mode].append(round(seconds, 3))
                size = _tree_bytes(next(venv.glob("lib/python*/site-packages")))
                shutil.rmtree(venv)
        proof = {m: damage(m, pins, scratch) for m in MODES}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    medians = {m: statistics.median(v) for m, v in times.items()}
    result = {
        "machine": f"{platform.node()} {platform.machine()}, {os.cpu_count()} cpus",
        "packages": pins,
        "site_packages_files": size[0],
        "site_packages_bytes": size[1],
        "seconds": times,
        "median_s": medians,
        "copy_over_hardlink": round(medians["copy"] / medians["hardlink"], 2),
        "copy_mb_per_s": round(size[1] / 1e6 / medians["copy"], 1),
        "damage": proof,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "link_mode.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
