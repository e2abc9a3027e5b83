"""What the builder and the validators share about binary compatibility (issue 27): the
verdict of a (package, torch) pair and of a whole uv.lock as typed models, the versions of the
pre-install reader's facts and of the verdicts, and where a lock's verdict is kept. The
validators compute verdicts (validators.compat); `builder lock` looks a lock's verdict up here
and, on a miss, asks `python -m validators compat --lock LOCK --json` for it (a process seam:
the builder never imports the validators)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from stackgate.errors import BadInput
from stackgate.settings import cache_root
from stackgate.uvlock import read_uv_lock

FACTS_VERSION = 5  # 2: listings carry METADATA Name/Version; 3: nameless cubins read whole;
# 4: unproven facts keyed by origin (entries of 3 were keyed by unproven claims: not reused);
# 5: fatbins looked for in every allocated data section (cuFFT's .data)
PYPI = "https://pypi.org/simple"  # the default index of `validators compat` and its lock check
COMPAT_VERSION = 3  # bump when a verdict's meaning changes: cached verdicts are then redone

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


class LockCompat(BaseModel):
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
    key = hashlib.sha256(f"{COMPAT_VERSION}:{FACTS_VERSION}:{lock_sha256}".encode()).hexdigest()
    return root / "compat" / "locks" / f"{key}.json"


def cached_lock(lock: Path, root: Path | None = None) -> LockCompat | None:
    """The lock's verdict as the validators last computed it for these bytes, or None."""
    lock_sha = hashlib.sha256(lock.read_bytes()).hexdigest()
    path = lock_record_path(root or facts_root(), lock_sha)
    try:
        hit = LockCompat.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValidationError):
        return None
    return hit if hit.lock_sha256 == lock_sha else None


def lock_has_torch(lock: Path) -> bool:
    """Whether the lock holds a torch wheel from an HTTP index: the validators judge a lock's
    binary packages beside that torch only, so without one there is nothing to ask them
    (h200-sglang and h200-transformers take torch from their base image). An unreadable lock
    answers True: the validators then say why."""
    try:
        parsed = read_uv_lock(lock)
    except BadInput:
        return True
    return any(
        str(w.url or "").startswith(("http://", "https://"))
        for p in parsed.package
        if p.name == "torch"
        for w in p.wheels
    )
