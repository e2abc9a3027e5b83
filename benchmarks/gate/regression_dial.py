"""A regression of known size for the gate's mutation test: every forward step of the
candidate's SGLang server does a fixed extra amount of GPU work, calibrated in the server
itself to make decode a chosen fraction slower.

How: an import hook (sitecustomize in dial_site/, active when STACKGATE_DIAL is set) wraps
`ModelRunner.forward` of `sglang.srt.model_executor.model_runner` when that module is
imported, in every process that imports it (SGLang's scheduler runs in a spawned child, which
inherits the environment). After each forward the wrapper enqueues `torch.cuda._sleep(cycles)`
on the current stream: GPU time that nothing else can use, outside any CUDA graph.

Calibration (in seconds, inside the GPU booking): the first CALIBRATION_STEPS forwards after
CALIBRATION_SKIP warm-up steps are timed with CUDA events (one synchronize, once); the extra
time per step is median_step * x / (1 - x), so that throughput 1 / (step + extra) is (1 - x)
of 1 / step; the `_sleep` rate (cycles per second) is first probed with events around a known
number of cycles, then measured again under the load it runs in: after every change of the
setting the next VERIFY_STEPS sleeps are timed with events around each (one synchronize), the
rate is re-read from their median and the cycles recomputed, until the measured extra is within
VERIFY_TOLERANCE of the asked one (at most VERIFY_ROUNDS rounds). Why: on an H100 the probe read
1.20e9 cycles/s, but the sleeps between a C=16 bench's steps ran at ~2e9 (the SM clock under
load), so a 3% dial slowed the decode step by 1.8% and a 5% one by 3.1%
(benchmarks/gate/results/dial-h100-1/). Until calibrated the dial adds nothing. Every calibration
and measurement is written to STACKGATE_DIAL_LOG (JSON lines) so the result page can show it.

One candidate server can serve several dial settings without a restart (no restart offset
between the equal and the dialled gates): with STACKGATE_DIAL_FILE set, the fraction is read
from that file (a number; its mtime checked every POLL_STEPS steps: one stat, microseconds) and the cycles are
recomputed from the calibration, which does not depend on the fraction (it times undialled
steps). STACKGATE_DIAL=0 with a file starts undialled.

The fraction applies to the step mix the calibration saw (decode-dominated at fixed lengths);
prefill steps get the same fixed extra, which is a smaller fraction of a longer step.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

TARGET_MODULE = "sglang.srt.model_executor.model_runner"
TARGET_CLASS = "ModelRunner"
TARGET_METHOD = "forward"
CALIBRATION_SKIP = 50
CALIBRATION_STEPS = 200
SLEEP_PROBE_CYCLES = 20_000_000
POLL_STEPS = 1
VERIFY_STEPS = 16
VERIFY_TOLERANCE = 0.03
VERIFY_ROUNDS = 3


def extra_seconds(step_s: float, fraction: float) -> float:
    """Extra time per step that makes throughput `fraction` lower: 1/(s+e) = (1-x)/s."""
    if not 0 <= fraction < 1:
        raise ValueError(f"dial fraction {fraction} must be in [0, 1)")
    if step_s <= 0:
        raise ValueError(f"step time {step_s} must be positive")
    return step_s * fraction / (1 - fraction)


def cycles_for(seconds: float, cycles_per_s: float) -> int:
    if cycles_per_s <= 0:
        raise ValueError("the GPU sleep rate must be positive")
    return max(0, round(seconds * cycles_per_s))


def slowdown_of(step_s: float, extra_s: float) -> float:
    """The throughput loss an extra time per step gives (the inverse of extra_seconds)."""
    return extra_s / (step_s + extra_s)


@dataclass
class Dial:
    """The per-process dial state: calibrating, then a fixed number of sleep cycles a step."""

    fraction: float
    gpu: Any  # the torch module (a stand-in in CPU tests)
    log_path: str | None = None
    control: str | None = None  # a file holding the fraction, re-read when it changes
    skip: int = CALIBRATION_SKIP
    steps: int = CALIBRATION_STEPS
    seen: int = 0
    cycles: int | None = None
    step_s: float | None = None
    rate: float | None = None
    control_mtime: float | None = None
    timings: list[tuple[Any, Any]] = field(default_factory=list)
    sleeps: list[tuple[Any, Any]] = field(default_factory=list)  # timed sleeps under load
    rounds: int = 0  # verification rounds since the setting changed
    extra: float = 0.0  # the extra seconds a step asked for

    def after_forward(self, start: Any, end: Any) -> None:
        """Called after each forward with the events around it."""
        self.seen += 1
        if self.cycles is not None:
            if self.control and self.seen % POLL_STEPS == 0:
                self.poll()
            if self.cycles:
                self.sleep()
            return
        if self.seen > self.skip:
            self.timings.append((start, end))
        if len(self.timings) >= self.steps:
            self.calibrate()

    def sleep(self) -> None:
        """The step's extra GPU time; timed while the setting is being verified under load."""
        assert self.cycles is not None
        if self.rounds >= VERIFY_ROUNDS:
            self.gpu.cuda._sleep(self.cycles)
            return
        start = self.gpu.cuda.Event(enable_timing=True)
        end = self.gpu.cuda.Event(enable_timing=True)
        start.record()
        self.gpu.cuda._sleep(self.cycles)
        end.record()
        self.sleeps.append((start, end))
        if len(self.sleeps) >= VERIFY_STEPS:
            self.verify()

    def verify(self) -> None:
        """Re-read the sleep rate from the timed sleeps; recompute the cycles if they missed."""
        assert self.cycles is not None and self.step_s is not None
        self.sleeps[-1][1].synchronize()
        slept = statistics.median(s.elapsed_time(e) / 1000 for s, e in self.sleeps)
        self.sleeps.clear()
        self.rounds += 1
        if slept <= 0:
            self.rounds = VERIFY_ROUNDS
            return
        missed = abs(slept - self.extra) / self.extra if self.extra else 0.0
        self.rate = self.cycles / slept
        if missed <= VERIFY_TOLERANCE:
            self.rounds = VERIFY_ROUNDS
        else:
            self.cycles = cycles_for(self.extra, self.rate)
        self.record({"event": "sleep measured under load", "asked_extra_s": self.extra,
                     "slept_s": slept, "missed": missed, "cycles_per_s": self.rate,
                     "cycles": self.cycles, "fraction": self.fraction,
                     "realized_fraction": slowdown_of(self.step_s, slept),
                     "round": self.rounds, "pid": os.getpid()})  # fmt: skip

    def calibrate(self) -> None:
        self.timings[-1][1].synchronize()
        self.step_s = statistics.median(s.elapsed_time(e) / 1000 for s, e in self.timings)
        self.rate = self.sleep_rate()
        self.timings.clear()
        self.set_fraction(self.fraction, "calibrated")

    def set_fraction(self, fraction: float, why: str) -> None:
        assert self.step_s is not None and self.rate is not None
        extra = extra_seconds(self.step_s, fraction)
        self.fraction, self.cycles = fraction, cycles_for(extra, self.rate)
        self.extra, self.rounds = extra, 0
        self.sleeps.clear()
        self.record({"event": why, "median_step_s": self.step_s, "cycles_per_s": self.rate,
                     "extra_s": extra, "cycles": self.cycles, "fraction": fraction,
                     "pid": os.getpid()})  # fmt: skip

    def poll(self) -> None:
        """Re-read the control file when its mtime moved; a bad value keeps the last one."""
        assert self.control is not None
        try:
            mtime = os.stat(self.control).st_mtime
            if mtime == self.control_mtime:
                return
            self.control_mtime = mtime
            with open(self.control, encoding="utf-8") as f:
                wanted = float(f.read().strip())
        except (OSError, ValueError) as exc:
            self.record({"event": "control unreadable", "error": str(exc)})
            return
        if wanted != self.fraction:
            self.set_fraction(wanted, "set from control file")

    def sleep_rate(self) -> float:
        """Cycles per second of torch.cuda._sleep on this GPU, from events around it."""
        start, end = (
            self.gpu.cuda.Event(enable_timing=True),
            self.gpu.cuda.Event(enable_timing=True),
        )
        start.record()
        self.gpu.cuda._sleep(SLEEP_PROBE_CYCLES)
        end.record()
        end.synchronize()
        return float(SLEEP_PROBE_CYCLES / (start.elapsed_time(end) / 1000))

    def record(self, facts: dict[str, Any]) -> None:
        print(f"regression dial: {json.dumps(facts)}", file=sys.stderr, flush=True)
        if self.log_path:
            with open(self.log_path, "a", encoding="utf-8") as out:
                out.write(json.dumps({**facts, "at": time.time()}) + "\n")


