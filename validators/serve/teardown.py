"""Own the processes a server launch started, and take them all down.

Tracking: the launch starts the server as leader of a new session and process group. While it
runs, `ProcessTracker.refresh()` records every process in that session or group and every
descendant of one already recorded, each by (pid, create time). SGLang's workers can be
reparented to PID 1 and escape a walk of the tree from the leader (sglang issues about
`kill_process_tree` leaving TP workers behind); recording them while alive keeps them ours.

Teardown: SIGTERM every recorded process, wait, SIGKILL what is left, then wait
until no recorded PID is alive, NVML lists none of them and the GPU memory is back near where
it was before the launch (it can stay held after SIGKILL returns), and the port takes a bind.
A signal only goes to a process whose (pid, create time) we recorded, through a pidfd opened
before that check: never to one we did not start, even if the kernel reused the number. Once
the leader is gone, nothing new is adopted by session or group id (a stranger may have its pid
and have made itself a session leader).
"""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import psutil

from validators.serve.gpu import GpuSnapshot, snapshot

# GPU memory may come back a little above the pre-launch level (driver bookkeeping, other
# tenants); more than this above baseline counts as not released.
MEMORY_SLACK_MIB = 512.0


def visible_devices(env: Mapping[str, str]) -> set[int] | None:
    """NVML indices a server started with this environment can use; None: all of them.

    Only plain indices are understood (UUIDs or MIG ids: None, every device is compared)."""
    value = env.get("CUDA_VISIBLE_DEVICES")
    if value is None or not value.strip():
        return None
    parts = [p.strip() for p in value.split(",")]
    return {int(p) for p in parts} if all(p.isdigit() for p in parts) else None


def _held(now: GpuSnapshot, baseline: GpuSnapshot, ours: set[int]) -> list[float]:
    """MiB per device above the pre-launch level, other processes' memory taken out of both
    sides (NVML attributes it to their PIDs), so a neighbour's server is not our leak.
    Devices the server could not see (CUDA_VISIBLE_DEVICES) count as 0: another run on the
    other GPU starting or stopping is not ours to release."""
    after = now.used_by_others_excluded(ours)
    before = baseline.used_by_others_excluded(ours)
    visible = visible_devices(os.environ)
    return [
        a - b if visible is None or i in visible else 0.0
        for i, (a, b) in enumerate(zip(after, before, strict=False))
    ]


@dataclass(frozen=True)
class Tracked:
    pid: int
    create_time: float
    name: str
    cmdline: str


def _proc_ids(pid: int) -> tuple[int, int] | None:
    """(pgid, sid) of pid, or None when it is gone."""
    try:
        return os.getpgid(pid), os.getsid(pid)
    except (ProcessLookupError, PermissionError):
        return None


@dataclass
class ProcessTracker:
    """The processes of one launch, recorded while they are alive."""

    leader_pid: int
    known: dict[int, Tracked] = field(default_factory=dict)

    def __post_init__(self) -> None:
        leader = _process(self.leader_pid)
        if leader is not None:
            self._record(leader)
        self.refresh()

    def _record(self, proc: psutil.Process) -> None:
        try:
            with proc.oneshot():
                entry = Tracked(
                    proc.pid, proc.create_time(), proc.name(), " ".join(proc.cmdline())[:200]
                )
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            return
        old = self.known.get(entry.pid)
        if old is None or old.create_time != entry.create_time:
            # A reused pid that is not in our session is filtered out by the caller.
            self.known[entry.pid] = entry

    def refresh(self) -> None:
        """Record new members of the launch's session/group and descendants of known ones."""
        for pid in list(self.known):
            proc = self.verified(pid)
            if proc is None:
                continue
            try:
                children = proc.children(recursive=True)
            except (psutil.NoSuchProcess, psutil.ZombieProcess):
                continue
            for child in children:
                self._record(child)
        # Members reparented away from the tree still carry our session id. Only while the
        # leader itself is alive and ours: once it is gone its pid (= the session and group
        # id) can be reused by a stranger that makes itself a session leader.
        if self.verified(self.leader_pid) is None:
            return
        for proc in psutil.process_iter():
            if proc.pid in self.known:
                continue
            ids = _proc_ids(proc.pid)
            if ids is not None and self.leader_pid in ids:
                self._record(proc)

    def verified(self, pid: int) -> psutil.Process | None:
        """The live process `pid` if it is the one we recorded (same create time)."""
        entry = self.known.get(pid)
        if entry is None:
            return None
        proc = _process(pid)
        if proc is None:
            return None
        try:
            if proc.create_time() != entry.create_time or proc.status() == psutil.STATUS_ZOMBIE:
                return None
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            return None
        return proc

    def alive(self) -> list[Tracked]:
        return [entry for pid, entry in sorted(self.known.items()) if self.verified(pid)]

    def signal_all(self, sig: signal.Signals) -> list[int]:
        """Send sig to each live recorded process, through a pidfd opened before its identity
        is checked (so a pid reused in between is never hit); returns the pids signalled.
        No killpg: the group id is the leader's pid, which a stranger may hold once the group
        has emptied."""
        sent: list[int] = []
        for entry in self.alive():
            if _signal_exact(entry, sig):
                sent.append(entry.pid)
        return sent


