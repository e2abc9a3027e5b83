"""Run a coroutine on a fresh event loop that owns SIGTERM and SIGINT while it runs.

Why not plain `asyncio.run`: the CLI's SIGTERM handler raises KeyboardInterrupt from whatever
frame is running. Inside an event loop that can be a task's wake-up callback, between the
future it awaited completing and the task's next step: that task then stays pending for ever
(its waiter is done, so `cancel()` only sets a flag that no step will ever read), and
`asyncio.run`'s cleanup, which cancels every task and waits for them all, never returns.

Here the loop itself takes the signals (`loop.add_signal_handler`): a signal only cancels the
main task, so every await unwinds through its own `finally`, and KeyboardInterrupt is raised
once the loop is closed. No step can wait without bound: the cancelled task gets
`cancel_grace_s`, the remaining tasks and the default executor get as long again, and a second
signal stops waiting at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class _Interrupt:
    """What the loop's signal callback records: the signals seen, the main task to cancel."""

    def __init__(self, loop: asyncio.AbstractEventLoop, task: asyncio.Task[Any], grace_s: float):
        self.loop = loop
        self.task = task
        self.grace_s = grace_s
        self.signals: list[int] = []
        self.timer: asyncio.TimerHandle | None = None

    def __call__(self, signum: int) -> None:
        self.signals.append(signum)
        if len(self.signals) == 1:
            self.task.cancel()
            # A task that swallows or ignores cancellation must not keep the process up.
            self.timer = self.loop.call_later(self.grace_s, self.loop.stop)
        else:
            self.loop.stop()  # a second signal: stop waiting now

    def disarm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()


def run_owned(main: Coroutine[Any, Any, T], cancel_grace_s: float = 5.0) -> T:
    """`asyncio.run(main)` with SIGTERM/SIGINT owned by the loop; a signal ends it with
    KeyboardInterrupt after the loop is closed. Off the main thread (where Python delivers no
    signals) it is plain `asyncio.run`."""
    if threading.current_thread() is not threading.main_thread():
        return asyncio.run(main)
    loop = asyncio.new_event_loop()
    saved: dict[signal.Signals, Any] = {}
    interrupt: _Interrupt | None = None
    try:
        task = loop.create_task(main)
        interrupt = _Interrupt(loop, task, cancel_grace_s)
        for sig in _SIGNALS:
            previous = signal.getsignal(sig)
            if previous is signal.SIG_IGN:
                continue  # ignored on purpose (teardown, nohup): keep ignoring it
            saved[sig] = previous
            loop.add_signal_handler(sig, interrupt, sig)
        try:
            result = loop.run_until_complete(task)
        except (asyncio.CancelledError, RuntimeError):
            # RuntimeError: the loop was stopped (grace timer, second signal) before the end.
            if not interrupt.signals:
                raise
        if interrupt.signals:  # also when the task swallowed its cancellation
            raise KeyboardInterrupt(f"signal {int(interrupt.signals[0])}")
        return result
    finally:
        try:
            if interrupt is not None:
                interrupt.disarm()
            hurry = interrupt is not None and len(interrupt.signals) > 1
            _finish(loop, 0.0 if hurry else cancel_grace_s)
        finally:
            _restore(loop, saved)
            loop.close()


def _restore(loop: asyncio.AbstractEventLoop, saved: dict[signal.Signals, Any]) -> None:
    """Give the signals back to their previous handlers. Blocked meanwhile: between the loop
    letting go (which leaves SIG_DFL) and the old handler coming back, a SIGTERM would kill
    the process without teardown; blocked, it waits and reaches the old handler."""
    if not saved:
        return
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, list(saved))
    try:
        for sig, previous in saved.items():
            loop.remove_signal_handler(sig)
            signal.signal(sig, previous)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)


def _finish(loop: asyncio.AbstractEventLoop, grace_s: float) -> None:
    """Cancel what is left, then shut generators and the executor down, each wait bounded."""
    if loop.is_closed():
        return
    rest = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for t in rest:
        t.cancel()

    async def settle() -> None:
        if rest:
            await asyncio.wait(rest, timeout=grace_s)
        await asyncio.wait_for(loop.shutdown_asyncgens(), timeout=grace_s)
        # Closed transports call connection_lost on the next turn: let them.
        await asyncio.sleep(0)
        await asyncio.wait_for(loop.shutdown_default_executor(), timeout=grace_s)

    with contextlib.suppress(asyncio.CancelledError, TimeoutError, RuntimeError):
        loop.run_until_complete(asyncio.wait_for(settle(), timeout=3 * grace_s + 1))
