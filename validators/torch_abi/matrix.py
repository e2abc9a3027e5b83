"""The matrix: every (package version, torch version) pair of a request, judged from the
facts cache (byte ranges of the index's wheels on a miss), with a verdict cache keyed by the
package wheel's sha256 and the torch closure's lock so a warm matrix reads no wheel at all."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version
from pydantic import BaseModel, ConfigDict, ValidationError

from stackgate.lock.torch_abi import VERDICT_VERSION, PairVerdict
from stackgate.lock.wheel_listing import FACTS_VERSION
from stackgate.lock.wheels import LockedWheel, LockWheels
from validators.elf.facts_cache import FactsCache
from validators.lockcheck.scan import Scanner
from validators.torch_abi.closure import ClosureError, closure_path, torch_closure
from validators.torch_abi.decide import PairInputs, decide, host_source
from validators.torch_abi.index import IndexFile, best_wheel, project_files, size_of
from validators.torch_abi.memo import MemoCache

# Requests in flight while the matrix's wheels are read: each read is a round trip, so a cold
# matrix waits on the network, not on the CPU (benchmarks/compat/results/compat.md)
PREFETCH_JOBS = 16  # stackgate.bounded_http.make_client keeps 16 connections
CLOSURE_JOBS = 3  # `uv lock` of torch closures at once


class Matrix(BaseModel):
    model_config = ConfigDict(extra="forbid")

    package: str
    python: str
    glibc: str
    index: str
    torch_index: str
    targets: list[str]
    versions: list[str]
    torch_versions: list[str]
    pairs: list[PairVerdict]
    seconds: float
    bytes_fetched: int
    wheel_bytes: int  # bytes of the distinct wheels judged (package wheels + torch closures)
    verdicts_from_cache: int
    prefetch_seconds: float = 0.0  # reading every wheel's facts before judging (cold: most)
    prefetch_bytes: int = 0  # of bytes_fetched, read by the prefetch (the rest: by pairs)
    requests: int = 0  # HTTP requests of the prefetch

    def pair(self, version: str, torch: str) -> PairVerdict | None:
        for p in self.pairs:
            if p.version == version and p.torch == torch:
                return p
        return None


@dataclass(frozen=True)
class Request:
    package: str
    versions: tuple[SpecifierSet, ...]  # a union
    torch: tuple[SpecifierSet, ...]  # a union
    python: tuple[int, int] = (3, 12)
    glibc: tuple[int, int] = (2, 35)
    index: str = "https://pypi.org/simple"
    torch_index: str = "https://pypi.org/simple"
    targets: tuple[str, ...] = ()
    offline: bool = False
    jobs: int = 6
    prereleases: bool = False
    limit: int | None = None  # newest N package versions
    processes: int = 1  # worker processes judging torch columns (cold: CPU-bound)


def _pick(
    files: list[IndexFile], specs: tuple[SpecifierSet, ...], prereleases: bool
) -> list[Version]:
    seen = sorted({f.version for f in files if not f.yanked})
    return [v for v in seen if any(s.contains(v, prereleases=prereleases) for s in specs)]


class Session:
    """One client, one memoized cache, torch closures resolved once."""

    def __init__(self, cache: FactsCache, interpreter: Path | None) -> None:
        self.cache = MemoCache(cache)
        self.interpreter = interpreter
        self.host = host_source()
        self._client: httpx.Client | None = None
        self._closures: dict[tuple[str, str], LockWheels | ClosureError] = {}
        self._lock_shas: dict[tuple[str, str], str] = {}  # closure lock sha256 by torch

    @property
    def client(self) -> httpx.Client:
        """Made on first use: a column judged from cached verdicts never reads the index, and
        a client's SSL context costs CPU in every column (benchmarks/compat/results/compat.md)."""
        if self._client is None:
            self._client = httpx.Client(
                timeout=httpx.Timeout(60.0, connect=15.0),
                follow_redirects=True,
                headers={"User-Agent": "stackgate-compat"},
            )
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    def closure(self, request: Request, torch: str) -> LockWheels | ClosureError:
        key = (torch, request.torch_index)
        if key not in self._closures:
            try:
                self._closures[key] = torch_closure(
                    self.cache,
                    torch,
                    request.python,
                    torch_index=request.torch_index,
                    index=request.index,
                    offline=request.offline,
                )
            except ClosureError as exc:
                self._closures[key] = exc
        return self._closures[key]

    def _lock_sha(self, request: Request, torch: str) -> str:
        key = (torch, request.torch_index)
        if key not in self._lock_shas:
            lock = closure_path(
                self.cache, torch, request.python, request.torch_index, request.index
            )
            self._lock_shas[key] = (
                hashlib.sha256(lock.read_bytes()).hexdigest() if lock.is_file() else "none"
            )
        return self._lock_shas[key]

    def _verdict_path(self, request: Request, wheel_sha: str, torch: str) -> Path:
        lock_sha = self._lock_sha(request, torch)
        host = str(self.interpreter) if self.interpreter else "none"
        key = hashlib.sha256(
            json.dumps(
                [VERDICT_VERSION, FACTS_VERSION, wheel_sha, lock_sha, list(request.targets), host]
            ).encode()
        ).hexdigest()
        return self.cache.root / "compat" / "verdicts" / key[:2] / f"{key}.json"

    def verdict_cached(self, request: Request, wheel_sha: str, torch: str) -> bool:
        return self._verdict_path(request, wheel_sha, torch).is_file()

    def verdict(self, request: Request, inputs: PairInputs) -> tuple[PairVerdict, bool]:
        if inputs.wheel is None:
            return decide(inputs), False
        path = self._verdict_path(request, inputs.wheel.sha256, inputs.torch)
        try:
            return PairVerdict.model_validate_json(path.read_text(encoding="utf-8")), True
        except (OSError, ValidationError):
            pass
        verdict = decide(inputs)
        if verdict.verdict != "undecidable" or verdict.kind not in ("fetch",):
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(verdict.model_dump_json(), encoding="utf-8")
            tmp.replace(path)
        return verdict, False


