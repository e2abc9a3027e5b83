"""Log parsing on SGLang 0.5.9's strings (fixtures/README.md says how they were assembled)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from stackgate.engines.sglang import SGLANG_READY
from validators.serve.logwatch import FATAL, LogWatch

FIXTURES = Path(__file__).with_name("fixtures")


def _watch() -> LogWatch:
    return LogWatch(ready_pattern=re.compile(SGLANG_READY))


def test_sglang_startup_phases_progress_and_ready() -> None:
    watch = _watch()
    text = (FIXTURES / "sglang-0.5.9-startup.log").read_text()
    # Arrives in odd pieces, lines cut in the middle.
    for i in range(0, len(text), 37):
        watch.feed(text[i:i + 37])
    assert watch.fatal is None
    assert watch.ready_line_seen
    assert watch.phases_seen == ["init distributed", "load weights", "weights loaded", "kv cache",
                                 "cuda graph capture", "cuda graph done", "http up", "ready"]
    assert watch.progress is not None
    assert (watch.progress.desc, watch.progress.done, watch.progress.total) == (
        "Loading safetensors checkpoint shards", 64, 64)


def test_progress_is_read_from_carriage_return_redraws() -> None:
    watch = _watch()
    watch.feed("Loading safetensors checkpoint shards:   0% Completed | 0/64 [00:00<?, ?it/s]\r")
    watch.feed("Loading safetensors checkpoint shards:  50% Completed | 32/64 [04:48<04:48,  9.01s/it]\r")
    assert watch.progress is not None and watch.progress.done == 32
    assert watch.progress.fraction == 0.5
    assert watch.phase == "load weights" and not watch.ready_line_seen


def test_generic_crash_line_gives_way_to_the_specific_cause() -> None:
    watch = _watch()
    watch.feed((FIXTURES / "sglang-0.5.9-crash-keyerror12.log").read_text())
    assert watch.fatal is not None
    assert watch.fatal.label == "KeyError: 12" and not watch.fatal.generic


@pytest.mark.parametrize(
    ("line", "label"),
    [
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "CUDA out of memory"),
        ("RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, unhandled system error", "NCCL error"),
        ("ImportError: /env/lib/python3.12/site-packages/sgl_kernel/sm100/common_ops.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEi", "undefined symbol"),
        ("KeyError: 12", "KeyError: 12"),
        ("RuntimeError: No supported CUDA architectures found for major versions [9, 10].", "No supported CUDA architectures found"),
        ("Exception: Capture cuda graph failed: operation not permitted when stream is capturing", "Capture cuda graph failed"),
        ("Initialization failed. warmup error: Traceback", "warmup failed"),
        ("ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 30000): address already in use", "port in use"),
        ("Received sigquit from a child process. It usually means the child failed.", "child process died"),
    ],
)
def test_fatal_signatures(line: str, label: str) -> None:
    watch = _watch()
    watch.feed(f"[2026-03-02 09:00:33 TP0] {line}\n")
    assert watch.fatal is not None and watch.fatal.label == label


def test_benign_lines_are_not_fatal() -> None:
    watch = _watch()
    watch.feed("Custom allreduce is disabled because it's not supported on more than two PCIe-only GPUs.\n"
               "KeyError: 120\nLoad weight begin. avail mem=91.77 GB\n")
    assert watch.fatal is None


def test_every_signature_label_is_unique() -> None:
    labels = [label for label, _ in FATAL]
    assert len(labels) == len(set(labels))


def test_tail_keeps_the_last_lines() -> None:
    watch = _watch()
    watch.feed("".join(f"line {i}\n" for i in range(100)))
    watch.feed("no newline yet")
    assert watch.last_lines(2) == ["line 98", "line 99"]
    watch.flush()
    assert watch.last_lines(1) == ["no newline yet"]
