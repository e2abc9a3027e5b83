"""Own the processes a server launch started, and take them all down.

Tracking: the server starts as leader of a new session and process group; `refresh()` records
every process in that session or group and every descendant of one already recorded, so SGLang
workers reparented to PID 1 (escaping a tree walk from the leader) stay ours.

Identity: each process gets a pidfd (os.pidfd_open) when FIRST recorded, opened before its
membership is checked and kept only if its process was not reaped meanwhile, so the fd names
exactly the process checked. Liveness polls and signals go through it (pidfd_send_signal): a
reused pid is never signalled. Without pidfd_open the fallback is (pid, create time), limited
by its 10 ms resolution.

Teardown: SIGTERM every recorded process, wait, SIGKILL the rest, then wait until none is
alive, NVML lists none of them, GPU memory is back near its level before the launch (it can
stay held after SIGKILL), and the port takes a bind. Once the leader is gone nothing new is
adopted by session or group id (a stranger may have its pid). `close()` releases the pidfds.
"""

from __future__ import annotations

import dataclasses
import errno
import functools
import os
import select
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
    # A pidfd taken when the process was first recorded: it names that process and no other
    # for as long as it is open, so a pid the kernel hands on can never be signalled through
    # it. None where pidfd_open is unavailable (then (pid, create time) is the identity).
    pidfd: int | None = field(default=None, compare=False)


def _proc_ids(pid: int) -> tuple[int, int] | None:
    """(pgid, sid) of pid, or None when it is gone."""
    try:
        return os.getpgid(pid), os.getsid(pid)
    except (ProcessLookupError, PermissionError):
        return None


def _child_of(parent: int, proc: psutil.Process) -> bool:
    return proc.ppid() == parent


class _NoPidfd(Exception):
    """pidfd_open is not available here (not Linux >= 5.3, or a seccomp filter refuses it)."""


def _pidfd_open(pid: int) -> int | None:
    """A pidfd for pid; None when no process has that pid; _NoPidfd when pidfds are missing."""
    if not hasattr(os, "pidfd_open") or not hasattr(signal, "pidfd_send_signal"):
        raise _NoPidfd
    try:
        return os.pidfd_open(pid)
    except ProcessLookupError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ENOSYS, errno.EPERM, errno.EINVAL):
            raise _NoPidfd from exc
        return None


def _exited(pidfd: int) -> bool:
    """The pidfd's process has exited (a zombie or reaped): the fd polls readable."""
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return bool(poller.poll(0))


