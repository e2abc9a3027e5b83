"""Memory-hungry compile jobs made of real processes, and memory cgroups to run them in.

`hog` (C, built with gcc on the spot) stands for one compiler process: it grows its resident
memory step by step to a peak (as cicc/ptxas do on a big translation unit), burns CPU while
touching it, then exits. A Makefile of N such targets is the "source build"; make reads its
parallelism from MAKEFLAGS, which the job plan exports. Used by tests and by
benchmarks/builder/builder_jobs.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

HOG_C = r"""
#include <stdlib.h>
#include <string.h>
#include <time.h>
/* hog PEAK_MB STEPS WORK_MS [HOLD_MS]: grow to PEAK_MB in STEPS steps, touching every page,
   with about WORK_MS of CPU work per step, then keep working HOLD_MS at the peak; exit 0. */
static void work(long ms, volatile char *p, size_t n) {
    struct timespec a, b; clock_gettime(CLOCK_MONOTONIC, &a);
    size_t i = 0;
    for (;;) {
        p[i % n] += 1; i += 4096;
        if ((i & 0xfffff) == 0) {
            clock_gettime(CLOCK_MONOTONIC, &b);
            if ((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000 >= ms) break;
        }
    }
}
int main(int argc, char **argv) {
    long peak = atol(argv[1]), steps = atol(argv[2]), ms = atol(argv[3]);
    size_t chunk = (size_t)(peak * 1024 * 1024 / steps);
    char **blocks = calloc(steps, sizeof(char *));
    for (long s = 0; s < steps; s++) {
        blocks[s] = malloc(chunk);
        memset(blocks[s], (int)s, chunk);
        work(ms, blocks[s], chunk);
    }
    if (argc > 4) work(atol(argv[4]), blocks[steps - 1], chunk);
    for (long s = 0; s < steps; s++) free(blocks[s]);
    return 0;
}
"""


def build_hog(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    src = folder / "hog.c"
    src.write_text(HOG_C)
    exe = folder / "hog"
    subprocess.run(["gcc", "-O1", "-o", str(exe), str(src)], check=True)
    return exe


def write_makefile(
    folder: Path,
    hog: Path,
    *,
    targets: int,
    peak_mb: int,
    steps: int = 20,
    work_ms: int = 40,
    hold_ms: int = 0,
) -> Path:
    """A Makefile whose `all` builds `targets` objects, each one hog run."""
    names = [f"obj{i}.o" for i in range(targets)]
    lines = [".PHONY: all clean", f"all: {' '.join(names)}", ""]
    for name in names:
        lines += [
            f"{name}:",
            f"\t{hog} {peak_mb} {steps} {work_ms} {hold_ms}",
            f"\ttouch {name}",
            "",
        ]
    lines += ["clean:", "\trm -f *.o", ""]
    makefile = folder / "Makefile"
    makefile.write_text("\n".join(lines))
    return makefile


@dataclass
class MemoryCgroup:
    """A memory cgroup with a limit and no swap, v2 where the host allows, else v1."""

    path: Path
    version: str

    def wrap(self, argv: Sequence[str | Path]) -> list[str]:
        """argv that first moves itself into this cgroup, then execs the command."""
        procs = self.path / "cgroup.procs"
        return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(procs), *map(str, argv)]

    def oom_kills(self) -> int:
        name = "memory.events" if self.version == "v2" else "memory.oom_control"
        for line in (self.path / name).read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def peak(self) -> int:
        name = "memory.peak" if self.version == "v2" else "memory.max_usage_in_bytes"
        try:
            return int((self.path / name).read_text().strip())
        except (OSError, ValueError):
            return 0


def _own_v1_memory_path() -> Path:
    root = Path("/sys/fs/cgroup/memory")
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, rel = line.split(":", 2)
        if "memory" in controllers.split(","):
            own = root / rel.lstrip("/")
            if os.access(own, os.W_OK):
                return own
    return root


def cgroup_unavailable_reason() -> str | None:
    """Why no memory cgroup can be made here, or None when one can."""
    if os.geteuid() != 0:
        return "creating cgroups needs root"
    v2 = Path("/sys/fs/cgroup/cgroup.controllers")
    if v2.is_file() and "memory" in v2.read_text().split():
        return None
    if Path("/sys/fs/cgroup/memory/memory.limit_in_bytes").is_file():
        return None
    return "no cgroup v2 memory controller and no cgroup v1 memory hierarchy"


@contextmanager
def memory_cgroup(limit_bytes: int) -> Iterator[MemoryCgroup]:
    name = f"stackgate-test-{uuid.uuid4().hex[:10]}"
    v2 = Path("/sys/fs/cgroup/cgroup.controllers")
    if v2.is_file() and "memory" in v2.read_text().split():
        path = Path("/sys/fs/cgroup") / name
        path.mkdir()
        group = MemoryCgroup(path, "v2")
        (path / "memory.max").write_text(str(limit_bytes))
        (path / "memory.swap.max").write_text("0")
    else:
        path = _own_v1_memory_path() / name
        path.mkdir()
        group = MemoryCgroup(path, "v1")
        (path / "memory.limit_in_bytes").write_text(str(limit_bytes))
        memsw = path / "memory.memsw.limit_in_bytes"
        if memsw.exists():  # memory+swap == memory: no swap at all inside the group
            memsw.write_text(str(limit_bytes))
        (path / "memory.swappiness").write_text("0")
    try:
        yield group
    finally:
        for _ in range(50):
            pids = [int(p) for p in (path / "cgroup.procs").read_text().split()]
            if not pids:
                break
            for pid in pids:
                with suppress(ProcessLookupError):
                    os.kill(pid, 9)  # only our own jobs live in this group
            time.sleep(0.1)
        path.rmdir()


def have_tools() -> str | None:
    missing = [t for t in ("gcc", "make") if shutil.which(t) is None]
    return f"missing {', '.join(missing)}" if missing else None
