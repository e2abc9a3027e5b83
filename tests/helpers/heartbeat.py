"""No silence in the suite: while tests run and nothing has been printed for a while, say which
ones are running and for how long (issue 29 item 3: 18 minutes without a line between 73% and
82%, the first progress line 9 minutes after the start).

Runs in the process that prints (pytest's, or xdist's controller, which hears every worker's
test start and finish); workers stay quiet. One line every INTERVAL_S of silence, listing the
longest-running tests first.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from stackgate.heartbeat import took

INTERVAL_S = 15.0


class Heartbeat:
    """Tracks the tests in flight; `line()` is what a silent interval prints."""

    def __init__(self, write: Callable[[str], None], interval_s: float = INTERVAL_S) -> None:
        self._write = write
        self._interval = interval_s
        self._lock = threading.Lock()
        self._running: dict[str, float] = {}
        self._started = time.monotonic()
        self._last_output = self._started
        self._done = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        with self._lock:
            self._running[nodeid] = time.monotonic()

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        with self._lock:
            self._running.pop(nodeid, None)
            self._done += 1
            self._last_output = time.monotonic()

    def line(self, now: float) -> str | None:
        """The progress line, or None when something was printed within the interval."""
        with self._lock:
            if now - self._last_output < self._interval:
                return None
            self._last_output = now
            running = sorted(self._running.items(), key=lambda kv: kv[1])
            done = self._done
        head = f"[{took(now - self._started)} since start, {done} test(s) finished]"
        if not running:
            return f"{head} collecting or starting workers"
        shown = ", ".join(f"{node} ({took(now - t)})" for node, t in running[:4])
        more = f" and {len(running) - 4} more" if len(running) > 4 else ""
        return f"{head} still running: {shown}{more}"

    def start(self) -> None:
        def beat() -> None:
            while not self._stop.wait(self._interval / 3):
                text = self.line(time.monotonic())
                if text:
                    self._write(text)

        self._thread = threading.Thread(target=beat, name="test-heartbeat", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


def install(config: pytest.Config) -> None:
    """Register the heartbeat on the printing process (not on xdist workers)."""
    if hasattr(config, "workerinput") or config.option.collectonly:
        return
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return

    # Under xdist the controller runs no test: its reporter writes to the terminal. Without
    # xdist the line is written while a test runs, when pytest captures fd 1 for that test:
    # it goes to the terminal's own descriptor, which the capture keeps (else it would show
    # only in a failed test's "captured stdout").
    capman = config.pluginmanager.get_plugin("capturemanager")
    terminal_fd: int | None = None
    if not config.pluginmanager.has_plugin("dsession"):
        try:
            terminal_fd = int(capman._global_capturing.out.targetfd_save)  # type: ignore[union-attr]
        except (AttributeError, TypeError, ValueError):
            terminal_fd = None

    def write(text: str) -> None:
        if terminal_fd is None:
            reporter.write_line(text)
            reporter._tw.flush()  # piped, the line would wait for the buffer to fill
        else:
            os.write(terminal_fd, f"\n{text}\n".encode())

    beat = Heartbeat(write, INTERVAL_S)  # read now: a test shortens it
    config.pluginmanager.register(beat, "stackgate-heartbeat")
    beat.start()
    config.add_cleanup(beat.stop)
