"""Which folder a build of a stack goes into, and whether an env already there can be reused.

`<stack>-<lock12>`, or, when that env exists with another environment profile (the profile is
inside the env), `<stack>-<lock12>-<profile8>`. An env that matches lock and profile is reused
(its contents are a function of them) once it still hashes to its record; a damaged one is
left as it is and repaired into the first free `-repairN` beside it, whose newest copy is then
the one taken.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from builder.venv.topology import TopologyChoice
from stackgate.build_record import BuildRecord, read_build_record
from stackgate.envtree.digests import DigestCache
from stackgate.envtree import check_tree
from stackgate.errors import BadInput, EnvironmentProblem
from stackgate.layout import EnvLayout
from stackgate.lock.state import LockState


def pick_env(
    layout: EnvLayout,
    state: LockState,
    choice: TopologyChoice,
    profile: dict[str, str],
    kernels: str | None = None,
) -> tuple[Path, BuildRecord | None]:
    """Where this build goes, and the record of the env there when it can be reused.

    kernels: the digest of the build-time kernels requested (None: none); an env with other
    build-time kernels (or none) is another env."""
    base = layout.env_name(state.lock_hash)
    key: list[object] = [choice.topology, profile] + ([kernels] if kernels else [])
    tag = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:8]
    for name in (base, f"{base}-{tag}"):
        path = layout.stack_dir / name
        if not path.exists():
            return path, None
        try:
            record: BuildRecord | None = read_build_record(path)
        except BadInput:
            record = None
        if (
            record is not None
            and record.lock_hash == state.lock_hash
            and record.topology == choice.topology
            and record.env_profile == profile
            and (record.kernels.request_sha256 if record.kernels else None) == kernels
        ):
            repairs = sorted(
                path.parent.glob(f"{path.name}-repair*[0-9]"),
                key=lambda p: int(p.name.rsplit("-repair", 1)[1] or 0),
            )
            for repaired in reversed(repairs):
                try:
                    newer = read_build_record(repaired)
                except BadInput:
                    continue
                if newer.lock_hash == record.lock_hash:
                    return repaired, newer
            return path, record
    raise EnvironmentProblem(
        f"{layout.stack_dir / base} and its profile variant exist but neither is a "
        "build of this lock with this profile; move them away and build again"
    )


def damage(env: Path, record: BuildRecord) -> list[str]:
    """[] when the env still hashes to its record's tree hash, else the first differences."""
    with DigestCache() as cache:
        check = check_tree(env, record.tree.sha256, scheme=record.tree.scheme, cache=cache)
    return check.explain()


def repair_name(damaged: Path) -> Path:
    """`<env>-repair<N>` for the first N not taken (the damaged folder stays as it is)."""
    stem = damaged.name.split("-repair", 1)[0]
    n = 1
    while (damaged.parent / f"{stem}-repair{n}").exists():
        n += 1
    return damaged.parent / f"{stem}-repair{n}"