def wrap_forward(forward: Callable[..., Any], dial: Dial) -> Callable[..., Any]:
    def forward_with_dial(*args: Any, **kwargs: Any) -> Any:
        timing = dial.cycles is None
        if timing:
            start = dial.gpu.cuda.Event(enable_timing=True)
            start.record()
        out = forward(*args, **kwargs)
        if timing:
            end = dial.gpu.cuda.Event(enable_timing=True)
            end.record()
            dial.after_forward(start, end)
        else:
            dial.after_forward(None, None)
        return out

    forward_with_dial.__wrapped__ = forward  # type: ignore[attr-defined]
    forward_with_dial.regression_dial = dial  # type: ignore[attr-defined]
    return forward_with_dial


def patch_module(module: ModuleType, dial: Dial) -> None:
    cls = getattr(module, TARGET_CLASS)
    setattr(cls, TARGET_METHOD, wrap_forward(getattr(cls, TARGET_METHOD), dial))


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, inner: importlib.abc.Loader, on_load: Callable[[ModuleType], None]) -> None:
        self.inner = inner
        self.on_load = on_load

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.inner.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.inner.exec_module(module)
        self.on_load(module)


class DialFinder(importlib.abc.MetaPathFinder):
    """Finds TARGET_MODULE through the other finders and patches it once it has run."""

    def __init__(self, name: str, on_load: Callable[[ModuleType], None]) -> None:
        self.name = name
        self.on_load = on_load

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:  # fmt: skip
        if fullname != self.name:
            return None
        for finder in sys.meta_path:
            if finder is self:
                continue
            find = getattr(finder, "find_spec", None)
            spec: importlib.machinery.ModuleSpec | None = (
                find(fullname, path, target) if find else None
            )
            if spec is not None and spec.loader is not None:
                spec.loader = _PatchingLoader(spec.loader, self.on_load)
                return spec
        return None


def install(fraction: float, gpu: Any, *, module: str = TARGET_MODULE,
            log_path: str | None = None, control: str | None = None) -> Dial:  # fmt: skip
    """Patch `module` when it is imported (now, if it already is)."""
    dial = Dial(fraction, gpu, log_path, control)
    if module in sys.modules:
        patch_module(sys.modules[module], dial)
    else:
        sys.meta_path.insert(0, DialFinder(module, lambda m: patch_module(m, dial)))
    return dial


def install_from_env(environ: dict[str, str] | None = None) -> Dial | None:
    env = os.environ if environ is None else environ
    raw = env.get("STACKGATE_DIAL")
    if not raw:
        return None
    import torch  # the server's torch; only where the dial is asked for

    return install(float(raw), torch, log_path=env.get("STACKGATE_DIAL_LOG"),
                   control=env.get("STACKGATE_DIAL_FILE"))  # fmt: skip
