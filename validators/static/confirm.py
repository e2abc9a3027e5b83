"""Confirming loads: load what a static finding is about, for real, in a child process.

The child is the env's own interpreter, isolated (`-I`: no user site, no PYTHONPATH, no cwd),
with a timeout. It does what the package's users do: `import torch` first when the env has
torch, then imports the package's top-level modules (which run their own preloading), then
loads each module in question: an extension module through Python's extension loader (runs
PyInit_, i.e. op registration), any other object with dlopen(RTLD_NOW) through ctypes, which
is what torch.ops.load_library does. On a host without the NVIDIA driver, the child's
LD_LIBRARY_PATH starts with the stub driver libraries of driver_stub.py.

A step that kills the child (a signal, an abort) is recorded as a crash and the child is
restarted after it, so one crash costs one step. No GPU is needed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

# global: dlopen RTLD_GLOBAL (a module by name when no path), as cuda-core does with torch._C
StepKind = Literal["import", "extension", "library", "global"]
# stub-crash: crashed under the stub driver, and no real driver userland could confirm it
Outcome = Literal["ok", "error", "crash", "timeout", "stub-crash"]

_CHILD = r"""
import ctypes, importlib, importlib.machinery, importlib.util, json, site, sys
site.addsitedir(sys.argv[2])  # the env's site-packages (already there in a real venv)
steps = json.loads(sys.argv[1])
def say(**kw):
    sys.stdout.write(json.dumps(kw) + "\n"); sys.stdout.flush()
def run(step):
    kind, name, path = step["kind"], step["name"], step["path"]
    if kind == "import":
        importlib.import_module(name)
    elif kind == "extension":
        if name in sys.modules:
            return
        loader = importlib.machinery.ExtensionFileLoader(name, path)
        spec = importlib.util.spec_from_file_location(name, path, loader=loader)
        loader.exec_module(importlib.util.module_from_spec(spec))
    elif kind == "global":
        ctypes.CDLL(path or importlib.import_module(name).__file__, mode=ctypes.RTLD_GLOBAL)
    else:
        ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
for i, step in enumerate(steps):
    say(start=i)
    try:
        run(step)
        say(done=i, ok=True)
    except BaseException as exc:  # every failure is the evidence we came for
        say(done=i, ok=False, error=(type(exc).__name__ + ": " + str(exc))[:800])
"""


@dataclass(frozen=True)
class Step:
    kind: StepKind
    name: str  # module name (import, extension) or file name (library)
    path: str = ""


@dataclass(frozen=True)
class StepResult:
    step: Step
    outcome: Outcome
    error: str = ""

    @property
    def undefined_symbol(self) -> str | None:
        marker = "undefined symbol: "
        if marker in self.error:
            return self.error.split(marker, 1)[1].split()[0].rstrip(",")
        return None


@dataclass
class LoadRun:
    results: list[StepResult] = field(default_factory=list)
    seconds: float = 0.0
    children: int = 0


def _signal_name(rc: int) -> str:
    if rc < 0:
        try:
            return signal.Signals(-rc).name
        except ValueError:
            return f"signal {-rc}"
    return f"exit status {rc}"


def run_steps(
    python: Path,
    steps: Sequence[Step],
    *,
    site_packages: Path,
    library_path: Path | Sequence[Path] | None,
    timeout: float = 300.0,
) -> LoadRun:
    """Run `steps` in order in children of `python`; restart after a crash or a timeout.
    `library_path`: the child's LD_LIBRARY_PATH (folders in order), nothing else."""
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "PYTHONPATH")}
    if isinstance(library_path, Path):
        library_path = [library_path]
    if library_path:
        env["LD_LIBRARY_PATH"] = os.pathsep.join(str(p) for p in library_path)
    env["PYTHONWARNINGS"] = "ignore"
    out = LoadRun()
    started = time.perf_counter()
    pending = list(steps)
    recorded: set[int] = set()  # indexes into `steps` with a result

    def record(result: StepResult) -> None:
        index = steps.index(result.step)
        if index not in recorded:
            recorded.add(index)
            out.results.append(result)

    while pending and out.children <= len(steps) + 1:  # each child finishes >= 1 step
        out.children += 1
        payload = json.dumps([s.__dict__ for s in pending])
        try:
            proc = subprocess.run(
                [str(python), "-I", "-c", _CHILD, payload, str(site_packages)],
                capture_output=True,
                text=True,
                env=env,
                timeout=timeout,
                check=False,
            )
            stdout, rc, stderr = proc.stdout, proc.returncode, proc.stderr
        except subprocess.TimeoutExpired as exc:
            raw = exc.stdout or b""
            stdout = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
            rc, stderr = None, f"no answer within {timeout:.0f} s"
        in_flight: int | None = None
        finished = 0
        for line in stdout.splitlines():
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if "start" in msg:
                in_flight = msg["start"]
            elif "done" in msg:
                in_flight = None
                finished = msg["done"] + 1
                record(
                    StepResult(
                        pending[msg["done"]],
                        "ok" if msg["ok"] else "error",
                        msg.get("error", ""),
                    )
                )
        why: Outcome = "timeout" if rc is None else "crash"
        if rc == 0 or in_flight is None:
            if in_flight is None and finished < len(pending) and rc != 0:
                record(StepResult(pending[finished], why, f"child died: {stderr[-300:]}"))
                finished += 1
            else:
                break
        else:
            detail = stderr.strip().splitlines()[-1:] if stderr.strip() else []
            record(
                StepResult(
                    pending[in_flight],
                    why,
                    (_signal_name(rc) if rc is not None else stderr)
                    + (f" ({detail[0][:200]})" if detail else ""),
                )
            )
            finished = in_flight + 1
        rest = pending[finished:]
        if not rest:
            break
        # a new child first redoes the imports that worked (torch, the packages' preloads)
        good = {r.step for r in out.results if r.outcome == "ok" and r.step.kind == "import"}
        pending = [s for s in steps if s in good and s not in rest] + rest
    out.seconds = time.perf_counter() - started
    return out
