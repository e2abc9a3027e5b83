"""Teardown never signals a process it did not start, and finds descendants that left."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from validators.serve.teardown import ProcessTracker, Tracked, port_free, teardown

SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]


def test_a_reused_pid_is_not_ours() -> None:
    outsider = subprocess.Popen(SLEEPER)
    try:
        leader = subprocess.Popen(SLEEPER, start_new_session=True)
        tracker = ProcessTracker(leader.pid)
        # Pretend we once recorded a process under the outsider's pid (since reused).
        tracker.known[outsider.pid] = Tracked(outsider.pid, 1.0, "old", "old")
        assert tracker.verified(outsider.pid) is None
        report = teardown(tracker, host="127.0.0.1", port=1, baseline=None, grace_s=5,
                          wait_leader=lambda s: leader.wait(s) if leader.poll() is None else None)
        assert leader.wait(5) == -signal.SIGTERM
        assert outsider.poll() is None, "a process we did not start was signalled"
        assert report.evidence["sigterm"] == [leader.pid]
    finally:
        outsider.kill()
        outsider.wait()


def test_grandchild_in_its_own_session_is_tracked_and_killed() -> None:
    code = (
        "import subprocess, sys, time\n"
        "subprocess.Popen([sys.executable, '-c', 'import os, signal, time; "
        "signal.signal(signal.SIGTERM, signal.SIG_IGN); print(os.getpid(), flush=True); "
        "time.sleep(600)'], start_new_session=True)\n"
        "time.sleep(600)\n"
    )
    leader = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                              start_new_session=True)
    assert leader.stdout is not None
    grandchild = int(leader.stdout.readline())  # printed once it ignores SIGTERM
    leader.stdout.close()
    tracker = ProcessTracker(leader.pid)
    assert grandchild in tracker.known
    leader.kill()  # the leader dies first: the grandchild is reparented and outside our group
    leader.wait()
    assert psutil.Process(grandchild).ppid() != leader.pid
    report = teardown(tracker, host="127.0.0.1", port=1, baseline=None, grace_s=1)
    assert report.ok, report.reason
    assert report.evidence["killed_after_grace"] == [grandchild]
    time.sleep(0.1)
    assert not psutil.pid_exists(grandchild) or psutil.Process(grandchild).status() == "zombie"


def test_port_free_sees_a_listener() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        assert not port_free("127.0.0.1", s.getsockname()[1])


# A stranger that makes itself a session leader and has a child in its session: what a process
# that got our dead leader's pid looks like to a scan by session/group id.
STRANGER = [sys.executable, "-c",
            "import subprocess, sys, time\n"
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
            "print('ready', flush=True)\ntime.sleep(600)\n"]  # fmt: skip


def _start_stranger() -> subprocess.Popen[str]:
    proc = subprocess.Popen(STRANGER, start_new_session=True, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    return proc


def _stranger_family(stranger: subprocess.Popen[str]) -> list[int]:
    return [stranger.pid, *(c.pid for c in psutil.Process(stranger.pid).children())]


def _assert_untouched(tracker: ProcessTracker, stranger: subprocess.Popen[str]) -> None:
    family = _stranger_family(stranger)
    assert len(family) == 2 and os.getsid(family[1]) == tracker.leader_pid  # same session id
    tracker.refresh()
    assert not set(family) & {pid for pid in tracker.known if tracker.verified(pid)}
    report = teardown(tracker, host="127.0.0.1", port=1, baseline=None, grace_s=1,
                      release_timeout_s=1)  # fmt: skip
    assert report.evidence["sigterm"] == []
    time.sleep(0.2)
    assert stranger.poll() is None and all(psutil.pid_exists(p) for p in family)
    assert psutil.Process(family[1]).status() != psutil.STATUS_ZOMBIE


def _stop(stranger: subprocess.Popen[str]) -> None:
    for pid in reversed(_stranger_family(stranger)) if stranger.poll() is None else []:
        with contextlib.suppress(psutil.NoSuchProcess):
            psutil.Process(pid).kill()
    stranger.wait()
    if stranger.stdout is not None:
        stranger.stdout.close()


def test_leader_pid_reused_by_a_session_leader_is_never_adopted_or_signalled() -> None:
    """The state after a PID race within one clock tick, built from real processes: the
    tracker recorded the leader; the leader died and its number AND create time are now a
    stranger's (what a reuse inside the 10 ms create-time resolution looks like), the
    stranger leading a session with a child. Only the pidfd taken when the leader was first
    recorded tells them apart: neither is adopted by session id nor signalled. (The old code,
    identity = (pid, create time), signalled both.)"""
    stranger = _start_stranger()
    tracker: ProcessTracker | None = None
    try:
        leader = subprocess.Popen(SLEEPER, start_new_session=True)
        tracker = ProcessTracker(leader.pid)
        recorded = tracker.known.pop(leader.pid)
        leader.kill()
        leader.wait()
        tracker.leader_pid = stranger.pid  # the kernel gave the leader's number to the stranger
        same_tick = psutil.Process(stranger.pid).create_time()
        tracker.known[stranger.pid] = dataclasses.replace(
            recorded, pid=stranger.pid, create_time=same_tick
        )
        _assert_untouched(tracker, stranger)
    finally:
        _stop(stranger)
        if tracker is not None:
            tracker.close()


def test_without_pidfds_the_create_time_still_guards() -> None:
    """The fallback where pidfd_open is unavailable: identity by (pid, create time)."""
    stranger = _start_stranger()
    try:
        leader = subprocess.Popen(SLEEPER, start_new_session=True)
        tracker = ProcessTracker(leader.pid, use_pidfd=False)
        assert all(t.pidfd is None for t in tracker.known.values())
        recorded = tracker.known.pop(leader.pid)
        leader.kill()
        leader.wait()
        tracker.leader_pid = stranger.pid
        tracker.known[stranger.pid] = Tracked(stranger.pid, recorded.create_time, "old", "old")
        _assert_untouched(tracker, stranger)
    finally:
        _stop(stranger)


def test_pidfds_are_taken_once_and_released() -> None:
    fds_before = set(os.listdir("/proc/self/fd"))
    leader = subprocess.Popen(SLEEPER, start_new_session=True)
    try:
        tracker = ProcessTracker(leader.pid)
        fd = tracker.known[leader.pid].pidfd
        assert fd is not None
        tracker.refresh()
        tracker.refresh()
        assert tracker.known[leader.pid].pidfd == fd  # the fd of the first record is kept
        assert tracker.verified(leader.pid) is not None
        report = teardown(tracker, host="127.0.0.1", port=1, baseline=None, grace_s=5,
                          wait_leader=lambda s: leader.wait(s) if leader.poll() is None else None)
        assert report.ok and report.evidence["sigterm"] == [leader.pid]
        tracker.close()
        assert set(os.listdir("/proc/self/fd")) == fds_before
    finally:
        leader.kill()
        leader.wait()


NS_LAST_PID = Path("/proc/sys/kernel/ns_last_pid")


@pytest.mark.parametrize("same_tick", [False, True], ids=["real-create-time", "same-tick"])
def test_forced_pid_race_stranger_gets_the_leaders_pid(same_tick: bool) -> None:
    """The real race: the leader dies at once (no pause: the stranger may well start in the
    same clock tick), the kernel is told to hand its pid to the next process (ns_last_pid,
    root only) and a stranger session leader gets it. same-tick: the recorded create time is
    then set to the stranger's, the case (pid, create time) cannot tell apart and the old
    code signalled; the pidfd taken at record time must."""
    if not os.access(NS_LAST_PID, os.W_OK):
        pytest.skip("cannot write /proc/sys/kernel/ns_last_pid (needs root): the test above "
                    "covers the same state")  # fmt: skip
    for _attempt in range(20):
        leader = subprocess.Popen(SLEEPER, start_new_session=True)
        tracker = ProcessTracker(leader.pid)
        leader.kill()
        leader.wait()
        NS_LAST_PID.write_text(str(leader.pid - 1))
        stranger = _start_stranger()
        if stranger.pid != leader.pid:  # another process on the machine took it first
            _stop(stranger)
            tracker.close()
            continue
        try:
            if same_tick:
                entry = tracker.known[leader.pid]
                tracker.known[leader.pid] = dataclasses.replace(
                    entry, create_time=psutil.Process(stranger.pid).create_time()
                )
            _assert_untouched(tracker, stranger)
        finally:
            _stop(stranger)
            tracker.close()
        return
    # Other processes of a busy machine took the pid first every time: the state this test
    # needs never arose (the test above builds it directly), so nothing was shown here.
    pytest.skip("another process took the freed pid first in 20 attempts")
