"""Teardown never signals a process it did not start, and finds descendants that left."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import psutil

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