def _still_holds_pid(pidfd: int) -> bool:
    """The pidfd's process has not been reaped, so its pid still names it: whatever was read
    from /proc/<pid> since the fd was opened described this very process."""
    try:
        signal.pidfd_send_signal(pidfd, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists; only the signal is not allowed
    return True


@dataclass
class ProcessTracker:
    """The processes of one launch, recorded while they are alive; each with a pidfd taken
    when it is first recorded (`close()` releases them)."""

    leader_pid: int
    known: dict[int, Tracked] = field(default_factory=dict)
    use_pidfd: bool = True

    def __post_init__(self) -> None:
        # The leader is our own child: nobody else can reap it, so its pid cannot move.
        self._record(self.leader_pid, lambda _proc: True)
        self.refresh()

    def _record(self, pid: int, belongs: Callable[[psutil.Process], bool]) -> None:
        """Record pid if `belongs` holds for the process that has it. With pidfds: the fd is
        opened FIRST, then the process is read and `belongs` checked, then the fd is shown to
        still hold the pid, so what was checked is the process the fd names."""
        old = self.known.get(pid)
        if old is not None and self.verified(pid) is not None:
            return  # already ours and alive
        fd: int | None = None
        if self.use_pidfd:
            try:
                fd = _pidfd_open(pid)
            except _NoPidfd:
                self.use_pidfd = False
            else:
                if fd is None:
                    return
        try:
            entry = self._read(pid, belongs, fd)
        except BaseException:
            if fd is not None:
                os.close(fd)
            raise
        if entry is None:
            if fd is not None:
                os.close(fd)
            return
        if old is not None and old.pidfd is not None:
            os.close(old.pidfd)  # the process recorded under this pid has exited
        self.known[pid] = entry

    def _read(
        self, pid: int, belongs: Callable[[psutil.Process], bool], fd: int | None
    ) -> Tracked | None:
        proc = _process(pid)
        if proc is None:
            return None
        try:
            with proc.oneshot():
                if not belongs(proc):
                    return None
                entry = Tracked(
                    proc.pid,
                    proc.create_time(),
                    proc.name(),
                    " ".join(proc.cmdline())[:200],
                    pidfd=fd,
                )
        except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            return None
        if fd is not None and (not _still_holds_pid(fd) or _exited(fd)):
            return None
        return entry

    def _live_pids(self) -> set[int]:
        return {pid for pid in self.known if self.verified(pid) is not None}

    def refresh(self) -> None:
        """Record new members of the launch's session/group and descendants of known ones."""
        todo = sorted(self._live_pids())
        seen: set[int] = set()
        while todo:
            parent = todo.pop()
            if parent in seen:
                continue
            seen.add(parent)
            proc = self.verified(parent)
            if proc is None:
                continue
            try:
                children = proc.children()
            except (psutil.NoSuchProcess, psutil.ZombieProcess):
                continue
            for child in children:
                # Checked again after the pidfd is open: still the child of a process of ours.
                self._record(child.pid, functools.partial(_child_of, parent))
                if child.pid in self.known:
                    todo.append(child.pid)
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
                self._record(proc.pid, self._in_session)

    def _in_session(self, proc: psutil.Process) -> bool:
        ids = _proc_ids(proc.pid)
        return (
            ids is not None
            and self.leader_pid in ids
            and self.verified(self.leader_pid) is not None
        )

    def verified(self, pid: int) -> psutil.Process | None:
        """The live process `pid` if it is the one we recorded: its pidfd has not seen it
        exit (without pidfds: the same create time, at clock-tick resolution)."""
        entry = self.known.get(pid)
        if entry is None:
            return None
        if entry.pidfd is not None:
            return None if _exited(entry.pidfd) else _process(pid)
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
        """Send sig to each live recorded process through its own pidfd (so a pid reused since
        is never hit); returns the pids signalled. No killpg: the group id is the leader's
        pid, which a stranger may hold once the group has emptied."""
        sent: list[int] = []
        for entry in self.alive():
            if _signal_exact(entry, sig):
                sent.append(entry.pid)
        return sent

    def close(self) -> None:
        """Release the pidfds (the tracker then identifies by create time only)."""
        for pid, entry in list(self.known.items()):
            if entry.pidfd is not None:
                os.close(entry.pidfd)
                self.known[pid] = dataclasses.replace(entry, pidfd=None)


def _signal_exact(entry: Tracked, sig: signal.Signals) -> bool:
    """Signal the process entry recorded, never another one that got its pid since."""
    if entry.pidfd is not None:
        try:
            signal.pidfd_send_signal(entry.pidfd, sig)
        except (ProcessLookupError, PermissionError):
            return False
        return True
    # Fallback without pidfds: the identity is (pid, create time), checked just before; a pid
    # reused within one clock tick of the original's start would pass (docs/guarantees.md).
    proc = _process(entry.pid)
    try:
        if proc is None or proc.create_time() != entry.create_time:
            return False
        proc.send_signal(sig)
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
        return False
    return True


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
    pids = set(tracker.known)
    evidence: dict[str, Any] = {
        "tracked": [
            {"pid": t.pid, "name": t.name, "create_time": t.create_time}
            for t in tracker.known.values()
        ]
    }
    if baseline is not None:
        evidence.update(_on_gpu_before(gpu_probe(), pids))
    evidence["sigterm"] = tracker.signal_all(signal.SIGTERM)
    _wait(lambda: not tracker.alive(), grace_s, wait_leader)
    survivors = tracker.alive()
    if survivors:
        evidence["sigkill"] = tracker.signal_all(signal.SIGKILL)
    _wait(lambda: not tracker.alive(), 10.0, wait_leader)
    if wait_leader is not None:
        wait_leader(1.0)  # a leader that died as a zombie is reaped here
    released = functools.partial(_released, tracker, host, port, baseline, gpu_probe, pids)
    _wait(released, release_timeout_s, wait_leader)
    alive = tracker.alive()
    gpu_after = gpu_probe() if baseline is not None else None
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
    if gpu_after is not None and baseline is not None:
        problems += _left_on_gpu(gpu_after, baseline, pids, evidence)
    if not evidence["port_free"]:
        problems.append(f"port {port} still taken")
    if problems:
        return TeardownReport(False, "; ".join(problems), evidence)
    how = "SIGKILL after grace" if survivors else "SIGTERM"
    return TeardownReport(True, f"{len(pids)} process(es) gone ({how}), port {port} free", evidence)


def _on_gpu_before(before: GpuSnapshot | None, pids: set[int]) -> dict[str, Any]:
    """What NVML lists for our processes just before they are stopped: the record that the
    check after saw them leave, not merely never saw them."""
    if before is None:
        return {}
    return {
        "nvml_before": {str(pid): round(mib) for pid, mib in before.pids_among(pids).items()},
        "gpu_mib_before": [round(m) for m in before.used_mib],
    }


def _released(
    tracker: ProcessTracker,
    host: str,
    port: int,
    baseline: GpuSnapshot | None,
    gpu_probe: Callable[[], GpuSnapshot | None],
    pids: set[int],
) -> bool:
    """Nothing of ours alive, the port takes a bind, and (where NVML answers) none of our
    processes on a GPU and the memory back near the baseline."""
    if tracker.alive() or not port_free(host, port):
        return False
    now = gpu_probe() if baseline is not None else None
    if baseline is None or now is None:
        return True
    if now.pids_among(pids):
        return False
    return all(h <= MEMORY_SLACK_MIB for h in _held(now, baseline, pids))


def _left_on_gpu(
    now: GpuSnapshot, baseline: GpuSnapshot, pids: set[int], evidence: dict[str, Any]
) -> list[str]:
    """What our processes left on the GPUs after the teardown (each recorded in evidence)."""
    problems: list[str] = []
    on_gpu = now.pids_among(pids)
    evidence["nvml_after"] = {str(pid): round(mib) for pid, mib in on_gpu.items()}
    if on_gpu:
        problems.append(
            "NVML still lists: "
            + ", ".join(f"{pid} ({mib:.0f} MiB)" for pid, mib in on_gpu.items())
        )
    held = [round(h) for h in _held(now, baseline, pids)]
    evidence["gpu_mib_above_baseline"] = held
    if any(h > MEMORY_SLACK_MIB for h in held):
        problems.append(f"GPU memory not released (MiB above baseline per GPU: {held})")
    return problems


def _wait(done: Callable[[], bool], timeout: float, reap: Callable[[float], None] | None) -> None:
    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        if reap is not None:
            reap(0.2)  # lets the launcher reap its direct child so it does not stay a zombie
        else:
            time.sleep(0.2)
