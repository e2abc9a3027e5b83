"""Hash an environment again before a verdict leans on it.

The build record's tree hash says what the env held when it was built; a file replaced since
then (by hand, by `pip install`, by a disk error) would otherwise be marked good, compared or
reproduced under the old hash. `mark-good`, `gate --interleave-with` and `reproduce` call
`require_env_matches` first; with the digest cache the re-check reads only files that changed
(see benchmarks/env_recheck/results/env_recheck.md for its cost on the cu128 env).
"""

from __future__ import annotations

from pathlib import Path

from stackgate.cli_hint import cli_command
from stackgate.envtree import TreeCheck, check_tree
from stackgate.envtree.digests import DigestCache
from stackgate.errors import BadInput, CheckFailed
from validators.records.model import BuildFacts


def recorded_scheme(build: BuildFacts) -> int:
    tree = build.raw.get("tree")
    scheme = tree.get("scheme", 1) if isinstance(tree, dict) else 1
    return scheme if isinstance(scheme, int) and not isinstance(scheme, bool) else 1


def recheck_env(env: Path, build: BuildFacts) -> TreeCheck:
    if build.env_tree_sha256 is None:
        raise BadInput(f"{env}: the build record has no env tree hash")
    if not env.is_dir():
        raise BadInput(f"{env}: not an environment folder")
    with DigestCache() as cache:
        return check_tree(env, build.env_tree_sha256, scheme=recorded_scheme(build), cache=cache)


def require_env_matches(env: Path, build: BuildFacts) -> TreeCheck:
    """The re-check, or CheckFailed (exit 1) naming the first files that differ."""
    check = recheck_env(env, build)
    if not check.ok:
        raise CheckFailed(
            f"{env}: its files no longer match its build record (tree "
            f"{check.tree.sha256[:16]} now, {check.recorded_sha256[:16]} recorded); rebuild "
            f"it ({cli_command('build STACK --repair')}) and validate again",
            details=check.explain(),
        )
    return check
