"""The build context: a folder holding exactly what the recipe copies, and nothing else.

    Containerfile
    stackgate/stack/     a stacks folder: the manifest, its patches at their relative paths,
                         rules.toml, schema/, locks/<stack>/ (the generated uv project + uv.lock)
    stackgate/sources/   patched source trees for packages built in the image
    stackgate/tool/      the stackgate tool's sources, pyproject.toml and uv.lock

Assembled from named files only, so nothing stray (a .netrc, a token file, a venv) can ride
along. stackgate.containers.base.context_tar packs it for the docker SDK with a stable order
and fixed metadata.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import tomllib
from collections.abc import Mapping
from pathlib import Path

from builder.compile import patches
from builder.image.recipe import RecipeInputs, SourcePackage, render
from stackgate.errors import BadInput
from stackgate.lock.state import LockState
from stackgate.manifest.loading import LoadedStack
from stackgate.paths import stacks_dir

CONTAINERFILE = "Containerfile"
_TOOL_PACKAGES = ("stackgate", "builder", "validators")
_TOOL_FILES = ("pyproject.toml", "uv.lock", "README.md", "LICENSE")
_SKIP_DIRS = {"__pycache__", ".venv", ".git", ".mypy_cache", ".ruff_cache", ".pytest_cache"}


def _copy_tree(src: Path, dst: Path) -> None:
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
        rel = Path(dirpath).relative_to(src)
        (dst / rel).mkdir(parents=True, exist_ok=True)
        for name in sorted(filenames):
            if name.endswith((".pyc", ".pyo")):
                continue
            shutil.copy2(Path(dirpath) / name, dst / rel / name)


def prepare_source(pkg: SourcePackage, loaded: LoadedStack, state: LockState, dest: Path) -> None:
    """The builder's own source step: fetch the *locked* commit (a moved tag changes nothing),
    check each patch's sha256, `git apply --check` then apply, and copy the tree out."""
    [source] = [s for s in patches.source_packages(loaded, state) if s.name == pkg.name]
    patches.verify_patch_hashes(source)
    with tempfile.TemporaryDirectory(prefix="stackgate-src-") as tmp:
        repo = patches.checkout(source, Path(tmp) / "src")
        patches.check_and_apply(source, repo)
        _copy_tree(repo, dest)


def assemble(
    dest: Path,
    inputs: RecipeInputs,
    loaded: LoadedStack,
    state: LockState,
    *,
    tool_root: Path | None,
    sources: Mapping[str, Path] | None = None,
) -> Path:
    """Write the context into `dest` (created empty); returns the Containerfile path."""
    dest.mkdir(parents=True, exist_ok=False)
    (dest / CONTAINERFILE).write_text(render(inputs), encoding="utf-8")
    top = dest / "stackgate"
    stack_dir = top / "stack"
    _copy_tree(state.files.folder, stack_dir / "locks" / inputs.stack)
    shutil.copy2(loaded.path, stack_dir / f"{inputs.stack}.toml")
    # The rules and schema the tool inside the image checks manifests with (the host's).
    if (stacks_dir() / "rules.toml").is_file():
        shutil.copy2(stacks_dir() / "rules.toml", stack_dir / "rules.toml")
    if (stacks_dir() / "schema").is_dir():
        _copy_tree(stacks_dir() / "schema", stack_dir / "schema")
    for pin in loaded.manifest.packages.values():
        for patch in pin.patches:
            target = stack_dir / patch.path
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(loaded.patch_path(patch.path), target)
    for pkg in inputs.source_packages:
        target = top / "sources" / pkg.name
        given = (sources or {}).get(pkg.name)
        if given is not None:
            _copy_tree(given, target)
        else:
            prepare_source(pkg, loaded, state, target)
    if inputs.include_tool:
        if tool_root is None:
            raise BadInput("the recipe installs the stackgate tool but no tool sources were given")
        tool = top / "tool"
        tool.mkdir(parents=True)
        for name in _TOOL_FILES:
            if (tool_root / name).is_file():
                shutil.copy2(tool_root / name, tool / name)
        for package in _TOOL_PACKAGES:
            _copy_tree(tool_root / package, tool / package)
        _copy_tree(tool_root / "images", tool / "images")
        for rel in _forced_includes(tool_root / "pyproject.toml"):
            (tool / rel).parent.mkdir(parents=True, exist_ok=True)
            if (tool_root / rel).is_dir():
                _copy_tree(tool_root / rel, tool / rel)
            else:
                shutil.copy2(tool_root / rel, tool / rel)
    return dest / CONTAINERFILE


def _forced_includes(pyproject: Path) -> list[str]:
    """The files the tool's wheel build takes from outside its packages (hatch's
    force-include, e.g. the stack rules): the image's `uv sync` builds that wheel, so they must
    be in the context too."""
    if not pyproject.is_file():
        return []
    with pyproject.open("rb") as f:
        data = tomllib.load(f)
    targets = data.get("tool", {}).get("hatch", {}).get("build", {}).get("targets", {})
    return sorted(str(k) for k in targets.get("wheel", {}).get("force-include", {}))
