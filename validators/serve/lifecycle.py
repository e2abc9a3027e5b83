"""Start a server, watch its log until it is ready, crashed or hung.

The server runs as the leader of a new session (its own process group), its stdout and stderr
go to one log file, and `wait_ready` tails that file: a fatal signature or the process exiting
ends the wait at once (within one poll, not at the timeout); no new log bytes for
`hang_timeout_s` is a hang; readiness is the engine's ready line (if it has one) plus a 200
from the health path (SGLang's /health runs a one-token generation and answers 503 while
starting).
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx
import psutil

from stackgate import proc
from stackgate.errors import CheckFailed
from validators.serve.adapters import DEFAULT_PORTS, LaunchSpec
from validators.serve.gpu import GpuSnapshot, snapshot
from validators.serve.logwatch import LogWatch
from validators.serve.teardown import ProcessTracker, port_free

Verdict = Literal["ready", "crashed", "hung", "timeout"]

GENERIC_GRACE_S = 3.0


class PortInUse(CheckFailed):
    error_id = "port-in-use"
    hint = "stop what holds the port, or choose another with --port"

    def __init__(self, host: str, port: int, holders: list[str]) -> None:
        who = f" by {', '.join(holders)}" if holders else " (holder unknown: not ours to see)"
        super().__init__(f"port {port} on {host} is already in use{who}")
        self.port = port
        self.holders = holders


def port_holders(port: int) -> list[str]:
    """'pid (name)' of processes listening on port, as far as this user may see."""
    found: list[str] = []
    try:
        conns = psutil.net_connections(kind="inet")
    except (psutil.AccessDenied, PermissionError):
        return found
    for conn in conns:
        if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN:
            name = "?"
            if conn.pid is not None:
                with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                    name = psutil.Process(conn.pid).name()
            found.append(f"{conn.pid} ({name})")
    return sorted(set(found))


def free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def choose_port(host: str, fixed: int | None, engine: str) -> tuple[int, str]:
    """(port, why). A fixed port that is taken fails clearly; otherwise never collide."""
    if fixed is not None:
        if not port_free(host, fixed):
            raise PortInUse(host, fixed, port_holders(fixed))
        return fixed, "fixed by the profile"
    default = DEFAULT_PORTS.get(engine)
    if default is not None and port_free(host, default):
        return default, f"{engine} default"
    port = free_port(host)
    why = f"{engine} default {default} in use, took a free one" if default else "free port"
    return port, why


@dataclass
class Server:
    spec: LaunchSpec
    popen: subprocess.Popen[bytes]
    tracker: ProcessTracker
    log_path: Path
    gpu_baseline: GpuSnapshot | None
    started: float
    watch: LogWatch
    _offset: int = 0

    def read_log(self) -> int:
        """Feed new log bytes to the watch; returns how many arrived."""
        try:
            with self.log_path.open("rb") as fh:
                fh.seek(self._offset)
                data = fh.read()
        except FileNotFoundError:
            return 0
        self._offset += len(data)
        if data:
            self.watch.feed(data.decode("utf-8", errors="replace"))
        return len(data)

    def reap(self, seconds: float) -> None:
        """Wait up to `seconds` for the leader (our direct child), so it leaves no zombie."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=seconds)


def start(spec: LaunchSpec, log_path: Path, *, path_prepend: Path | None = None) -> Server:
    """Launch spec.argv in a new session, output to log_path; GPU baseline taken first."""
    baseline = snapshot()
    env = proc.child_env()
    # The served env imports what it has: a PYTHONPATH set for stackgate itself (e.g. its
    # dependencies unpacked beside a machine's Python) would shadow the env's own packages.
    env.pop("PYTHONPATH", None)
    env.update(spec.env)
    if path_prepend is not None:
        env["PATH"] = f"{path_prepend}{os.pathsep}{env.get('PATH', '')}"
        env["VIRTUAL_ENV"] = str(path_prepend.parent)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as log:
        popen = subprocess.Popen(
            spec.argv,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # own session and group: teardown signals the group
        )
    pattern = re.compile(spec.ready_pattern) if spec.ready_pattern else None
    return Server(
        spec=spec,
        popen=popen,
        tracker=ProcessTracker(popen.pid),
        log_path=log_path,
        gpu_baseline=baseline,
        started=time.monotonic(),
        watch=LogWatch(ready_pattern=pattern),
    )


