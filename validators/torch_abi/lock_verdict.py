"""The torch-ABI verdict of a uv.lock, for `builder lock`: every binary package of the lock
that links torch (its ELF objects need libtorch*/libc10*) is judged beside the locked torch,
from byte ranges of the locked wheels (the facts cache first). A pair that breaks refuses the
lock, naming the nearest versions that load (a small matrix around the pair, computed on the
refusal only). The verdict of a lock is cached by the lock's sha256: a warm lock reads one
small file."""

from __future__ import annotations

import hashlib
import os
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from stackgate.errors import BadInput
from stackgate.lock.torch_abi import (
    PYPI,
    LockVerdict,
    PairVerdict,
    binary_key,
    by_binaries_path,
    cached_lock,
    http_wheels,
    lock_record_path,
    lock_registries,
    read_by_binaries,
)
from stackgate.lock.uvlock import UvLock, read_uv_lock
from stackgate.lock.wheels import LockError, LockWheels, read_lock
from validators.elf.facts_cache import FactsCache

if TYPE_CHECKING:
    from validators.torch_abi.memo import MemoCache

# The judging modules (the static check: numpy, pyelftools, httpx: slow imports) are
# imported where a verdict is computed: a lock whose verdict is cached by its binary wheels is
# answered without them (the child's start is most of a changed lock's overhead).

NEAR_VERSIONS = 4  # package versions on each side of the locked one, for the alternatives
NEAR_TORCH = 2  # torch versions on each side of the locked one


def torch_linkers(report_wheels: list[object]) -> list[str]:
    """Distributions (canonical names) whose objects need libtorch*/libc10* (torch aside)."""
    out: list[str] = []
    for scan in report_wheels:
        name = scan.wheel.name  # type: ignore[attr-defined]
        if name == "torch":
            continue
        facts = scan.facts.values()  # type: ignore[attr-defined]
        if any(n.startswith(("libtorch", "libc10")) for f in facts for n in f.needed):
            out.append(name)
    return sorted(out)


def check_lock(
    lock: Path,
    cache: FactsCache,
    *,
    index: str = PYPI,
    offline: bool = False,
    jobs: int = 6,
) -> LockVerdict:
    started = time.perf_counter()
    data = lock.read_bytes()
    lock_sha = hashlib.sha256(data).hexdigest()
    cached = lock_record_path(cache.root, lock_sha)
    hit = cached_lock(lock, cache.root)
    if hit is not None:
        return hit.model_copy(
            update={"from_cache": True, "seconds": round(time.perf_counter() - started, 3)}
        )
    try:
        parsed = _parsed(lock)  # read once: the wheels and the registries are from it
        wheels = http_wheels(read_lock(lock, parsed=parsed))
    except LockError as exc:  # a file:// index gives no sizes: nothing is read, nothing judged
        return _no_pairs(lock_sha, round(time.perf_counter() - started, 3), f"not checked: {exc}")
    torch = next((w for w in wheels.wheels if w.name == "torch"), None)
    registries = lock_registries(parsed)
    binary = binary_key(registries, wheels, cache) if torch is not None else None
    same = read_by_binaries(cache.root, binary) if binary is not None else None
    if same is not None:
        seconds = round(time.perf_counter() - started, 3)
        return same.model_copy(update={"lock_sha256": lock_sha, "from_cache": True,
                                       "seconds": seconds})  # fmt: skip
    if torch is None:
        result = _no_pairs(lock_sha, 0.0)
    else:
        from validators.lockcheck.check import find_interpreter
        from validators.torch_abi.memo import MemoCache

        # The host interpreter's lookup (uv python find, probes: subprocesses, seconds) runs
        # while the lock's wheels are scanned; joined where needed.
        with ThreadPoolExecutor(max_workers=1) as pool:
            interpreter = pool.submit(find_interpreter, wheels.python)
            memo = MemoCache(cache)
            result = _judge_lock(lock, wheels, registries, torch.version, memo, interpreter,
                                 index, offline, jobs)  # fmt: skip
    result = result.model_copy(update={"seconds": round(time.perf_counter() - started, 3)})
    if not any(p.verdict == "undecidable" and p.kind == "fetch" for p in result.pairs):
        _write(cached, result)
        if binary is None and torch is not None:
            binary = binary_key(registries, wheels, cache)  # the listings are cached now
        if binary is not None:
            _write(by_binaries_path(cache.root, binary), result)
    return result


