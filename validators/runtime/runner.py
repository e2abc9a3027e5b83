"""Run probe scripts with the environment's own interpreter, isolated and time-boxed."""

from __future__ import annotations

import json
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast, get_args

from stackgate import proc
from stackgate.safe_text import redact_file
from validators.core.results import Status

PROBES_DIR = Path(__file__).resolve().parent / "probes"
MARKER = "STACKGATE_PROBE "
# Never let a probe turn NVLink multicast on: on shared hosts it can take GPUs out of service.
SAFETY_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}


STATUSES = frozenset(get_args(Status))


@dataclass(frozen=True)
class ProbeOutcome:
    status: Status
    reason: str
    evidence: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0


def probe_env(
    extra: Mapping[str, str] | None = None, drop_prefixes: tuple[str, ...] = ()
) -> dict[str, str]:
    env = (
        {k: v for k, v in proc.child_env().items() if not k.startswith(drop_prefixes)}
        if drop_prefixes
        else proc.child_env()
    )
    env.update(extra or {})
    env.update(SAFETY_ENV)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.pop("PYTHONPATH", None)  # the env under test imports only what it has
    return env


def run_probe(python: Path, probe: str, *, env: Mapping[str, str], timeout: float) -> ProbeOutcome:
    """`python smoke.py PROBE` -> the outcome it printed, or ERROR with why it printed none."""
    script = PROBES_DIR / "smoke.py"
    if not python.exists():
        return ProbeOutcome("ERROR", f"the environment's interpreter {python} does not exist")
    start = time.perf_counter()
    try:
        done = subprocess.run(
            [str(python), str(script), probe],
            env=dict(env),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return ProbeOutcome(
            "FAIL",
            f"probe '{probe}' did not finish within {timeout:.0f} s (hang?)",
            seconds=time.perf_counter() - start,
        )
    except OSError as exc:
        return ProbeOutcome("ERROR", f"cannot start {python}: {exc}")
    seconds = time.perf_counter() - start
    for line in reversed(done.stdout.splitlines()):
        if line.startswith(MARKER):
            try:
                data = json.loads(line[len(MARKER) :])
            except ValueError:
                break
            status = str(data["status"])
            if status not in STATUSES:
                return ProbeOutcome("ERROR", f"probe reported an unknown status {status!r}")
            return ProbeOutcome(
                cast(Status, status),
                str(data["reason"]),
                dict(data.get("evidence", {})),
                seconds,
            )
    tail = (done.stderr or done.stdout).strip().splitlines()[-15:]
    signal = f" (killed by signal {-done.returncode})" if done.returncode < 0 else ""
    return ProbeOutcome(
        "FAIL",
        f"probe '{probe}' exited {done.returncode}{signal} without a result: " + _tail_text(tail),
        {"stderr_tail": tail},
        seconds,
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_all(
    procs: list[subprocess.Popen[str]], timeout: float, start: float
) -> tuple[bool, tuple[int, int] | None]:
    """Wait for every rank; on the deadline or the first rank that exits non-zero, kill the rest.

    Returns (timed_out, (rank, exit code) of the first rank that failed while others still ran).
    A rank that dies leaves the others blocked in a collective until NCCL/gloo's own timeout
    (minutes), so waiting for them in turn would turn one crash into a hang.
    """
    crashed: tuple[int, int] | None = None
    timed_out = False
    while True:
        codes = [p.poll() for p in procs]
        if all(c is not None for c in codes):
            break
        bad = next(((rank, c) for rank, c in enumerate(codes) if c is not None and c != 0), None)
        if bad is not None:
            crashed = bad
            break
        if time.perf_counter() - start > timeout:
            timed_out = True
            break
        time.sleep(0.05)
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()
    return timed_out, crashed


def run_distributed(
    python: Path,
    args: list[str],
    *,
    world_size: int,
    env: Mapping[str, str],
    timeout: float,
    log_dir: Path | None = None,
    tag: str = "",
) -> ProbeOutcome:
    """One process per GPU (`dist.py MODE OUT ...`); rank 0's JSON is the outcome's evidence."""
    if not python.exists():
        return ProbeOutcome("ERROR", f"the environment's interpreter {python} does not exist")
    script = PROBES_DIR / "dist.py"
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="stackgate-dist-") as tmp:
        out = Path(tmp) / "rank0.json"
        procs: list[subprocess.Popen[str]] = []
        logs = []
        start = time.perf_counter()
        for rank in range(world_size):
            penv = dict(env)
            penv.update(
                {
                    "RANK": str(rank),
                    "WORLD_SIZE": str(world_size),
                    "LOCAL_RANK": str(rank),
                    "MASTER_ADDR": "127.0.0.1",
                    "MASTER_PORT": str(port),
                }
            )
            log = (log_dir or Path(tmp)) / f"{args[0]}{'-' + tag if tag else ''}-rank{rank}.log"
            log.parent.mkdir(parents=True, exist_ok=True)
            handle = log.open("w", encoding="utf-8")
            logs.append((log, handle))
            procs.append(
                subprocess.Popen(
                    [str(python), str(script), args[0], str(out), *args[1:]],
                    env=penv,
                    stdout=handle,
                    stderr=subprocess.STDOUT,
                    text=True,
                )
            )
        timed_out, crashed = _wait_all(procs, timeout, start)
        for log, handle in logs:
            handle.close()
            redact_file(log)  # the probe wrote it itself: hide what it printed
        seconds = time.perf_counter() - start
        tails = {
            log.name: log.read_text(encoding="utf-8", errors="replace").splitlines()[-8:]
            for log, _ in logs
        }
        if timed_out or crashed is not None or not out.is_file():
            reason, extra = _why_no_result(args[0], procs, tails, timed_out, crashed, timeout)
            evidence = {"logs": tails, "pids": [p.pid for p in procs]} | extra
            return ProbeOutcome("FAIL", reason, evidence, seconds)
        data = json.loads(out.read_text(encoding="utf-8"))
        return ProbeOutcome("PASS", "ran", data, seconds)


def _why_no_result(
    mode: str,
    procs: list[subprocess.Popen[str]],
    tails: dict[str, list[str]],
    timed_out: bool,
    crashed: tuple[int, int] | None,
    timeout: float,
) -> tuple[str, dict[str, int]]:
    """Why the ranks left no result (the deadline, a rank that died while the others ran, or
    all of them exited without one) and the evidence that says which rank."""
    world = len(procs)
    if timed_out:
        return (
            f"{mode} probe with {world} processes did not finish within {timeout:.0f} s; "
            f"all {world} killed"
        ), {}
    if crashed is not None:
        rank, code = crashed
        return (
            f"{mode} probe: rank {rank} of {world} exited {code} without a result; "
            "the other ranks were stopped: " + _tail_text(list(tails.values())[rank])
        ), {"failed_rank": rank, "exit_code": code}
    codes = [p.returncode for p in procs]
    tail = next(iter(tails.values()), [])
    return f"{mode} probe exited {codes} without a result: " + _tail_text(tail), {}


def _tail_text(lines: list[str]) -> str:
    return " | ".join(lines)[-1500:]
