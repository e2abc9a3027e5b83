"""Test seam for the kill-at-every-step tests (tests/builder/test_faults.py).

STACKGATE_TEST_HOLD_AT=<step> makes `builder build` print `stackgate: holding before <step>`
and wait to be killed when it reaches that step. It is a Reporter wrapper the build command
installs, so the build itself (builder.venv.build) has no test code in its step timer.
"""

from __future__ import annotations

import os
import sys
import time
from contextlib import AbstractContextManager

from builder.compile.watched import Terminal
from builder.venv.build import Reporter
from stackgate.settings import value

HOLD_ENV = "STACKGATE_TEST_HOLD_AT"


class HoldAt(Reporter):
    def __init__(self, inner: Reporter, step: str) -> None:
        self.inner = inner
        self.hold = step

    def step(self, name: str, detail: str = "") -> None:
        if name == self.hold:
            sys.stderr.write(f"stackgate: holding before {name}\n")
            sys.stderr.flush()
            while True:  # the test kills us here
                time.sleep(60)
        self.inner.step(name, detail)

    def line(self, text: str) -> None:
        self.inner.line(text)

    def done(self, name: str, seconds: float) -> None:
        self.inner.done(name, seconds)

    def terminal(self) -> AbstractContextManager[Terminal | None]:
        return self.inner.terminal()


def with_fault_hook(reporter: Reporter) -> Reporter:
    step = value(HOLD_ENV)
    return HoldAt(reporter, step) if step else reporter
