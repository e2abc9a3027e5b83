"""A fresh install's files against their wheels' RECORDs: clashes recorded, damage refused
with the advice its cause calls for.

uv installs a wheel from its cache, unpacked once, without hashing the files again: a file
edited in the cache is installed as it is, and the build record would hash the damaged tree as
the truth. So every installed file must match the RECORD of one distribution that installs it
(stackgate.envtree.wheel_records: a path several wheels install holds one of their copies,
recorded, not refused).

When a file matches none, the cause decides the advice: uv's unpacked copy in its cache is
hashed too. Differs there as well: the cache is damaged (`uv cache clean <package>`). Matches
there: the file changed after uv copied it (something wrote into the env while it was built):
build again. No copy found: both are possible, and the message says so.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from packaging.utils import canonicalize_name

from stackgate.build_record import WheelRecords
from stackgate.cli_hint import uv_command
from stackgate.errors import EnvironmentProblem
from stackgate.paths import display_path
from stackgate.envtree.wheel_records import (
    Claim,
    Claims,
    Damaged,
    judge,
    read_claims,
    record_digest,
)

MAX_LISTED = 20
Cause = Literal["cache", "after-install", "unknown"]


@dataclass(frozen=True)
class Diagnosis:
    damaged: Damaged
    cause: Cause
    packages: tuple[str, ...]  # the owners' project names (for `uv cache clean`)

    def line(self) -> str:
        owners = ", ".join(sorted({c.dist for c in self.damaged.claims})) or "?"
        why = {
            "cache": "uv's cache copy differs from the wheel's RECORD too",
            "after-install": "uv's cache copy matches the wheel's RECORD: changed after install",
            "unknown": "no copy in uv's cache to compare with",
        }[self.cause]
        return f"{self.damaged.path} ({owners}): {self.damaged.detail}; {why}"


def project_name(dist_info: str) -> str:
    """`flashinfer_python-0.6.3.dist-info` -> `flashinfer-python`."""
    return str(canonicalize_name(dist_info.removesuffix(".dist-info").split("-")[0]))


def _cache_copies(cache: Path, claim: Claim) -> list[Path]:
    """uv's unpacked copies of the claimed file: `<cache>/archive-v*/<id>/` holds a wheel as
    it was unpacked, its dist-info folder included. None for files the wheel keeps elsewhere
    (`.data` scripts, written to `../../../bin`)."""
    if claim.row_path.startswith(("..", "/")):
        return []
    out: list[Path] = []
    for dist_info in sorted(cache.glob(f"archive-v*/*/{claim.dist}")):
        copy = dist_info.parent / claim.row_path
        if copy.is_file():
            out.append(copy)
    return out


def _cause(cache: Path | None, damaged: Damaged) -> Cause:
    if cache is None or damaged.kind not in ("differs", "missing"):
        return "unknown"
    seen = False
    for claim in damaged.claims:
        if not claim.digest:
            continue
        for copy in _cache_copies(cache, claim):
            seen = True
            try:
                with copy.open("rb") as handle:
                    digest = record_digest(hashlib.file_digest(handle, "sha256").digest())
            except OSError:
                return "cache"
            if digest != claim.digest:
                return "cache"
    return "after-install" if seen else "unknown"


def diagnose(damaged: list[Damaged], cache: Path | None) -> list[Diagnosis]:
    return [
        Diagnosis(d, _cause(cache, d), tuple(sorted({project_name(c.dist) for c in d.claims})))
        for d in damaged
    ]


def refusal(env: Path, found: list[Diagnosis]) -> EnvironmentProblem:
    """The build's refusal, its advice true for the causes found."""
    advice: list[str] = []
    by_cause = {
        cause: [d for d in found if d.cause == cause]
        for cause in ("cache", "after-install", "unknown")
    }
    if by_cause["cache"]:
        names = " ".join(sorted({p for d in by_cause["cache"] for p in d.packages}))
        clean = uv_command(f"cache clean {names}")
        advice.append(f"uv's cache holds damaged copies; clear them with `{clean}` and build again")
    if by_cause["after-install"]:
        advice.append(
            "files changed after uv installed them (its cache copies are intact): something "
            "wrote into the env while it was built; build again"
        )
    if by_cause["unknown"]:
        names = " ".join(sorted({p for d in by_cause["unknown"] for p in d.packages}))
        clean = uv_command(f"cache clean {names}")
        advice.append(
            "uv's cache holds no copy to compare with: build again; if the same files differ "
            f"again, clear the packages with `{clean}`"
        )
    return EnvironmentProblem(
        f"{display_path(env)}: installed files match none of the RECORDs that list them: "
        + "; ".join(advice),
        details=[d.line() for d in found[:MAX_LISTED]]
        + ([f"... and {len(found) - MAX_LISTED} more"] if len(found) > MAX_LISTED else []),
    )


def check_wheel_records(
    env: Path,
    digests: Mapping[str, bytes] | None = None,
    *,
    uv_cache: Path | None = None,
    claims: Claims | None = None,
) -> WheelRecords:
    """Every file a RECORD lists with a hash against its owners' RECORDs; the clashes found.
    digests: rel -> raw sha256 already read (the tree hash's pass); claims: the env's RECORD
    rows when already read. EnvironmentProblem when a file matches no owner's RECORD."""
    judged = judge(claims if claims is not None else read_claims(env), digests)
    if judged.damaged:
        raise refusal(env, diagnose(judged.damaged, uv_cache))
    return WheelRecords(files_checked=judged.checked, clashes=judged.clashes)
