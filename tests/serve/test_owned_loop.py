"""run_owned: the event loop takes SIGTERM/SIGINT while it runs, cancels the main task, and
ends with KeyboardInterrupt after the loop is closed; the previous handlers come back.

Real signals to this very process: while run_owned runs, the loop owns them; around it a
recording handler stands in for the CLI's (so a stray signal fails the test instead of
killing pytest).
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator
from types import FrameType

import pytest

from validators.serve.owned_loop import run_owned

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def outside() -> Iterator[list[int]]:
    """A recording SIGTERM handler for the time around run_owned, and Python's own SIGINT
    handler (a shell's `cmd &` starts Python with SIGINT ignored, which run_owned rightly keeps
    ignored); both restored afterwards."""
    seen: list[int] = []

    def record(signum: int, frame: FrameType | None) -> None:
        seen.append(signum)

    saved_term = signal.signal(signal.SIGTERM, record)
    saved_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield seen
    finally:
        signal.signal(signal.SIGTERM, saved_term)
        signal.signal(signal.SIGINT, saved_int)


def _kill_self_soon(sig: int = signal.SIGTERM, times: int = 1) -> None:
    loop = asyncio.get_running_loop()
    for i in range(times):
        loop.call_later(0.05 * (i + 1), os.kill, os.getpid(), sig)


def test_a_result_comes_back_and_the_handlers_are_restored(outside: list[int]) -> None:
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)

    async def main() -> int:
        await asyncio.sleep(0)
        return 7

    assert run_owned(main()) == 7
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before
    assert outside == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_cancels_the_task_through_its_finally(outside: list[int], sig: int) -> None:
    unwound: list[str] = []

    async def stuck(name: str) -> None:
        try:
            await asyncio.Event().wait()
        finally:
            unwound.append(name)

    async def main() -> None:
        _kill_self_soon(sig)
        await asyncio.gather(stuck("a"), stuck("b"))

    with pytest.raises(KeyboardInterrupt, match=f"signal {int(sig)}"):
        run_owned(main())
    assert sorted(unwound) == ["a", "b"]
    assert outside == []  # the loop took it, not the handler outside
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_task_that_ignores_cancellation_cannot_keep_it_running(outside: list[int]) -> None:
    async def stubborn() -> None:
        _kill_self_soon()
        while True:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                continue  # swallows every cancellation

    with pytest.raises(KeyboardInterrupt):
        run_owned(stubborn(), cancel_grace_s=0.3)
    assert outside == []


def test_a_second_signal_stops_waiting_at_once(outside: list[int]) -> None:
    async def stubborn() -> None:
        _kill_self_soon(times=2)
        while True:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                continue

    # A grace far beyond the pytest timeout: only the second signal can end this in time.
    with pytest.raises(KeyboardInterrupt):
        run_owned(stubborn(), cancel_grace_s=3600)
    assert outside == []


def test_an_ignored_signal_stays_ignored() -> None:
    saved = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:

        async def main() -> str:
            _kill_self_soon()
            await asyncio.sleep(0.3)  # the SIGTERM arrives meanwhile and is ignored
            return "done"

        assert run_owned(main()) == "done"
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, saved)


def test_a_signal_arriving_after_the_loop_reaches_the_previous_handler(
    outside: list[int],
) -> None:
    async def main() -> None:
        await asyncio.sleep(0)

    run_owned(main())
    os.kill(os.getpid(), signal.SIGTERM)
    assert outside == [signal.SIGTERM]
