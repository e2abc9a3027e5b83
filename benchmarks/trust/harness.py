"""Shared parts of the trust-boundary cases: running the real commands, planting files,
looking for what must never appear in an output."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable
RAW_CONTROLS = ("\x1b[", "\x1b]", "\x07", "\x9b", "\x1b")


@dataclass
class Outcome:
    """What a case saw: stopped (the attack held / the input handled / the fault survived)
    and a short account of what the command did."""

    stopped: bool
    seen: str


@dataclass
class Case:
    key: str
    table: str  # security | bad input | faults
    item: int  # the item (1-7)
    origin: str  # issue (named there) | variant (a member of the class the issue did not name)
    title: str
    run: Callable[[Path], Outcome]
    result: dict[str, object] = field(default_factory=dict)


CASES: list[Case] = []


def case(key: str, table: str, item: int, origin: str, title: str) -> Callable[..., object]:
    def register(fn: Callable[[Path], Outcome]) -> Callable[[Path], Outcome]:
        CASES.append(Case(key, table, item, origin, title, fn))
        return fn

    return register


def suite_case(key: str, table: str, item: int, origin: str, title: str, node: str) -> None:
    """A case whose setup is the suite's own fixtures: it runs that test (stopped: it passed)."""

    def run(tmp: Path) -> Outcome:
        done = pytest_node(node)
        return Outcome(done.returncode == 0, tail(done, 160))

    case(key, table, item, origin, title)(run)


def base_env(tmp: Path, **extra: str) -> dict[str, str]:
    """A clean environment for a command: its own cache and state under tmp."""
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp / "home"),
        "NO_COLOR": "1",
        "COLUMNS": "200",
        "STACKGATE_CACHE": str(tmp / "cache"),
        "STACKGATE_STATE_DIR": str(tmp / "state"),
    }
    env.update(extra)
    return env


def module(
    tmp: Path,
    *argv: str | Path,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """`python -m ARGV` of this checkout, as a real process."""
    return subprocess.run(
        [PY, "-m", *map(str, argv)], cwd=cwd or ROOT, env=env or base_env(tmp),
        capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


def python(
    tmp: Path,
    code: str,
    *args: str,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess[str]:
    """`python -c CODE ARGS` with the product importable (its own process: its own environment)."""
    env = dict(env or base_env(tmp))
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run(
        [PY, "-c", code, *args], cwd=cwd or ROOT, env=env, capture_output=True, text=True,
        timeout=timeout, check=False,
    )  # fmt: skip


def pytest_node(node: str, timeout: float = 580) -> subprocess.CompletedProcess[str]:
    """One test of the suite (a case whose setup is the suite's own fixtures)."""
    return subprocess.run(
        [PY, "-m", "pytest", node, "-q", "-p", "no:cacheprovider", "--no-header"],
        cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


def tail(done: subprocess.CompletedProcess[str], n: int = 240) -> str:
    """The last words of a command, control characters shown (this page is read on terminals)."""
    text = " ".join((done.stderr.strip() or done.stdout.strip()).split())
    return ascii(text[-n:])[1:-1]


def leaks(needles: Iterable[str], texts: Iterable[str], folders: Iterable[Path] = ()) -> list[str]:
    """Where any needle appears: in a text (by index) or in a file under a folder."""
    needles = list(needles)
    found = [f"output {i}: {n!r}" for i, t in enumerate(texts) for n in needles if n in t]
    for folder in folders:
        for path in sorted(folder.rglob("*")) if folder.is_dir() else []:
            if path.is_file() and not path.is_symlink():
                data = path.read_bytes()
                found += [f"{path.name}: {n!r}" for n in needles if n.encode() in data]
    return found


def planted_exe(path: Path, marker: Path, name: str | None = None) -> Path:
    """An executable shell script that appends its name to marker (proof that it ran)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho {name or path.name} >> {marker}\nexit 1\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def no_traceback(done: subprocess.CompletedProcess[str]) -> bool:
    return "Traceback" not in done.stderr + done.stdout and "RecursionError" not in done.stderr


def dump(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def exit_ok(done: subprocess.CompletedProcess[str], *codes: int) -> bool:
    return done.returncode in codes


def env_without(*names: str) -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in names}


_FLEET_JOB = (
    "import sys; from pathlib import Path; from tests.fleet.test_verdict import _job; "
    "p = Path(sys.argv[1]); p.mkdir(); _job(p)"
)


def fleet_job(tmp: Path) -> tuple[Path, Path]:
    """A fleet job folder made by the suite's fixture, and the path of node bad1's status.json
    (its folder there, no file), for a case to plant something in."""
    job = tmp / "job"
    assert python(tmp, _FLEET_JOB, str(job)).returncode == 0
    status = job / "nodes" / "bad1" / "status.json"
    status.parent.mkdir(parents=True, exist_ok=True)
    status.unlink(missing_ok=True)
    return job, status


def committed_records(tmp: Path) -> tuple[Path, Path, dict[str, str]]:
    """tmp as a project whose records/smoke holds one real record: (that folder, a candidate
    record file, the environment that makes tmp the project root)."""
    sys.path.insert(0, str(ROOT))
    from tests.gate.record_factory import make_record

    folder = tmp / "records" / "smoke"
    folder.mkdir(parents=True)
    (folder / "real.json").write_text(make_record(minute=30).to_json())
    cand = tmp / "cand.json"
    cand.write_text(make_record(kind="candidate", minute=40).to_json())
    return folder, cand, base_env(tmp, STACKGATE_ROOT=str(tmp))