def _best_locked(
    session: Session, request: Request, files: list[IndexFile], version: Version
) -> LockedWheel | None:
    """The version's wheel for the request's Python and glibc, or None where none fits."""
    chosen = best_wheel(files, version, request.python, request.glibc)
    if chosen is None:
        return None
    return chosen.locked(request.package, size_of(session.client, chosen))


def compute(
    request: Request,
    cache: FactsCache,
    interpreter: Path | None,
    progress: Callable[[PairVerdict], None] | None = None,
) -> Matrix:
    """Three phases: the torch closures (`uv lock`, a few at once); every wheel's facts read
    at once into the cache (the waiting is on round trips, so many requests in flight);
    then each pair judged from the cache (CPU only; torch columns in `processes` workers)."""
    started = time.perf_counter()
    session = Session(cache, interpreter)
    try:
        files = project_files(session.client, request.index, request.package)
        torch_files = project_files(session.client, request.torch_index, "torch")
        versions = _pick(files, request.versions, request.prereleases)
        if request.limit is not None:
            versions = versions[-request.limit :]
        torches = _pick(torch_files, request.torch, False)
        judged = torches if versions else []  # no version: no closure to resolve
        with ThreadPoolExecutor(max_workers=CLOSURE_JOBS) as pool:
            resolved = list(pool.map(lambda t: session.closure(request, str(t)), judged))
        closures = dict(zip(judged, resolved, strict=True))
        wheels = {v: _best_locked(session, request, files, v) for v in versions}
        wheel_bytes: dict[str, int] = {}
        for closure in closures.values():
            if isinstance(closure, LockWheels):
                wheel_bytes.update((w.sha256, w.size) for w in closure.wheels)
        wheel_bytes.update((w.sha256, w.size) for w in wheels.values() if w is not None)
        pre_started = time.perf_counter()
        prefetched, requests, uncached = _prefetch(session, request, wheels, closures)
        fetched = prefetched
        prefetch_seconds = time.perf_counter() - pre_started
        columns = [
            _Column(
                request,
                str(torch),
                closures[torch],
                [(str(v), wheels[v], _no_wheel(files, v, request)) for v in versions],
                cache.root,
                interpreter,
            )
            for torch in judged
        ]
        pairs: list[PairVerdict] = []
        from_cache = 0
        # every verdict cached: reading them in this process beats starting workers
        processes = request.processes if uncached else 1
        for column_pairs, hits, column_fetched in _judge_columns(columns, processes):
            pairs.extend(column_pairs)
            from_cache += hits
            fetched += column_fetched  # what the prefetch could not read
            if progress is not None:
                for verdict in column_pairs:
                    progress(verdict)
    finally:
        session.close()
    return Matrix(
        package=canonicalize_name(request.package),
        python=f"{request.python[0]}.{request.python[1]}",
        glibc=f"{request.glibc[0]}.{request.glibc[1]}",
        index=request.index,
        torch_index=request.torch_index,
        targets=list(request.targets),
        versions=[str(v) for v in versions],
        torch_versions=[str(t) for t in torches],
        pairs=pairs,
        seconds=round(time.perf_counter() - started, 2),
        bytes_fetched=fetched,
        wheel_bytes=sum(wheel_bytes.values()),
        verdicts_from_cache=from_cache,
        prefetch_seconds=round(prefetch_seconds, 2),
        prefetch_bytes=prefetched,
        requests=requests,
    )