def _signal_exact(entry: Tracked, sig: signal.Signals) -> bool:
    """Signal the process entry recorded, never another one that got its pid since."""
    try:
        fd = os.pidfd_open(entry.pid)
    except (ProcessLookupError, PermissionError, OSError):
        return False
    try:
        proc = _process(entry.pid)
        try:
            if proc is None or proc.create_time() != entry.create_time:
                return False  # the pid (and so the pidfd) belongs to someone else now
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            return False
        try:
            signal.pidfd_send_signal(fd, sig)
        except (ProcessLookupError, PermissionError):
            return False
        return True
    finally:
        os.close(fd)


def _process(pid: int) -> psutil.Process | None:
    try:
        return psutil.Process(pid)
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return None


def port_free(host: str, port: int) -> bool:
    """True if a server could bind host:port now (SO_REUSEADDR, as servers bind)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


@dataclass
class TeardownReport:
    ok: bool
    reason: str
    evidence: dict[str, Any]


def teardown(
    tracker: ProcessTracker,
    *,
    host: str,
    port: int,
    baseline: GpuSnapshot | None,
    grace_s: float = 30.0,
    release_timeout_s: float = 60.0,
    wait_leader: Callable[[float], None] | None = None,
    gpu_probe: Callable[[], GpuSnapshot | None] = snapshot,
) -> TeardownReport:
    """SIGTERM, wait grace_s, SIGKILL, then wait for PIDs, GPU memory and port to be released."""
    started = time.monotonic()
    tracker.refresh()
    pids = sorted(tracker.known)
    evidence: dict[str, Any] = {
        "tracked": [
            {"pid": t.pid, "name": t.name, "create_time": t.create_time}
            for t in tracker.known.values()
        ]
    }
    if baseline is not None:
        # What NVML lists for our processes just before they are stopped: the record that the
        # check below saw them leave, not merely never saw them.
        before = gpu_probe()
        if before is not None:
            evidence["nvml_before"] = {
                str(pid): round(mib) for pid, mib in before.pids_among(set(pids)).items()
            }
            evidence["gpu_mib_before"] = [round(m) for m in before.used_mib]
    term_sent = tracker.signal_all(signal.SIGTERM)
    evidence["sigterm"] = term_sent
    _wait(lambda: not tracker.alive(), grace_s, wait_leader)
    survivors = tracker.alive()
    if survivors:
        evidence["sigkill"] = tracker.signal_all(signal.SIGKILL)
    _wait(lambda: not tracker.alive(), 10.0, wait_leader)
    if wait_leader is not None:
        wait_leader(1.0)  # a leader that died as a zombie is reaped here

    def released() -> bool:
        if tracker.alive() or not port_free(host, port):
            return False
        if baseline is None:
            return True
        now = gpu_probe()
        if now is None:
            return True
        if now.pids_among(set(pids)):
            return False
        return all(h <= MEMORY_SLACK_MIB for h in _held(now, baseline, set(pids)))

    _wait(released, release_timeout_s, wait_leader)
    alive = tracker.alive()
    gpu_after = gpu_probe() if baseline is not None else None
    on_gpu = gpu_after.pids_among(set(pids)) if gpu_after is not None else {}
    evidence.update(
        {
            "seconds": round(time.monotonic() - started, 2),
            "killed_after_grace": [t.pid for t in survivors],
            "port_free": port_free(host, port),
            "nvml": "unavailable" if baseline is None else "checked",
        }
    )
    problems: list[str] = []
    if alive:
        problems.append("still running: " + ", ".join(f"{t.pid} ({t.name})" for t in alive))
    if gpu_after is not None:
        evidence["nvml_after"] = {str(pid): round(mib) for pid, mib in on_gpu.items()}
    if on_gpu:
        problems.append(
            "NVML still lists: "
            + ", ".join(f"{pid} ({mib:.0f} MiB)" for pid, mib in on_gpu.items())
        )
    if baseline is not None and gpu_after is not None:
        held = [round(h) for h in _held(gpu_after, baseline, set(pids))]
        evidence["gpu_mib_above_baseline"] = held
        if any(h > MEMORY_SLACK_MIB for h in held):
            problems.append(f"GPU memory not released (MiB above baseline per GPU: {held})")
    if not evidence["port_free"]:
        problems.append(f"port {port} still taken")
    if problems:
        return TeardownReport(False, "; ".join(problems), evidence)
    how = "SIGKILL after grace" if survivors else "SIGTERM"
    return TeardownReport(True, f"{len(pids)} process(es) gone ({how}), port {port} free", evidence)


def _wait(done: Callable[[], bool], timeout: float, reap: Callable[[float], None] | None) -> None:
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        if reap is not None:
            reap(0.2)  # lets the launcher reap its direct child so it does not stay a zombie
        else:
            time.sleep(0.2)
