"""The uv commands that install a lock into a venv, exactly that lock.

From the lock's own indexes: `uv sync --frozen`. Through mirrors (--index-map) or offline from
a wheelhouse: the lock exported with its hashes, then `uv pip install --require-hashes
--no-deps` of that export, so every file is still pinned by hash.

Files are copied out of uv's cache (`--link-mode copy`), never hardlinked: with hardlinks an
edit of one file in one env edits the cache and every env linked to it, and later builds copy
the damage (the cost is measured in benchmarks/builder/results/link_mode.md).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from builder.lock.uvproject import index_specs
from stackgate.lock.state import LockState
from stackgate.manifest import Manifest
from stackgate.uvbin import uv_bin

LINK_MODE = "copy"


def requirements_path(stack_dir: Path) -> Path:
    """The export this process's build installs from (the build removes it when it ends)."""
    return stack_dir / f".requirements-{os.getpid()}.txt"


def install_commands(
    manifest: Manifest,
    state: LockState,
    python: Path,
    exclude: Sequence[str],
    *,
    stack_dir: Path,
    offline: bool,
    wheelhouse: Path | None,
    index_map: Mapping[str, str],
) -> list[list[str | Path]]:
    """Commands installing the lock into the venv whose interpreter is `python`, leaving out
    the packages in `exclude` (built from source afterwards)."""
    if not offline and not index_map:
        argv: list[str | Path] = [
            uv_bin(),
            "sync",
            "--frozen",
            "--no-install-project",
            "--link-mode",
            LINK_MODE,
            "--python",
            python,
        ]
        for name in exclude:
            argv += ["--no-install-package", name]
        return [argv]
    req = requirements_path(stack_dir)
    export: list[str | Path] = [
        uv_bin(),
        "export",
        "--frozen",
        "--no-config",
        "--format",
        "requirements.txt",
        "--no-emit-project",
        "--no-header",
        "--output-file",
        req,
    ]
    for name in exclude:
        export += ["--no-emit-package", name]
    install: list[str | Path] = [
        uv_bin(),
        "pip",
        "install",
        "--no-config",
        "--python",
        python,
        "--require-hashes",
        "--no-deps",
        "--link-mode",
        LINK_MODE,
        "-r",
        req,
    ]
    if offline:
        install += ["--offline", "--no-index"]
        if wheelhouse is not None:
            install += ["--find-links", wheelhouse.resolve()]
    else:
        specs = index_specs(manifest, {**state.index_map, **index_map})
        defaults = [s for s in specs if s.default]
        others = [s for s in specs if not s.default]
        # Named (NAME=URL), so uv finds UV_INDEX_<NAME>_USERNAME/PASSWORD for them.
        if defaults:
            install += ["--default-index", f"{defaults[0].name}={defaults[0].url}"]
        for spec in others:
            install += ["--index", f"{spec.name}={spec.url}"]
        # Every file is pinned by hash, so taking it from whichever index has it is safe.
        install += ["--index-strategy", "unsafe-best-match"]
    return [export, install]
