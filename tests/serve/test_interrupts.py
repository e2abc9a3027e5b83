"""Interrupts: SIGTERM/SIGINT recorded always, raised as KeyboardInterrupt only inside an
interruptible block (once) or at a checkpoint; never lost, previous handlers restored.
Real signals to this very process (os.kill of our own pid: the handler runs at the next
bytecode boundary of the main thread)."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from validators.serve.interrupts import Interrupts
from validators.serve.owned_loop import run_owned

pytestmark = pytest.mark.timeout(60)


def _signal_self(sig: int = signal.SIGTERM) -> None:
    os.kill(os.getpid(), sig)
    for _ in range(100):  # let the handler run here, in this frame
        time.sleep(0.001)


def test_outside_a_block_a_signal_waits_for_a_checkpoint() -> None:
    intr = Interrupts()
    reached: list[str] = []
    with pytest.raises(KeyboardInterrupt), intr.installed():
        _signal_self()
        reached.append("after the signal")  # not cut off: only recorded
        assert intr.signals == [signal.SIGTERM]
        intr.checkpoint()
        reached.append("after the checkpoint")
    assert reached == ["after the signal"]


def test_inside_an_interruptible_block_a_signal_cuts_the_wait_short() -> None:
    intr = Interrupts()
    reached: list[str] = []
    with pytest.raises(KeyboardInterrupt), intr.installed(), intr.interruptible():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)
        reached.append("slept")
    assert reached == []


def test_a_swallowed_interrupt_is_raised_again_at_the_end_of_the_block() -> None:
    intr = Interrupts()
    swallowed: list[str] = []
    with pytest.raises(KeyboardInterrupt), intr.installed():
        with intr.interruptible():
            try:  # a library that eats KeyboardInterrupt (numpy's lazy import did)
                _signal_self()
            except KeyboardInterrupt:
                swallowed.append("eaten")
        pytest.fail("the block ended without raising")
    assert swallowed == ["eaten"]


def test_only_one_raise_per_block_so_cleanup_runs_undisturbed() -> None:
    intr = Interrupts()
    cleaned: list[str] = []
    with pytest.raises(KeyboardInterrupt), intr.installed(), intr.interruptible():
        try:
            _signal_self()
        finally:
            _signal_self()  # a second signal during cleanup: recorded, not raised
            cleaned.append("done")
    assert cleaned == ["done"]
    assert intr.signals == [signal.SIGTERM, signal.SIGTERM]


def test_a_signal_not_yet_raised_is_raised_when_the_handlers_go() -> None:
    # SIGINT as an interactive shell leaves it: a background launch (`cmd &`, nohup: the
    # fresh-machine session's run) starts Python with it ignored, and ignored it stays.
    saved_int = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        intr = Interrupts()
        with pytest.raises(KeyboardInterrupt), intr.installed():
            _signal_self(signal.SIGINT)
        assert intr.signals == [signal.SIGINT]
    finally:
        signal.signal(signal.SIGINT, saved_int)


def test_handlers_restored_and_an_ignored_signal_stays_ignored() -> None:
    saved_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
    saved_term = signal.getsignal(signal.SIGTERM)
    try:
        intr = Interrupts()
        with intr.installed():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) == intr.handler
            _signal_self(signal.SIGINT)  # ignored, as before: nohup keeps working
        assert intr.signals == []
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) == saved_term
    finally:
        signal.signal(signal.SIGINT, saved_int)


def test_a_signal_recorded_just_before_the_bench_loop_takes_over_ends_it() -> None:
    """The hand-over to run_owned: a signal our handler recorded (not raised: no block) just
    before the loop installs its own handlers must still cancel the level, not be lost
    (test_group_synthetic's warm-up case ran the whole 10-minute level without this)."""
    intr = Interrupts()
    unwound: list[str] = []

    async def level() -> None:
        try:
            await asyncio.sleep(30)
        finally:
            unwound.append("cancelled")

    with pytest.raises(KeyboardInterrupt), intr.installed():
        _signal_self()  # recorded only
        run_owned(level(), pending=intr.pending)
    assert unwound == ["cancelled"]
