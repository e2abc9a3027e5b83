"""Teardown on GPUs shared with other runs: a neighbour's server starting or stopping between
our launch and our teardown is not memory our server failed to release. Pure: NVML snapshots
as NVML returns them (per-device used MiB, per-process MiB)."""

from __future__ import annotations

import pytest

from validators.serve import teardown
from validators.serve.gpu import GpuSnapshot


def test_visible_devices_reads_plain_indices_only() -> None:
    assert teardown.visible_devices({}) is None
    assert teardown.visible_devices({"CUDA_VISIBLE_DEVICES": "1"}) == {1}
    assert teardown.visible_devices({"CUDA_VISIBLE_DEVICES": "0, 3"}) == {0, 3}
    assert teardown.visible_devices({"CUDA_VISIBLE_DEVICES": "GPU-5e1c"}) is None


def test_a_neighbour_started_meanwhile_is_not_our_leak(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    before = GpuSnapshot([500.0, 0.0], {7: 500.0}, [{7: 500.0}, {}])
    # our pid 42 is gone; neighbour 9 started on GPU 0 with 30 GiB; neighbour 7 left
    after = GpuSnapshot([30_000.0, 0.0], {9: 30_000.0}, [{9: 30_000.0}, {}])
    assert teardown._held(after, before, {42}) == [0.0, 0.0]
    # memory nobody accounts for is still caught
    leak = GpuSnapshot([31_000.0, 0.0], {9: 30_000.0}, [{9: 30_000.0}, {}])
    assert teardown._held(leak, before, {42}) == [1000.0, 0.0]


def test_without_per_process_memory_other_gpus_are_left_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where NVML gives no per-process memory, only the GPUs our server could see count."""
    before = GpuSnapshot([0.0, 0.0], {}, [])
    after = GpuSnapshot([0.0, 20_000.0], {}, [])
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    assert teardown._held(after, before, {42}) == [0.0, 0.0]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert teardown._held(after, before, {42}) == [0.0, 20_000.0]
