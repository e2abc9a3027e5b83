"""Read a server log as it grows: weight-loading progress, startup phases, fatal signatures.

Pure: `LogWatch.feed(text)` takes whatever bytes arrived and updates the state; lifecycle
tails the file and calls it. tqdm rewrites its bar with '\\r', so both '\\r' and '\\n' end a
line. Strings are SGLang 0.5.9's, plus vLLM's where they differ, plus the few printed by a
library under the engine (NOT_FROM_ENGINES). tests/serve/test_upstream_strings.py finds every
literal of these patterns in the pinned engines' sources (or the named library's).
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field

from stackgate.engines.sglang import SGLANG_READY
from stackgate.engines.vllm import UVICORN_READY

# (phase, pattern): the last phase whose pattern was seen is the current one. Order matters
# only for display; a phase is entered when its line appears.
PHASES: list[tuple[str, re.Pattern[str]]] = [
    ("init distributed", re.compile(r"Init torch distributed begin")),
    ("load weights", re.compile(r"Load weight begin|Starting to load model|Loading weights")),
    ("weights loaded", re.compile(r"Load weight end|Loading weights took|Model loading took")),
    ("kv cache", re.compile(r"KV Cache is allocated|Memory pool end|# GPU blocks|KV cache size")),
    ("cuda graph capture", re.compile(r"Capture cuda graph begin|Capturing CUDA graphs")),
    ("cuda graph done", re.compile(r"Capture cuda graph end|Graph capturing finished")),
    ("http up", re.compile(rf"Uvicorn running on|{UVICORN_READY}")),
    # The engines' own ready lines (stackgate.engines), not copies of them.
    ("ready", re.compile(SGLANG_READY)),
]

# tqdm bars of weight loading. SGLang: `Loading safetensors checkpoint shards:  50% Completed |
# 32/64 [...]` (weight_utils.py:723, also `Multi-thread loading shards`, `Loading pt checkpoint
# shards`); transformers/vLLM: `Loading checkpoint shards: 50%|###  | 1/2 [...]`.
_PROGRESS = re.compile(
    r"(?P<desc>Loading safetensors checkpoint shards|Multi-thread loading shards|"
    r"Loading pt checkpoint shards|Loading checkpoint shards|Loading weights)"
    r":\s*(?P<pct>\d{1,3})%[^\r\n]*?(?P<n>\d+)/(?P<total>\d+)"
)

# Fatal signatures: seeing one means the server will not become healthy, whatever it does next
# (SGLang often lingers for minutes after a rank died). Label first, then the pattern.
FATAL: list[tuple[str, re.Pattern[str]]] = [
    (
        "CUDA out of memory",
        re.compile(r"CUDA out of memory|torch\.OutOfMemoryError|CUDA error: out of memory"),
    ),
    (
        "NCCL error",
        re.compile(
            r"NCCL error|ncclInternalError|ncclUnhandledCudaError|ncclSystemError|ncclInvalidUsage"
        ),
    ),
    ("undefined symbol", re.compile(r"undefined symbol: \S+")),
    # SGLang torch_symm_mem.py on SM120: TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES has keys 9 and 10.
    ("KeyError: 12", re.compile(r"KeyError: 12\b")),
    (
        "No supported CUDA architectures found",
        re.compile(r"No supported CUDA architectures found[^\r\n]*"),
    ),
    ("Capture cuda graph failed", re.compile(r"Capture cuda graph failed[^\r\n]*")),
    ("warmup failed", re.compile(r"Initialization failed\. warmup error[^\r\n]*")),
    (
        "CUDA error",
        re.compile(r"CUDA error: [^\r\n]*|cudaErrorIllegalAddress|an illegal memory access"),
    ),
    ("port in use", re.compile(r"[Aa]ddress already in use")),
    ("fatal Python error", re.compile(r"Fatal Python error[^\r\n]*|Segmentation fault")),
    # Generic: a rank died, the cause is in the lines that follow. Lifecycle waits a moment
    # for a specific signature before reporting one of these.
    ("scheduler exception", re.compile(r"Scheduler hit an exception")),
    ("child process died", re.compile(r"Received sigquit from a child process")),
]
GENERIC = frozenset({"scheduler exception", "child process died"})

# Literals of the patterns above that neither pinned engine prints itself: literal ->
# (the library that prints it, the string that library's files hold).
NOT_FROM_ENGINES: dict[str, tuple[str, str]] = {
    "Uvicorn running on": ("uvicorn", "Uvicorn running on"),
    "Application startup complete.": ("uvicorn", "Application startup complete."),
    "Loading checkpoint shards": ("transformers", "Loading checkpoint shards"),
    "torch.OutOfMemoryError": ("torch", "OutOfMemoryError"),
    "CUDA error: out of memory": ("torch", "CUDA error: "),  # + the CUDA runtime's message
    "CUDA error: ": ("torch", "CUDA error: "),
    "cudaErrorIllegalAddress": ("CUDA runtime", "cudaErrorIllegalAddress"),
    "an illegal memory access": ("CUDA runtime", "an illegal memory access"),
    "No supported CUDA architectures found": (
        "flashinfer",
        "No supported CUDA architectures found",
    ),
    "undefined symbol: ": ("glibc", "undefined symbol: "),
    "Address already in use": ("glibc", "Address already in use"),
    "Fatal Python error": ("CPython", "Fatal Python error"),
    "Segmentation fault": ("CPython", "Segmentation fault"),  # faulthandler's signal name
    # A dict lookup sglang's torch_symm_mem does with the GPU's major version (12 on SM120):
    # CPython prints the KeyError; the dict is checked in the sglang source by the test.
    "KeyError: 12": ("CPython", "KeyError"),
}

_SPLIT = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class Progress:
    desc: str
    done: int
    total: int

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else 0.0


@dataclass(frozen=True)
class Fatal:
    label: str
    line: str

    @property
    def generic(self) -> bool:
        return self.label in GENERIC


@dataclass
class LogWatch:
    """State read from the log so far."""

    ready_pattern: re.Pattern[str] | None = None
    phase: str = "starting"
    phases_seen: list[str] = field(default_factory=list)
    progress: Progress | None = None
    fatal: Fatal | None = None
    ready_line_seen: bool = False
    lines_seen: int = 0
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=40))
    _partial: str = ""

    def feed(self, text: str) -> None:
        """Take newly read text (any split: a line may arrive in pieces)."""
        pieces = _SPLIT.split(self._partial + text)
        self._partial = pieces.pop()
        for line in pieces:
            self._line(line)

    def flush(self) -> None:
        """Treat a trailing line without newline as complete (at process exit)."""
        if self._partial:
            line, self._partial = self._partial, ""
            self._line(line)

    def _line(self, line: str) -> None:
        if not line.strip():
            return
        self.lines_seen += 1
        self.tail.append(line)
        match = _PROGRESS.search(line)
        if match:
            # With TP every rank draws its own bar; the latest line is close enough for a bar.
            self.progress = Progress(match["desc"], int(match["n"]), int(match["total"]))
            self._enter("load weights")
        for name, pattern in PHASES:
            if pattern.search(line):
                self._enter(name)
        if self.ready_pattern is not None and self.ready_pattern.search(line):
            self.ready_line_seen = True
        if self.fatal is None or self.fatal.generic:
            for label, pattern in FATAL:
                if pattern.search(line):
                    if self.fatal is None or label not in GENERIC:
                        self.fatal = Fatal(label, line.strip()[:500])
                    break

    def _enter(self, name: str) -> None:
        self.phase = name
        if name not in self.phases_seen:
            self.phases_seen.append(name)

    def last_lines(self, count: int = 20) -> list[str]:
        return list(self.tail)[-count:]
