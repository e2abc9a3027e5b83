"""The matrix: every (package version, torch version) pair of a request, judged from the
facts cache (byte ranges of the index's wheels on a miss), with a verdict cache keyed by the
package wheel's sha256 and the torch closure's lock so a warm matrix reads no wheel at all."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version
from pydantic import BaseModel, ConfigDict, ValidationError

from validators.compat.closure import ClosureError, closure_path, torch_closure
from validators.compat.decide import PairInputs, PairVerdict, decide
from validators.compat.index import IndexFile, best_wheel, project_files, size_of
from validators.compat.memo import MemoCache
from validators.lockcheck.facts import FACTS_VERSION
from validators.lockcheck.facts_cache import FactsCache
from validators.lockcheck.lock_wheels import LockWheels

COMPAT_VERSION = 3  # bump when a verdict's meaning changes: cached verdicts are then redone


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
        self.client = httpx.Client(
            timeout=httpx.Timeout(60.0, connect=15.0),
            follow_redirects=True,
            headers={"User-Agent": "stackgate-compat"},
        )
        self._closures: dict[tuple[str, str], LockWheels | ClosureError] = {}

    def close(self) -> None:
        self.client.close()

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

    def _verdict_path(self, request: Request, wheel_sha: str, torch: str) -> Path:
        lock = closure_path(self.cache, torch, request.python, request.torch_index, request.index)
        lock_sha = hashlib.sha256(lock.read_bytes()).hexdigest() if lock.is_file() else "none"
        host = str(self.interpreter) if self.interpreter else "none"
        key = hashlib.sha256(
            json.dumps(
                [COMPAT_VERSION, FACTS_VERSION, wheel_sha, lock_sha, list(request.targets), host]
            ).encode()
        ).hexdigest()
        return self.cache.root / "compat" / "verdicts" / key[:2] / f"{key}.json"

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


def compute(
    request: Request,
    cache: FactsCache,
    interpreter: Path | None,
    progress: Callable[[PairVerdict], None] | None = None,
) -> Matrix:
    started = time.perf_counter()
    session = Session(cache, interpreter)
    try:
        files = project_files(session.client, request.index, request.package)
        torch_files = project_files(session.client, request.torch_index, "torch")
        versions = _pick(files, request.versions, request.prereleases)
        if request.limit is not None:
            versions = versions[-request.limit :]
        torches = _pick(torch_files, request.torch, False)
        pairs: list[PairVerdict] = []
        fetched = 0
        from_cache = 0
        wheel_bytes: dict[str, int] = {}
        pick = functools.lru_cache(maxsize=None)(
            lambda v: best_wheel(files, v, request.python, request.glibc)
        )
        for torch in torches:
            closure = session.closure(request, str(torch))
            if isinstance(closure, LockWheels):
                for w in closure.wheels:
                    wheel_bytes[w.sha256] = w.size
            for version in versions:
                if isinstance(closure, ClosureError):
                    verdict = PairVerdict(
                        package=request.package,
                        version=str(version),
                        torch=str(torch),
                        verdict="undecidable",
                        kind="torch-closure",
                        reason=str(closure),
                    )
                else:
                    chosen = pick(version)
                    wheel = None
                    if chosen is not None:
                        wheel = chosen.locked(request.package, size_of(session.client, chosen))
                        wheel_bytes[wheel.sha256] = wheel.size
                    inputs = PairInputs(
                        package=canonicalize_name(request.package),
                        version=str(version),
                        torch=str(torch),
                        wheel=wheel,
                        closure=closure,
                        cache=session.cache,
                        targets=request.targets,
                        interpreter=interpreter,
                        offline=request.offline,
                        jobs=request.jobs,
                        no_wheel_reason=_no_wheel(files, version, request),
                    )
                    verdict, hit = session.verdict(request, inputs)
                    from_cache += hit
                    if not hit:
                        fetched += verdict.bytes_fetched
                pairs.append(verdict)
                if progress is not None:
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
    )


def _no_wheel(files: list[IndexFile], version: Version, request: Request) -> str:
    tags = sorted({str(t) for f in files if f.version == version for t in f.tags})
    have = ", ".join(tags[:6]) + (" ..." if len(tags) > 6 else "") if tags else "no wheels"
    return (
        f"no wheel for CPython {request.python[0]}.{request.python[1]} on Linux x86_64 with "
        f"glibc {request.glibc[0]}.{request.glibc[1]} (the index has: {have})"
    )
