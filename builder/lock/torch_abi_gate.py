"""The torch-ABI gate `builder lock` puts on a new uv.lock before it replaces the
committed one: the validators' verdict (every binary package that links torch, judged beside
the locked torch from byte ranges of the locked wheels) is looked up where the validators
keep it, by the lock's bytes or by its binary wheels (stackgate.lock.torch_abi.lookup_lock, in this
process), or asked of `python -m validators compat --lock LOCK --json` in a child process;
never made here and never imported. A pair that breaks refuses the lock (exit 1) naming what
loads instead. The outcome, or that the check was off (--no-compat), is kept beside the lock
in compat.json, tied to the lock by its sha256."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.utils import canonicalize_name

from stackgate import proc
from stackgate.errors import CheckFailed, CommandFailed, EnvironmentProblem
from stackgate.files import atomic_write_text
from stackgate.lock.torch_abi import LockVerdict, lookup_lock

if TYPE_CHECKING:
    from stackgate.manifest import Manifest

RECORD = "compat.json"
CHECK_TIMEOUT_S = 3600.0  # a cold lock reads byte ranges of every wheel: minutes


def ask_validators(lockfile: Path) -> LockVerdict:
    """The lock's verdict from `python -m validators compat --lock LOCK --json` (this
    interpreter: the validators are installed beside the builder)."""
    argv = [sys.executable, "-m", "validators", "compat", "--lock", str(lockfile), "--json"]
    try:
        done = proc.run(argv, timeout=CHECK_TIMEOUT_S)
    except CommandFailed as exc:
        raise EnvironmentProblem(
            f"the compatibility check of {lockfile.name} failed (exit {exc.returncode}; "
            "--no-compat to lock without it)",
            details=(exc.stderr or exc.stdout).strip().splitlines()[-12:],
        ) from None
    try:
        return LockVerdict.model_validate(json.loads(done.stdout)["lock"])
    except (ValueError, KeyError, TypeError) as exc:
        raise EnvironmentProblem(
            f"validators compat --lock answered no verdict ({type(exc).__name__}: {exc})"
        ) from None


class TorchAbiGate:
    """`pinned`: the manifest's packages. A pinned package that cannot load refuses the lock;
    one pulled in by them (sglang 0.5.9's torchao 0.9.0 beside torch 2.9.1 in cu128: its
    _C.abi3.so misses a torch::Library constructor, torchao imports without its C++ ops) is
    reported and recorded, not refused: the stack did not choose it.

    `accepted`: canonical package name -> the manifest's reason, for each `static.abi.<name>`
    finding its [validation.accepted_findings] accepts. A pinned package whose break the stack
    already accepted (cu128 and cu130 pin torchao 0.9.0 and accept exactly this break) is
    reported with that reason, not refused: the lock check agrees with the validators."""

    def __init__(
        self,
        folder: Path,
        pinned: frozenset[str] = frozenset(),
        accepted: Mapping[str, str] | None = None,
    ) -> None:
        self.folder = folder
        self.pinned = pinned
        self.accepted = dict(accepted or {})
        self.result: LockVerdict | None = None

    @classmethod
    def for_manifest(cls, folder: Path, manifest: Manifest) -> TorchAbiGate:
        """The manifest's pins, and the ABI breaks it accepts (check id `static.abi.<dist>`)."""
        prefix = "static.abi."
        accepted = {
            str(canonicalize_name(check[len(prefix) :])): why
            for check, why in manifest.validation.accepted_findings.items()
            if check.startswith(prefix)
        }
        pinned = frozenset(canonicalize_name(n) for n in manifest.packages)
        return cls(folder, pinned, accepted)

    def _refusing(self, package: str) -> bool:
        return package in self.pinned and package not in self.accepted

    def __call__(self, lockfile: Path) -> None:
        started = time.perf_counter()
        hit = lookup_lock(lockfile)
        if hit is not None:
            seconds = round(time.perf_counter() - started, 3)
            result = hit.model_copy(update={"seconds": seconds})
        else:
            result = ask_validators(lockfile)
        self.result = result
        broken = [p for p in result.breaking if self._refusing(p.package)]
        if broken:
            details = []
            for p in broken:
                details.append(f"{p.package} {p.version} + torch {p.torch}: {p.kind}: {p.first}")
                alt = result.alternatives.get(f"{p.package} {p.version}")
                if alt:
                    details.append(f"  instead: {alt}")
            raise CheckFailed(
                f"lock refused: {len(broken)} binary packages cannot load beside torch "
                f"{result.torch} (the committed lock is unchanged; --no-compat to lock anyway)",
                details=details,
            )

    def record(self, lock_sha256: str, *, off: bool) -> dict[str, Any]:
        if off:
            data: dict[str, Any] = {
                "lock_sha256": lock_sha256,
                "checked": False,
                "why": "--no-compat",
            }
        elif self.result is None:
            data = {"lock_sha256": lock_sha256, "checked": False, "why": "not run"}
        else:
            data = {
                "lock_sha256": lock_sha256,
                "checked": True,
                "torch": self.result.torch,
                "pairs": [
                    {
                        "package": p.package,
                        "version": p.version,
                        "verdict": p.verdict,
                        "kind": p.kind,
                        "why": p.first or p.reason[:300],
                    }
                    for p in self.result.pairs
                ],
                "accepted_by_manifest": {
                    p.package: self.accepted[p.package]
                    for p in self.result.breaking
                    if p.package in self.pinned and not self._refusing(p.package)
                },
                "note": self.result.note,
                "seconds": self.result.seconds,
                "from_cache": self.result.from_cache,
            }
        atomic_write_text(self.folder / RECORD, json.dumps(data, indent=1, sort_keys=True) + "\n")
        return data

    def line(self, *, off: bool) -> str:
        if off:
            return "  compat: OFF (--no-compat): binary packages not checked against torch"
        r = self.result
        if r is None:
            return "  compat: not run"
        if r.note:
            return f"  compat: {r.note}"
        if r.torch is None:
            return "  compat: no torch in the lock, nothing to check"
        und = [p for p in r.pairs if p.verdict == "undecidable"]
        unpinned = [p for p in r.breaking if p.package not in self.pinned]
        accepted = [
            p for p in r.breaking if p.package in self.pinned and not self._refusing(p.package)
        ]
        text = (
            f"  compat: {len(r.pairs)} binary packages linking torch judged beside torch {r.torch}"
            f" ({r.seconds:.1f} s{', cached' if r.from_cache else ''})"
        )
        if unpinned:
            text += "; WARN not loadable, pulled in by the pins (not refused): " + "; ".join(
                f"{p.package} {p.version}: {p.kind}: {p.first[:160]}" for p in unpinned
            )
        if accepted:
            text += "; WARN not loadable, accepted by the manifest (not refused): " + "; ".join(
                f"{p.package} {p.version}: {self.accepted[p.package][:160]}" for p in accepted
            )
        if und:
            text += "; undecidable: " + "; ".join(
                f"{p.package} {p.version}: {p.reason[:160]}" for p in und
            )
        return text