@dataclass(frozen=True)
class _Column:
    """One torch version's pairs: what a worker process needs to judge them (picklable)."""

    request: Request
    torch: str
    closure: LockWheels | ClosureError
    versions: list[tuple[str, LockedWheel | None, str]]  # version, its wheel, why none
    cache_root: Path
    interpreter: Path | None


def _judge_columns(
    columns: list[_Column], processes: int
) -> list[tuple[list[PairVerdict], int, int]]:
    """Each column judged from the cache (CPU only, after the prefetch): in worker processes
    where there are several columns and cores, so a cold matrix uses every core it is given."""
    workers = min(processes, len(columns))
    if workers <= 1:
        return [_judge_column(c) for c in columns]
    spawn = multiprocessing.get_context("spawn")  # no fork of a process with threads
    with ProcessPoolExecutor(max_workers=workers, mp_context=spawn) as pool:
        return list(pool.map(_judge_column, columns))


def _judge_column(column: _Column) -> tuple[list[PairVerdict], int, int]:
    request = column.request
    pairs: list[PairVerdict] = []
    hits = fetched = 0
    session = Session(FactsCache(column.cache_root), column.interpreter)
    try:
        for version, wheel, no_wheel in column.versions:
            if isinstance(column.closure, ClosureError):
                pairs.append(
                    PairVerdict(
                        package=request.package,
                        version=version,
                        torch=column.torch,
                        verdict="undecidable",
                        kind="torch-closure",
                        reason=str(column.closure),
                    )
                )
                continue
            inputs = PairInputs(
                package=canonicalize_name(request.package),
                version=version,
                torch=column.torch,
                wheel=wheel,
                closure=column.closure,
                cache=session.cache,
                targets=request.targets,
                interpreter=column.interpreter,
                offline=request.offline,
                jobs=request.jobs,
                no_wheel_reason=no_wheel,
                host=session.host,
            )
            verdict, hit = session.verdict(request, inputs)
            hits += hit
            if not hit:
                fetched += verdict.bytes_fetched
            pairs.append(verdict)
    finally:
        session.close()
    return pairs, hits, fetched


def _prefetch(
    session: Session,
    request: Request,
    wheels: dict[Version, LockedWheel | None],
    closures: dict[Version, LockWheels | ClosureError],
) -> tuple[int, int, int]:
    """Every distinct wheel of the matrix whose verdict is not cached, read into the facts
    cache by one scan with many requests in flight. What it cannot read (a network error)
    is read again by its pair's own check, which then says why it is undecidable. Returns
    (bytes, requests, pairs whose verdict is not cached)."""
    todo: dict[tuple[str, str], LockedWheel] = {}
    uncached = 0
    for torch, closure in closures.items():
        if isinstance(closure, ClosureError):
            continue
        needed = [
            w
            for w in wheels.values()
            if w is not None and not session.verdict_cached(request, w.sha256, str(torch))
        ]
        uncached += len(needed)
        if needed:
            todo.update((w.key, w) for w in needed)
            todo.update((w.key, w) for w in closure.wheels)
    if not todo or request.offline:
        return 0, 0, uncached
    scanner = Scanner(
        session.cache,
        offline=False,
        virtual_site=Path("/stackgate-compat/prefetch"),
        jobs=max(request.jobs, PREFETCH_JOBS),
    )
    try:
        report = scanner.scan(list(todo.values()))
    finally:
        scanner.close()
    return report.bytes_fetched, sum(w.requests for w in report.wheels), uncached


def _no_wheel(files: list[IndexFile], version: Version, request: Request) -> str:
    tags = sorted({str(t) for f in files if f.version == version for t in f.tags})
    have = ", ".join(tags[:6]) + (" ..." if len(tags) > 6 else "") if tags else "no wheels"
    return (
        f"no wheel for CPython {request.python[0]}.{request.python[1]} on Linux x86_64 with "
        f"glibc {request.glibc[0]}.{request.glibc[1]} (the index has: {have})"
    )
