"""The regression dial's CPU parts: the arithmetic, the import hook, the calibration flow.

A stand-in for torch.cuda (events that report a fixed elapsed time, a _sleep that records
its cycles) stands for the GPU, which cannot run here; a real module imported from a real file
stands for SGLang's model_runner, whose import the hook patches.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "gate"))
import regression_dial as rd


@pytest.mark.parametrize("fraction", [0.0, 0.01, 0.03, 0.05, 0.2])
def test_extra_time_gives_exactly_the_fraction(fraction: float) -> None:
    step = 0.0123
    extra = rd.extra_seconds(step, fraction)
    assert rd.slowdown_of(step, extra) == pytest.approx(fraction, abs=1e-12)
    # throughput with the extra is (1 - x) of the throughput without
    assert (1 / (step + extra)) / (1 / step) == pytest.approx(1 - fraction)


def test_bad_dial_values_are_refused() -> None:
    with pytest.raises(ValueError, match="fraction"):
        rd.extra_seconds(0.01, 1.0)
    with pytest.raises(ValueError, match="step time"):
        rd.extra_seconds(0.0, 0.03)
    with pytest.raises(ValueError, match="rate"):
        rd.cycles_for(0.001, 0.0)
    assert rd.cycles_for(0.0003, 1.5e9) == 450_000


class _Event:
    def __init__(self, gpu: _Gpu, **_: Any) -> None:
        self.gpu = gpu
        self.at = 0.0

    def record(self) -> None:
        self.at = self.gpu.clock

    def synchronize(self) -> None:
        self.gpu.syncs += 1

    def elapsed_time(self, end: _Event) -> float:  # ms, as torch's
        return (end.at - self.at) * 1000


class _Cuda:
    def __init__(self, gpu: _Gpu) -> None:
        self.gpu = gpu

    def Event(self, **kw: Any) -> _Event:
        return _Event(self.gpu, **kw)

    def _sleep(self, cycles: int) -> None:
        self.gpu.sleeps.append(cycles)
        self.gpu.clock += cycles / self.gpu.rate


class _Gpu:
    """Stands for torch: a clock that forward steps and sleeps advance."""

    def __init__(self, step_s: float, rate: float) -> None:
        self.clock, self.step_s, self.rate = 0.0, step_s, rate
        self.sleeps: list[int] = []
        self.syncs = 0
        self.cuda = _Cuda(self)


def test_the_hook_patches_the_module_when_it_is_imported(tmp_path: Path) -> None:
    pkg = tmp_path / "dialtarget_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "model_runner.py").write_text(
        "class ModelRunner:\n"
        "    def __init__(self, gpu):\n        self.gpu = gpu\n        self.calls = 0\n"
        "    def forward(self, batch):\n"
        "        self.calls += 1\n        self.gpu.clock += self.gpu.step_s\n        return batch\n"
    )
    sys.path.insert(0, str(tmp_path))
    gpu = _Gpu(step_s=0.010, rate=1.5e9)
    finders = list(sys.meta_path)
    try:
        dial = rd.install(0.05, gpu, module="dialtarget_pkg.model_runner")
        assert "dialtarget_pkg.model_runner" not in sys.modules  # patched on import, not before
        module = importlib.import_module("dialtarget_pkg.model_runner")
        runner = module.ModelRunner(gpu)
        assert runner.forward.regression_dial is dial
        total = dial.skip + dial.steps
        for i in range(total + 10):
            assert runner.forward(i) == i  # the model's answer passes through
        assert runner.calls == total + 10
        assert gpu.syncs == 2  # once for the steps, once for the sleep rate: not per step
        assert dial.cycles == rd.cycles_for(rd.extra_seconds(0.010, 0.05), 1.5e9)
        # the probe sleep, then one fixed sleep per step after calibration
        assert gpu.sleeps[0] == rd.SLEEP_PROBE_CYCLES
        assert gpu.sleeps[1:] == [dial.cycles] * 10
        # the dial's extra over those 10 steps is the asked-for slowdown
        per_step = dial.cycles / gpu.rate
        assert rd.slowdown_of(0.010, per_step) == pytest.approx(0.05, rel=1e-6)
    finally:
        sys.meta_path[:] = finders
        sys.path.remove(str(tmp_path))
        sys.modules.pop("dialtarget_pkg.model_runner", None)
        sys.modules.pop("dialtarget_pkg", None)


def test_no_dial_without_the_variable() -> None:
    assert rd.install_from_env({}) is None


def test_the_control_file_changes_the_dial_without_a_restart(tmp_path: Path) -> None:
    import os

    control = tmp_path / "dial"
    control.write_text("0")
    gpu = _Gpu(step_s=0.020, rate=1.0e9)
    dial = rd.Dial(0.0, gpu, control=str(control), skip=2, steps=4)
    forward = rd.wrap_forward(lambda: gpu.__setattr__("clock", gpu.clock + gpu.step_s), dial)
    for _ in range(6):
        forward()
    assert dial.step_s == pytest.approx(0.020) and dial.cycles == 0
    control.write_text("0.03\n")
    os.utime(control, (1, 1))  # an mtime the dial has not seen
    for _ in range(rd.POLL_STEPS):
        forward()
    assert dial.fraction == 0.03
    assert dial.cycles == rd.cycles_for(rd.extra_seconds(0.020, 0.03), 1.0e9)
    control.write_text("not a number")
    os.utime(control, (2, 2))
    for _ in range(rd.POLL_STEPS):
        forward()
    assert dial.fraction == 0.03  # a bad value keeps the last one


class _ClockingGpu(_Gpu):
    """A GPU whose SM clock is lower while the probe sleeps (the idle clock) than under the
    bench's load: what an H100 showed (probe 1.20e9 cycles/s, ~2e9 between a C=16 bench's steps)."""

    def __init__(self, step_s: float, probe_rate: float, load_rate: float) -> None:
        super().__init__(step_s, load_rate)
        self.probe_rate = probe_rate
        self.cuda = _ClockingCuda(self)


class _ClockingCuda(_Cuda):
    gpu: _ClockingGpu

    def _sleep(self, cycles: int) -> None:
        self.gpu.sleeps.append(cycles)
        rate = self.gpu.probe_rate if cycles == rd.SLEEP_PROBE_CYCLES else self.gpu.rate
        self.gpu.clock += cycles / rate


@pytest.mark.parametrize("load_rate", [2.0e9, 1.2e9, 0.9e9])
def test_the_sleep_is_remeasured_under_load_until_it_gives_the_asked_extra(
    tmp_path: Path, load_rate: float
) -> None:
    import json
    import os

    control = tmp_path / "dial"
    control.write_text("0")
    log = tmp_path / "dial.jsonl"
    gpu = _ClockingGpu(step_s=0.0156, probe_rate=1.2e9, load_rate=load_rate)
    dial = rd.Dial(0.0, gpu, str(log), control=str(control), skip=2, steps=4)
    forward = rd.wrap_forward(lambda: gpu.__setattr__("clock", gpu.clock + gpu.step_s), dial)
    for _ in range(6):
        forward()
    control.write_text("0.03\n")
    os.utime(control, (1, 1))
    for _ in range(rd.VERIFY_STEPS * rd.VERIFY_ROUNDS + 5):
        forward()
    slept = dial.cycles / load_rate  # what a step's sleep now takes under load
    assert rd.slowdown_of(0.0156, slept) == pytest.approx(0.03, rel=0.01)
    events = [json.loads(line) for line in log.read_text().splitlines()]
    measured = [e for e in events if e["event"] == "sleep measured under load"]
    assert measured, events
    assert measured[-1]["missed"] <= rd.VERIFY_TOLERANCE or measured[-1]["round"] < rd.VERIFY_ROUNDS
    # the probe's rate was wrong unless the load clock equals the probe's: then one round
    assert (len(measured) == 1) == (load_rate == 1.2e9)
    assert measured[-1]["cycles_per_s"] == pytest.approx(load_rate, rel=1e-6)
    # once verified, no more timing (no synchronize per step)
    syncs = gpu.syncs
    for _ in range(50):
        forward()
    assert gpu.syncs == syncs
