"""Run a coroutine on a fresh event loop that owns SIGTERM and SIGINT while it runs.

Not plain `asyncio.run`: the CLI's SIGTERM handler raises KeyboardInterrupt from whatever frame
runs, which in a loop can be a task's wake-up callback; that task then stays pending for ever
(its waiter is done, so `cancel()` sets a flag no step reads) and `asyncio.run`'s cleanup never
returns. Here a signal only records itself and cancels the main task (`call_soon_threadsafe`),
so every await unwinds through its `finally`, and KeyboardInterrupt is raised once the loop is
closed. The cancelled task gets `cancel_grace_s`, the other tasks and the default executor as
long again, and a second signal stops waiting at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Callable, Coroutine
from types import FrameType
from typing import Any, TypeVar

T = TypeVar("T")

_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class _Interrupt:
    """The Python-level handler for SIGTERM/SIGINT while the loop runs.

    It records the signal at once (never lost) and asks the loop, thread-safely, to cancel the main
    task. Installed with `signal.signal`, not `loop.add_signal_handler`: a signal that arrived just
    before the swap would reach asyncio's handler, a no-op relying on a wake-up byte never written.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, task: asyncio.Task[Any], grace_s: float):
        self.loop = loop
        self.task = task
        self.grace_s = grace_s
        self.signals: list[int] = []
        self.timer: asyncio.TimerHandle | None = None

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.signals.append(signum)
        if not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self._fire)

    def _fire(self) -> None:
        if self.task.done():
            return
        if self.timer is None:
            self.task.cancel()
            # A task that swallows or ignores cancellation must not keep the process up.
            self.timer = self.loop.call_later(self.grace_s, self.loop.stop)
        else:
            self.loop.stop()  # a second signal: stop waiting now

    def disarm(self) -> None:
        if self.timer is not None:
            self.timer.cancel()


def run_owned(
    main: Coroutine[Any, Any, T],
    cancel_grace_s: float = 5.0,
    *,
    pending: Callable[[], int | None] | None = None,
) -> T:
    """`asyncio.run(main)` with SIGTERM/SIGINT owned by the loop; a signal ends it with
    KeyboardInterrupt after the loop is closed. Off the main thread (where Python delivers no
    signals) it is plain `asyncio.run`.

    `pending` (serve-bench's Interrupts) names a signal the previous handler recorded and has
    not raised yet; asked AFTER this loop's handlers are in place, so a signal that came just
    before the swap is acted on here instead of being lost between the two owners."""
    if threading.current_thread() is not threading.main_thread():
        return asyncio.run(main)
    loop = asyncio.new_event_loop()
    saved: dict[signal.Signals, Any] = {}
    interrupt: _Interrupt | None = None
    try:
        task = loop.create_task(main)
        interrupt = _Interrupt(loop, task, cancel_grace_s)
        for sig in _SIGNALS:
            previous = signal.signal(sig, interrupt)
            if previous is signal.SIG_IGN:  # ignored on purpose (teardown, nohup): keep it so
                signal.signal(sig, previous)
            else:
                saved[sig] = previous
        earlier = pending() if pending is not None else None
        if earlier is not None:
            interrupt(earlier, None)
        try:
            result = loop.run_until_complete(task)
        except (asyncio.CancelledError, RuntimeError):
            # RuntimeError: the loop was stopped (grace timer, second signal) before the end.
            if not interrupt.signals:
                raise
    finally:
        try:
            if interrupt is not None:
                interrupt.disarm()
            hurry = interrupt is not None and len(interrupt.signals) > 1
            _finish(loop, 0.0 if hurry else cancel_grace_s)
        finally:
            for sig, previous in saved.items():
                signal.signal(sig, previous)
            loop.close()
    if interrupt.signals:  # also one that came after the task ended, or one it swallowed
        raise KeyboardInterrupt(f"signal {int(interrupt.signals[0])}")
    return result


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