def _no_pairs(lock_sha: str, seconds: float, note: str = "") -> LockVerdict:
    return LockVerdict(
        lock_sha256=lock_sha,
        torch=None,
        pairs=[],
        alternatives={},
        seconds=seconds,
        bytes_fetched=0,
        note=note,
    )


def _write(path: Path, result: LockVerdict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(result.model_dump_json(), encoding="utf-8")
    tmp.replace(path)


def _judge_lock(
    lock: Path,
    wheels: LockWheels,
    registries: dict[str, str],
    torch: str,
    cache: MemoCache,
    interpreter: Future[Path | None],
    index: str,
    offline: bool,
    jobs: int,
) -> LockVerdict:
    from validators.lockcheck.check import LockInputs, run_lock_check
    from validators.lockcheck.scan import Scanner
    from validators.torch_abi.decide import PairInputs, judge

    scanner = Scanner(cache, offline=offline, virtual_site=Path("/stackgate-compat"), jobs=jobs)
    try:
        first = scanner.scan(wheels.wheels)
    finally:
        scanner.close()
    linkers = torch_linkers(list(first.wheels))
    pairs: list[PairVerdict] = []
    fetched = first.bytes_fetched
    if linkers:
        results, report = run_lock_check(
            LockInputs(
                lock=lock,
                wheels=wheels,
                cache=cache,
                offline=offline,
                jobs=jobs,
                interpreter=interpreter.result(),
                only=frozenset(linkers),
            )
        )
        by = {r.check: r for r in results}
        for name in linkers:
            wheel = next(w for w in wheels.wheels if w.name == name)
            inputs = PairInputs(name, wheel.version, torch, wheel, wheels, cache)
            verdict = judge(inputs, by, report)
            pairs.append(verdict.model_copy(update={"wheel": wheel.filename}))
    alternatives: dict[str, str] = {}
    for p in pairs:
        if p.verdict == "breaks":
            alternatives[f"{p.package} {p.version}"] = _alternatives(
                p,
                torch,
                wheels.python,
                cache,
                (registries.get(p.package, index), registries.get("torch", index)),
                offline,
                jobs,
                interpreter.result(),
            )
    return LockVerdict(
        lock_sha256=hashlib.sha256(lock.read_bytes()).hexdigest(),
        torch=torch,
        pairs=pairs,
        alternatives=alternatives,
        seconds=0.0,
        bytes_fetched=fetched,
    )


def _alternatives(
    pair: PairVerdict,
    torch: str,
    python: tuple[int, int],
    cache: FactsCache,
    indexes: tuple[str, str],
    offline: bool,
    jobs: int,
    interpreter: Path | None,
) -> str:
    """A small matrix around the pair: the package's nearest versions beside the locked torch,
    and the locked version beside the nearest torch versions."""
    from validators.lockcheck.http_ranges import make_client
    from validators.torch_abi.index import IndexError_, project_files
    from validators.torch_abi.matrix import Request, compute
    from validators.torch_abi.proposals import nearest

    try:
        index, torch_index = indexes
        with make_client() as client:
            versions = sorted({f.version for f in project_files(client, index, pair.package)})
            torches = sorted(
                {f.version for f in project_files(client, torch_index, "torch") if not f.yanked}
            )
    except IndexError_ as exc:
        return f"(alternatives not computed: {exc})"
    mine, my_torch = Version(pair.version), _version(torch)
    at = versions.index(mine) if mine in versions else len(versions)
    near_v = versions[max(0, at - NEAR_VERSIONS) : at + NEAR_VERSIONS + 1]
    near_v = [v for v in near_v if not v.is_prerelease]
    torches = [t for t in torches if not t.is_prerelease]
    tat = torches.index(my_torch) if my_torch in torches else len(torches)
    near_t = torches[max(0, tat - NEAR_TORCH) : tat + NEAR_TORCH + 1]
    request = Request(
        package=pair.package,
        versions=tuple(SpecifierSet(f"=={v}") for v in near_v),
        torch=tuple(SpecifierSet(f"=={t}") for t in near_t),
        python=python,
        index=index,
        torch_index=torch_index,
        offline=offline,
        jobs=jobs,
    )
    matrix = compute(request, cache, interpreter)
    return nearest(matrix, pair.version, torch)


def _parsed(lock: Path) -> UvLock | None:
    """The lock read once; None when it cannot be (read_lock then says why)."""
    try:
        return read_uv_lock(lock)
    except BadInput:
        return None


def _version(text: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        return Version("0")