@dataclass
class ReadyOutcome:
    verdict: Verdict
    reason: str
    seconds: float
    evidence: dict[str, Any] = field(default_factory=dict)


def _health(client: httpx.Client, url: str) -> int | None:
    try:
        return client.get(url).status_code
    except httpx.HTTPError:
        return None


def wait_ready(
    server: Server,
    *,
    load_timeout_s: float,
    hang_timeout_s: float,
    poll_s: float = 0.25,
    on_update: Callable[[LogWatch], None] | None = None,
    checkpoint: Callable[[], None] | None = None,
) -> ReadyOutcome:
    """Block until ready / crashed / hung / timeout; never leaves the server half-judged.
    `checkpoint` runs once per poll (serve-bench: raises when a signal came)."""
    watch = server.watch
    url = server.spec.base_url + server.spec.health_path
    last_growth = time.monotonic()
    last_refresh = 0.0
    last_health = 0.0
    health_status: int | None = None
    first_fatal: float | None = None
    with httpx.Client(timeout=httpx.Timeout(10.0, connect=2.0)) as client:
        while True:
            if checkpoint is not None:
                checkpoint()
            now = time.monotonic()
            if server.read_log():
                last_growth = now
            if now - last_refresh >= 1.0:
                server.tracker.refresh()
                last_refresh = now
            if on_update is not None:
                on_update(watch)
            elapsed = now - server.started
            if watch.fatal is not None and first_fatal is None:
                first_fatal = now
            # A generic signature ("a child died") waits briefly for the specific cause.
            if watch.fatal is not None and (
                not watch.fatal.generic or now - (first_fatal or now) >= GENERIC_GRACE_S
            ):
                return _outcome(
                    server,
                    "crashed",
                    f"fatal signature '{watch.fatal.label}' in the log: {watch.fatal.line}",
                    signature=watch.fatal.label,
                )
            code = server.popen.poll()
            if code is not None:
                server.read_log()
                watch.flush()
                sig = f" ('{watch.fatal.label}': {watch.fatal.line})" if watch.fatal else ""
                return _outcome(
                    server,
                    "crashed",
                    f"server exited with code {code} before it was ready{sig}",
                    signature=watch.fatal.label if watch.fatal else None,
                    exit_code=code,
                )
            if now - last_growth > hang_timeout_s:
                return _outcome(
                    server,
                    "hung",
                    f"no log output for {hang_timeout_s:.0f} s (phase: {watch.phase})",
                )
            if elapsed > load_timeout_s:
                return _outcome(
                    server,
                    "timeout",
                    f"not ready after {load_timeout_s:.0f} s (phase: {watch.phase})",
                )
            line_ok = watch.ready_pattern is None or watch.ready_line_seen
            if line_ok and now - last_health >= 1.0:
                last_health = now
                health_status = _health(client, url)
                if health_status == 200:
                    return _outcome(
                        server, "ready", f"ready in {elapsed:.1f} s", health=health_status
                    )
            time.sleep(poll_s)


def _outcome(server: Server, verdict: Verdict, reason: str, **extra: Any) -> ReadyOutcome:
    watch = server.watch
    evidence: dict[str, Any] = {
        "phase": watch.phase,
        "phases": list(watch.phases_seen),
        "log": str(server.log_path),
        "pid": server.popen.pid,
        **{k: v for k, v in extra.items() if v is not None},
    }
    if watch.progress is not None:
        evidence["weights_progress"] = f"{watch.progress.done}/{watch.progress.total}"
    if verdict != "ready":
        evidence["last_log_lines"] = watch.last_lines(20)
    return ReadyOutcome(verdict, reason, round(time.monotonic() - server.started, 2), evidence)
