"""Is a file one distribution overwrote in another's tree a break, or a designed overlay?

`nvidia-cutlass-dsl-libs-cu13 4.5.2` (pulled in by SGLang 0.5.15) installs its CUDA-13 builds
over `nvidia-cutlass-dsl-libs-base 4.5.2`'s files and requires `...-libs-base==4.5.2`: the
variant is laid over the exact base it was made for, and the env loads. `cuda-python
12.6.2.post1` overwriting `cuda-bindings 13.5.0` (vLLM 0.33.0) pins nothing of the kind and
breaks `import cuda.core`.
"""

from __future__ import annotations

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from stackgate.installed import Distribution
from validators.static.dist_check import applicable_requirements
from validators.static.environment import Environment


def designed_overlay(env: Environment, winner: Distribution, loser: Distribution) -> str | None:
    """The requirement by which `winner` pins the exact `loser` it overwrites (one that applies
    in `env`: markers evaluated), else None."""
    for req in applicable_requirements(env, winner):
        if canonicalize_name(req.name) != loser.key:
            continue
        exact = [s for s in req.specifier if s.operator in ("==", "===")]
        try:
            if exact and req.specifier.contains(Version(loser.version), prereleases=True):
                return f"{req.name}{req.specifier}"
        except InvalidVersion:
            return None
    return None
