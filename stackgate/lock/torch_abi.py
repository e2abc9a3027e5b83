"""What the builder and the validators share about the torch ABI of binary packages: the
verdict of a (package, torch) pair and of a whole uv.lock as typed models, the versions of the
pre-install reader's facts and of the verdicts, and where a lock's verdict is kept. The
validators compute verdicts (validators.torch_abi); `builder lock` looks a lock's verdict up here
and, on a miss, asks `python -m validators compat --lock LOCK --json` for it (a process seam:
the builder never imports the validators)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Literal

from packaging.utils import canonicalize_name
from pydantic import BaseModel, ConfigDict, ValidationError

from stackgate.errors import BadInput
from stackgate.lock.uvlock import UvLock, read_uv_lock
from stackgate.lock.wheel_listing import FACTS_VERSION, ListingStore
from stackgate.lock.wheels import LockError, LockWheels, read_lock
from stackgate.settings import cache_root

PYPI = "https://pypi.org/simple"  # the default index of `validators compat` and its lock check
VERDICT_VERSION = 3  # bump when a verdict's meaning changes: cached verdicts are then redone

Verdict = Literal["loads", "breaks", "undecidable"]


class PairVerdict(BaseModel):
    model_config = ConfigDict(extra="forbid")

    package: str
    version: str
    torch: str
    verdict: Verdict
    kind: str = ""  # symbol / library / version-node / taken-down / arch / no-wheel / ...
    reason: str
    first: str = ""  # the first missing symbol or library, as a person reads it
    wheel: str | None = None
    cuda_needed: list[str] = []  # CUDA majors the package's objects link (libcudart.so.12 -> 12)
    torch_cuda: list[str] = []  # CUDA majors torch's closure provides
    stable_abi: bool = False  # its torch extensions use only the stable C shim
    declared: str = ""  # the package's own Requires-Dist on torch, where unmet by this pair
    bytes_fetched: int = 0
    wheel_bytes: int = 0


class LockVerdict(BaseModel):
    """A uv.lock's verdict: every binary package that links torch, beside the locked torch."""

    model_config = ConfigDict(extra="forbid")

    lock_sha256: str
    torch: str | None
    pairs: list[PairVerdict]
    alternatives: dict[str, str]  # "package version" -> what loads instead
    seconds: float
    bytes_fetched: int
    from_cache: bool = False
    note: str = ""  # why nothing was checked (a lock without sizes, wheels not over HTTP)

    @property
    def breaking(self) -> list[PairVerdict]:
        return [p for p in self.pairs if p.verdict == "breaks"]


def facts_root() -> Path:
    """The pre-install reader's cache (facts, listings, compat verdicts)."""
    return cache_root() / "lockcheck"  # stackgate/settings.py: one root for every cache


def lock_record_path(root: Path, lock_sha256: str) -> Path:
    key = hashlib.sha256(f"{VERDICT_VERSION}:{FACTS_VERSION}:{lock_sha256}".encode()).hexdigest()
    return root / "compat" / "locks" / f"{key}.json"


def cached_lock(lock: Path, root: Path | None = None) -> LockVerdict | None:
    """The lock's verdict as the validators last computed it for these bytes, or None."""
    lock_sha = hashlib.sha256(lock.read_bytes()).hexdigest()
    path = lock_record_path(root or facts_root(), lock_sha)
    try:
        hit = LockVerdict.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValidationError):
        return None
    return hit if hit.lock_sha256 == lock_sha else None


def lookup_lock(lock: Path, root: Path | None = None) -> LockVerdict | None:
    """The lock's verdict without judging anything, or None (then the validators judge it):
    kept for these bytes; a lock whose wheels cannot be read (a file:// index gives no sizes,
    no one Python) or with no torch wheel over HTTP (the h200 stacks take torch from their
    image): what the validators answer for it, nothing judged; kept for the lock's binary
    wheels (a re-lock that moved only pure-Python packages). Answered `from_cache`; no
    validators module is needed (tests/validators/test_lock_lookup.py holds the two alike)."""
    root = root or facts_root()
    hit = cached_lock(lock, root)
    if hit is not None:
        return hit.model_copy(update={"from_cache": True})
    sha = hashlib.sha256(lock.read_bytes()).hexdigest()
    try:
        parsed: UvLock | None = read_uv_lock(lock)
    except BadInput:
        parsed = None  # read_lock reads it again and says why
    try:
        wheels = http_wheels(read_lock(lock, parsed=parsed))
    except LockError as exc:  # what `validators compat --lock` answers: nothing read or judged
        return LockVerdict(lock_sha256=sha, torch=None, pairs=[], alternatives={}, seconds=0.0,
                          bytes_fetched=0, note=f"not checked: {exc}", from_cache=True)  # fmt: skip
    if not any(w.name == "torch" for w in wheels.wheels):
        return LockVerdict(lock_sha256=sha, torch=None, pairs=[], alternatives={}, seconds=0.0,
                          bytes_fetched=0, from_cache=True)  # fmt: skip
    key = binary_key(lock_registries(parsed), wheels, ListingStore(root))
    same = read_by_binaries(root, key) if key is not None else None
    if same is None:
        return None
    return same.model_copy(update={"lock_sha256": sha, "from_cache": True})


def http_wheels(wheels: LockWheels) -> LockWheels:
    """The wheels the check reads: those served over HTTP (a file:// index gives no ranges)."""
    wheels.wheels = [w for w in wheels.wheels if w.url.startswith(("http://", "https://"))]
    return wheels


def lock_registries(parsed: UvLock | None) -> dict[str, str]:
    """The index each locked package came from (uv.lock's source.registry)."""
    if parsed is None:
        return {}
    return {
        str(canonicalize_name(p.name)): p.source.registry.rstrip("/")
        for p in parsed.package
        if p.source.registry and p.source.registry.startswith(("http://", "https://"))
    }


def binary_key(registries: dict[str, str], wheels: LockWheels, store: ListingStore) -> str | None:
    """What the verdict depends on in a lock: its wheels that hold ELF objects or cubins (by
    sha256 and URL, their listings from the cache), its Python and the indexes its packages
    came from (the alternatives are read there). A re-lock that moves only pure-Python packages
    keeps the key, and the verdict is reused; None while a listing is not cached."""
    binary: list[tuple[str, str, str]] = []
    for w in wheels.wheels:
        listing = store.listing(w.sha256, w.url)
        if listing is None:
            return None
        if listing.objects or listing.cubins:
            binary.append((w.name, w.sha256, w.url))
    text = json.dumps(
        [VERDICT_VERSION, FACTS_VERSION, list(wheels.python), sorted(binary),
         sorted(registries.items())]
    )  # fmt: skip
    return hashlib.sha256(text.encode()).hexdigest()


def by_binaries_path(root: Path, key: str) -> Path:
    return root / "compat" / "locks-by-binaries" / f"{key}.json"


def read_by_binaries(root: Path, key: str) -> LockVerdict | None:
    try:
        return LockVerdict.model_validate_json(by_binaries_path(root, key).read_text("utf-8"))
    except (OSError, ValidationError):
        return None
