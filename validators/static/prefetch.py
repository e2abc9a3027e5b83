"""Fill the facts cache for a first-time run in worker processes.

With an empty cache a static run spends most of its CPU on each ELF object's facts (dynamic
symbols and versions, elf_symbols.py; GPU code, fatbin.py), which are independent per file. So
before the resolution asks for them, the uncached files are read by a pool of forked workers (one
per usable CPU, at most MAX_WORKERS) writing into the same FileFactsCache. The run then reads and
validates every entry itself, and a file a worker could not read is read in-process as before,
raising what it raised before: this changes when facts are computed, never what they are.

Nothing is started when few files miss, when one CPU is usable, when no cache is in use, or when
this process runs other threads (forking with threads can deadlock on a lock another thread
held; the CLI runs one thread).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path

from validators.elf.file_facts_cache import FileFactsCache, file_identity
from validators.static.driver_stub import DRIVER_NAME

MAX_WORKERS = 8
MIN_MISSES = 16  # fewer files than this are read in-process: a pool costs more to start
SMALL = 1 << 20  # files below 1 MiB go to the workers 8 at a time


@dataclass(frozen=True)
class Prefetched:
    files: int  # files handed to the workers
    workers: int
    seconds: float
    # every file of the run went to the workers and each answered: `driver_names` is then the
    # driver API the env's objects import and none of them defines
    complete: bool = False
    driver_names: frozenset[str] = frozenset()

    def evidence(self) -> dict[str, float | int]:
        return {
            "facts_read_in_workers": self.files,
            "fact_workers": self.workers,
            "fact_workers_s": round(self.seconds, 3),
        }


def usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def missing(cache: FileFactsCache, paths: list[Path], gpu: bool) -> list[tuple[Path, int]]:
    """The files (with their sizes) whose ELF facts, or GPU facts when `gpu`, are not cached."""
    out: list[tuple[Path, int]] = []
    for path in paths:
        ident = file_identity(path)
        if ident is None:
            continue
        size = int(ident.split(":")[2])
        if size < cache.min_size:
            continue  # read directly, never cached
        if not cache.has("elf", cache.elf_key(ident, path)) or (
            gpu and not cache.has("gpu", ident)
        ):
            out.append((path, size))
    return out


def _fill(root: str, min_size: int, gpu: bool, paths: list[str]) -> tuple[set[str], set[str]]:
    """In a worker: put the facts of `paths` into the cache at `root`; returns the driver API
    names (cu*, nvml*) the files import unversioned and those they export. Any failure is
    left for the main process to meet again (and report) when it reads the file itself."""
    cache = FileFactsCache(Path(root), min_size=min_size)
    imports: set[str] = set()
    exports: set[str] = set()
    for text in paths:
        path = Path(text)
        try:
            obj = cache.elf(path)
            imports.update(i.name for i in obj.imports if i.version is None)
            exports.update(n for n in obj.exports if n.startswith(("cu", "nvml")))
        except Exception:  # the main process reads it again and reports it
            continue
        if gpu:
            with contextlib.suppress(Exception):
                cache.gpu(path)
    return {n for n in imports if DRIVER_NAME.match(n)}, exports


def _fill_gpu(root: str, min_size: int, paths: list[str]) -> None:
    """In a worker: put the GPU facts of `paths` into the cache (after their ELF facts)."""
    cache = FileFactsCache(Path(root), min_size=min_size)
    for text in paths:
        with contextlib.suppress(Exception):  # the main process reads it again and reports it
            cache.gpu(Path(text))


def _job(root: str, min_size: int, job: Callable[[FileFactsCache], object]) -> None:
    with contextlib.suppress(Exception):  # the main process does it again and reports
        job(FileFactsCache(Path(root), min_size=min_size))


def prefetch(
    cache: FileFactsCache | None,
    paths: list[Path],
    *,
    gpu: bool,
    workers: int | None = None,
    jobs: Callable[[], Sequence[Callable[[FileFactsCache], object]]] = tuple,
    on_driver_names: Callable[[frozenset[str]], object] | None = None,
) -> Prefetched | None:
    """Compute the uncached facts of `paths` in worker processes; None when not worth it. `jobs()`,
    asked only when a pool starts: more picklable work for it (functools.partial of a module-level
    function), each given the cache. ELF facts are read first, then GPU facts and the jobs;
    `on_driver_names` gets `Prefetched.driver_names` as soon as every file's ELF facts are in, while
    the pool still works.
    """
    if cache is None:
        return None
    started = time.perf_counter()
    count = min(workers if workers is not None else usable_cpus(), MAX_WORKERS)
    todo = missing(cache, paths, gpu)
    if count < 2 or len(todo) < MIN_MISSES or threading.active_count() > 1:
        return None
    # largest first, one file a task while large, so the big libraries go to different workers
    # and the small ones (batched) fill the gaps; one worker holding them would set the wall time.
    todo.sort(key=lambda item: -item[1])
    small = [str(p) for p, size in todo if size < SMALL]
    batches = [[str(p)] for p, size in todo if size >= SMALL]
    batches += [small[i : i + 8] for i in range(0, len(small), 8)]
    context = multiprocessing.get_context("fork")
    imports: set[str] = set()
    exports: set[str] = set()
    complete = len(todo) == len(paths)
    try:
        with ProcessPoolExecutor(max_workers=count, mp_context=context) as pool:
            root = str(cache.root)
            futures = [pool.submit(_fill, root, cache.min_size, False, b) for b in batches]
            others = [pool.submit(_fill_gpu, root, cache.min_size, b) for b in batches if gpu]
            others += [pool.submit(_job, root, cache.min_size, job) for job in jobs()]
            for future in futures:
                names, defined = future.result()
                imports |= names
                exports |= defined
            if complete and on_driver_names is not None:
                on_driver_names(frozenset(imports - exports))
            for other in others:
                other.result()
    except (BrokenProcessPool, OSError):
        complete = False  # a worker died or none could start: the rest is read in-process
    return Prefetched(
        len(todo),
        count,
        time.perf_counter() - started,
        complete,
        frozenset(imports - exports) if complete else frozenset(),
    )
