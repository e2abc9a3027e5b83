"""Watch a build's process tree: pause compile jobs before the OOM killer ends the build,
and measure peak RSS per job so the next plan uses numbers instead of guesses.

A *job* is a process whose parent is a build driver (make, ninja, ...) together with its
descendants (nvcc -> cicc, ptxas; gcc -> cc1plus, as); its RSS is the sum over that subtree.
Where no driver is in the tree, each compiler process (gcc, nvcc, cicc, ...) is a job.

When the tree passes the plan's memory budget (usable memory minus the manifest's margin;
never above 90% of the limit) the newest running job is stopped with SIGSTOP: it has done the
least work, and the older jobs can finish and free memory. A stopped job keeps what it holds,
so the margin lets the running jobs reach their peaks: the watchdog backs the plan up, it does
not replace it. Below resume_fraction of that threshold, paused jobs get SIGCONT, oldest first.
One job always runs, so the build progresses; a single job over the limit still fails, with a
measured number in the record. RSS double counts shared pages: safe for a limit.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from dataclasses import dataclass, field

import psutil

DRIVERS = frozenset({"make", "gmake", "ninja", "samu", "cmake"})
COMPILERS = frozenset(
    {
        "cc1",
        "cc1plus",
        "gcc",
        "g++",
        "cc",
        "c++",
        "clang",
        "clang++",
        "nvcc",
        "cicc",
        "ptxas",
        "fatbinary",
        "nvlink",
        "cudafe++",
        "ld",
        "ld.gold",
        "ld.lld",
        "rustc",
    }
)


@dataclass
class WatchReport:
    peak_total_rss: int = 0
    peak_job_rss: int = 0
    jobs_seen: int = 0
    pauses: int = 0
    resumes: int = 0
    samples: int = 0
    max_concurrent_jobs: int = 0
    job_peaks: dict[int, int] = field(default_factory=dict)


@dataclass
class _Proc:
    pid: int
    ppid: int
    name: str
    created: float
    rss: int


def _snapshot(root: psutil.Process) -> list[_Proc]:
    out: list[_Proc] = []
    try:
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return out
    for p in procs:
        try:
            with p.oneshot():
                out.append(_Proc(p.pid, p.ppid(), p.name(), p.create_time(), p.memory_info().rss))
        except psutil.Error:
            continue  # exited between listing and reading
    return out


def _jobs(procs: list[_Proc], root_pid: int) -> dict[int, list[_Proc]]:
    """job root pid -> the processes of that job."""
    by_pid = {p.pid: p for p in procs}
    children: dict[int, list[_Proc]] = {}
    for p in procs:
        children.setdefault(p.ppid, []).append(p)
    roots = [
        p
        for p in procs
        if p.pid != root_pid
        and p.name not in DRIVERS
        and p.ppid in by_pid
        and by_pid[p.ppid].name in DRIVERS
    ]
    if not roots:
        # No driver: the topmost compiler processes are the jobs.
        roots = [
            p
            for p in procs
            if p.name in COMPILERS
            and p.pid != root_pid
            and not (p.ppid in by_pid and by_pid[p.ppid].name in COMPILERS)
        ]
    jobs: dict[int, list[_Proc]] = {}
    for job_root in roots:
        members: list[_Proc] = []
        stack = [job_root]
        while stack:
            cur = stack.pop()
            members.append(cur)
            stack.extend(children.get(cur.pid, []))
        jobs[job_root.pid] = members
    return jobs


class Watchdog:
    """Samples in a thread while the watched process runs; use as a context manager."""

    def __init__(
        self,
        root_pid: int,
        *,
        limit_bytes: int,
        pause_at_bytes: int | None = None,
        pause_fraction: float = 0.9,
        resume_fraction: float = 0.8,
        interval_s: float = 0.05,
        idle_interval_s: float = 0.25,
        pause: bool = True,
    ) -> None:
        self.root_pid = root_pid
        self.limit = limit_bytes
        ceiling = int(limit_bytes * pause_fraction)
        self.pause_at = min(pause_at_bytes, ceiling) if pause_at_bytes else ceiling
        self.resume_at = int(self.pause_at * resume_fraction)
        self.interval = interval_s
        # Listing a process tree reads /proc for every process: while no compile
        # job runs (downloads, linking files into the env) sample slowly, so the watchdog
        # does not take CPU from the install it watches.
        self.idle_interval = idle_interval_s
        self._busy = False
        self.pause = pause
        self.report = WatchReport()
        self._paused: list[tuple[float, int, list[int]]] = []  # (created, job pid, member pids)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="stackgate-watchdog", daemon=True)
        self._seen: set[int] = set()

    def __enter__(self) -> Watchdog:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._resume_all()

    def _signal(self, pids: list[int], sig: signal.Signals) -> None:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    def _resume_all(self) -> None:
        for _, _, members in self._paused:
            self._signal(members, signal.SIGCONT)
            self.report.resumes += 1
        self._paused.clear()

    def _loop(self) -> None:
        try:
            root = psutil.Process(self.root_pid)
        except psutil.Error:
            return
        while not self._stop.is_set():
            self.sample(root)
            self._stop.wait(self.interval if self._busy else self.idle_interval)

    def sample(self, root: psutil.Process) -> None:
        procs = _snapshot(root)
        if not procs:
            return
        rep = self.report
        rep.samples += 1
        total = sum(p.rss for p in procs)
        rep.peak_total_rss = max(rep.peak_total_rss, total)
        jobs = _jobs(procs, self.root_pid)
        self._busy = bool(jobs)
        created = {p.pid: p.created for p in procs}
        for job_pid, job_procs in jobs.items():
            rss = sum(m.rss for m in job_procs)
            rep.job_peaks[job_pid] = max(rep.job_peaks.get(job_pid, 0), rss)
            rep.peak_job_rss = max(rep.peak_job_rss, rss)
            self._seen.add(job_pid)
        rep.jobs_seen = len(self._seen)
        paused_pids = {pid for _, pid, _ in self._paused}
        # Forget paused jobs that ended (killed from outside): nothing to resume.
        self._paused = [entry for entry in self._paused if entry[1] in jobs]
        running = [pid for pid in jobs if pid not in paused_pids]
        rep.max_concurrent_jobs = max(rep.max_concurrent_jobs, len(running))
        if self.pause and total >= self.pause_at and len(running) > 1:
            newest = max(running, key=lambda pid: created.get(pid, 0.0))
            to_stop = [m.pid for m in jobs[newest]]
            self._signal(to_stop, signal.SIGSTOP)
            self._paused.append((created.get(newest, 0.0), newest, to_stop))
            rep.pauses += 1
        elif self._paused and (total < self.resume_at or not running):
            self._paused.sort()
            _, _, to_continue = self._paused.pop(0)
            self._signal(to_continue, signal.SIGCONT)
            rep.resumes += 1
