"""`static.arch.*` results: each distribution's GPU code judged against the stack's target
archs, whether it was read from an installed tree or from a lock's wheels before install."""

from __future__ import annotations

import functools
import re
from collections.abc import Collection

from packaging.utils import canonicalize_name

from stackgate.manifest import Manifest
from validators.core.checks import STATIC_ARCH, family_id
from validators.core.results import Result, make_result
from validators.static.abi_results import MAX_LISTED, check_key, site_relative
from validators.static.arch_check import DistCode, coverage
from validators.static.environment import Environment

_result = functools.partial(make_result, group="static")


def arch_results(
    env: Environment,
    per_dist: dict[str, DistCode],
    targets: tuple[str, ...],
    manifest: Manifest | None,
    seconds: float,
) -> list[Result]:
    """`static.arch.*` results from GPU code per distribution (read from an installed tree, or
    from wheels before install)."""
    if not targets:
        return [_result("static.arch", "SKIP", "no target archs (give --targets or a stack)")]
    backends = set()
    if manifest is not None:
        backends = {p.attention_backend or "" for p in manifest.serving.values()}
    needs_cubins = any(b.startswith("trtllm") for b in backends)
    pinned = {canonicalize_name(n) for n in manifest.packages} if manifest is not None else set()
    out = [
        _dist_arch_result(
            env, label, code, targets, seconds, needs_cubins=needs_cubins, pinned=pinned
        )
        for label, code in sorted(per_dist.items())
    ]
    if not per_dist:
        out.append(_result("static.arch", "PASS", "no GPU code in this environment", {}, seconds))
    return out


def _dist_arch_result(
    env: Environment,
    label: str,
    code: DistCode,
    targets: tuple[str, ...],
    seconds: float,
    *,
    needs_cubins: bool,
    pinned: Collection[str],
) -> Result:
    """One distribution's `static.arch.*` result over every target."""
    check = family_id(STATIC_ARCH, check_key(label))
    listing = {
        site_relative(p, env): [c.label() for c in codes]
        for p, codes in sorted(code.libraries.items())
    }
    cubins = {c.label(): n for c, n in sorted(code.cubins.items())}
    fails, undecided, notes, unneeded = _per_target(
        env, label, code, targets, needs_cubins=needs_cubins, pinned=pinned
    )
    # One scan serves every distribution: its time is recorded, not charged to each.
    evidence = {
        "libraries": listing,
        "cubins": cubins,
        "targets": list(targets),
        "scan_s": round(seconds, 3),
    }
    if code.unreadable:
        evidence["unreadable"] = [f"{p}: {why}" for p, why in code.unreadable]
    if code.unknown:
        evidence["unknown_gpu_code"] = {
            site_relative(p, env): list(why[:MAX_LISTED]) for p, why in sorted(code.unknown.items())
        }
    if fails:
        return _result(check, "FAIL", "; ".join(fails + undecided + notes), evidence)
    if undecided:
        evidence["severity"] = "UNDECIDED"
        return _result(check, "SKIP", "UNDECIDED: " + "; ".join(undecided + notes), evidence)
    archs = sorted({c.label() for c in code.all_codes()})
    covered = [t for t in targets if t not in unneeded]
    reason = (
        f"covers {', '.join(covered)} (has {', '.join(archs)})"
        if covered
        else f"not needed by the stack on {', '.join(unneeded)}"
    )
    return _result(check, "PASS", reason + (f"; {' | '.join(notes)}" if notes else ""), evidence)


def _per_target(
    env: Environment,
    label: str,
    code: DistCode,
    targets: tuple[str, ...],
    *,
    needs_cubins: bool,
    pinned: Collection[str],
) -> tuple[list[str], list[str], list[str], list[str]]:
    """Each target arch judged for one distribution: (fails, undecided, notes, targets the
    stack does not need this distribution's code for)."""
    fails: list[str] = []
    undecided: list[str] = []
    notes: list[str] = []
    unneeded: list[str] = []
    for target in targets:
        cov = coverage(code, target, env.site_packages)
        if cov.covered_by:
            if cov.uncovered_files:
                notes.append(f"{target}: no code in {'; '.join(cov.uncovered_files[:6])}")
            continue
        only_cubins = not code.libraries and bool(code.cubins)
        has = ", ".join(sorted({c.label() for c in code.all_codes()})) or "nothing readable"
        msg = (
            f"{label} has no SASS that runs on {target} and no PTX that can be JIT-compiled "
            f"for it (has {has})"
        )
        named = arch_named(code)
        if only_cubins and not needs_cubins:
            unneeded.append(target)
            notes.append(
                msg + "; prebuilt-cubin backends (trtllm) are unavailable there, and no "
                "serving profile selects one"
            )
        elif (
            named
            and not label.startswith("(")
            and canonicalize_name(label.split(" ")[0]) not in pinned
        ):
            # kernels built and named for other GPUs (..._sm_100a_x86_64.so), which the engine
            # selects only there; a pinned package or a file no wheel installed (built into the
            # env for this stack) stays a FAIL.
            unneeded.append(target)
            notes.append(
                msg + f"; every object is named for the GPU it was built for "
                f"({', '.join(named)}): kernels the engine selects only on those GPUs, "
                "and the stack does not pin this package"
            )
        elif cov.undecided:
            # kernels in a form this reader does not know: no verdict either way
            undecided.append(
                f"{msg} in the fatbins it can read, but it also holds GPU code it cannot "
                f"read: {'; '.join(cov.undecided[:4])}"
            )
        else:
            fails.append(msg)
    return fails, undecided, notes, unneeded


_ARCH_IN_NAME = re.compile(r"(?:^|[_.-])sm_?(\d{2,3}[af]?)(?=[_.-]|$)")


def arch_named(code: DistCode) -> list[str]:
    """The archs the file names of a distribution's GPU libraries state, when every one of
    them states one (`..._sm_100a_x86_64.so`); [] otherwise (sgl-kernel's sm90/ and sm100/
    folders do not count: one of them must serve every GPU)."""
    found: list[str] = []
    for path in code.libraries:
        match = _ARCH_IN_NAME.search(path.name)
        if match is None:
            return []
        found.append(f"sm_{match.group(1)}")
    return sorted(set(found))
