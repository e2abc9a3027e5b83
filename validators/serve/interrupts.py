"""SIGTERM / SIGINT for a whole serve-bench run: recorded always, raised only where it is safe.

A KeyboardInterrupt raised from whatever frame runs when the signal comes can land in a lazy
import that swallows it (numpy's), between the server's Popen and the `try` that tears it down
(the server left running), or in the teardown itself. So the handler only records the signal,
except inside an `interruptible()` block (a blocking HTTP exchange), where it also raises once to
cut the wait short. Elsewhere `checkpoint()`, called where unwinding is safe (each poll of
wait_ready, between phases and requests), raises when a signal was recorded; one swallowed by a
library inside an interruptible block is raised again at the block's end. The bench loop owns
the signals while it runs (owned_loop.py) and asks `pending()` once its handlers are in, so a
signal recorded just before is not lost between the two owners. `cli.main` exits 130.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Interrupts:
    def __init__(self) -> None:
        self.signals: list[int] = []
        self._raise_now = False

    def handler(self, signum: int, frame: FrameType | None) -> None:
        self.signals.append(signum)
        if self._raise_now:
            self._raise_now = False  # once: cleanup code of the block runs undisturbed
            raise KeyboardInterrupt(f"signal {signum}")

    def pending(self) -> int | None:
        """The first signal recorded, if any (run_owned asks it once its handlers are in)."""
        return self.signals[0] if self.signals else None

    def checkpoint(self) -> None:
        """Raise KeyboardInterrupt if a signal came; call where unwinding is safe."""
        if self.signals:
            raise KeyboardInterrupt(f"signal {self.signals[0]}")

    @contextmanager
    def interruptible(self) -> Iterator[None]:
        """A blocking wait that a signal may cut short (KeyboardInterrupt raised in it)."""
        self.checkpoint()
        self._raise_now = True
        try:
            yield
        finally:
            self._raise_now = False
        self.checkpoint()  # the raise was swallowed inside (or came just at the end)

    @contextmanager
    def installed(self) -> Iterator[Interrupts]:
        """Own SIGTERM/SIGINT while the block runs (main thread only; elsewhere signals cannot
        be handled and this is inert). Previous handlers are restored; a signal recorded and
        not yet raised is raised as KeyboardInterrupt at the end."""
        saved: dict[signal.Signals, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in SIGNALS:
                previous = signal.signal(sig, self.handler)
                if previous is signal.SIG_IGN:  # ignored on purpose (nohup): keep it so
                    signal.signal(sig, previous)
                else:
                    saved[sig] = previous
        try:
            yield self
        finally:
            for sig, previous in saved.items():
                # None: the previous handler was not set from Python; the default is the best
                # stand-in there is.
                signal.signal(sig, signal.SIG_DFL if previous is None else previous)
        self.checkpoint()
