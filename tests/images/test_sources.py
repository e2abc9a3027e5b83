"""Patched source trees for in-image builds: a real git repository, a real patch."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from builder.image.context import prepare_source
from builder.image.recipe import source_packages
from stackgate.errors import BadInput
from stackgate.layout import LockFiles
from stackgate.lock.state import LockState
from stackgate.lock.uvlock import UvLock
from stackgate.manifest.loading import load_stack


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def _locked(tmp_path: Path, repo: Path, rev: str) -> LockState:
    """Stands in for the uv.lock `uv lock` would write: the git entry with the resolved commit
    (locking a git source for real needs a build backend from an index, none offline)."""
    commit = _git("rev-parse", rev, cwd=repo)
    source = {"git": f"{repo.as_uri()}?subdirectory=python&rev={rev}#{commit}"}
    lock = UvLock.model_validate(
        {"version": 1, "package": [{"name": "pkg", "version": "1", "source": source}]}
    )
    return LockState(files=LockFiles(tmp_path), manifest_hash="", lock_hash="", index_map={}, lock=lock)


@pytest.fixture
def patched_stack(tmp_path: Path) -> Path:
    repo = tmp_path / "upstream"
    (repo / "python" / "pkg").mkdir(parents=True)
    (repo / "python" / "pkg" / "__init__.py").write_text("VALUE = 'upstream'\n")
    _git("init", "-q", "-b", "main", cwd=repo)
    _git("-c", "user.name=t", "-c", "user.email=t@t", "add", ".", cwd=repo)
    _git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "v1", cwd=repo)
    _git("tag", "v1", cwd=repo)
    (repo / "python" / "pkg" / "__init__.py").write_text("VALUE = 'after v1'\n")
    _git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-am", "later", cwd=repo)
    patch = (
        "--- a/python/pkg/__init__.py\n+++ b/python/pkg/__init__.py\n"
        "@@ -1 +1 @@\n-VALUE = 'upstream'\n+VALUE = 'patched'\n"
    )
    (tmp_path / "patches").mkdir()
    (tmp_path / "patches" / "fix.patch").write_text(patch)
    sha = hashlib.sha256(patch.encode()).hexdigest()
    manifest = tmp_path / "src.toml"
    manifest.write_text(
        f"""schema_version = 1
name = "src"
description = "one patched git package"
python = "3.12"
[host]
min_driver = "580"
cuda = "13.0.1"
target_archs = ["12.0a"]
[packages.pkg]
git = "{repo.as_uri()}"
ref = "v1"
subdirectory = "python"
patches = [{{ path = "patches/fix.patch", sha256 = "{sha}" }}]
[validation]
required = ["host"]
"""
    )
    return manifest


def test_source_is_checked_out_at_the_ref_and_patched(patched_stack: Path, tmp_path: Path) -> None:
    loaded = load_stack(patched_stack)
    [pkg] = source_packages(loaded)
    assert (pkg.name, pkg.ref, pkg.subdirectory, pkg.patches) == ("pkg", "v1", "python", ["fix.patch"])
    dest = tmp_path / "out"
    # The tag moved on upstream after locking; the locked commit is what gets built.
    prepare_source(pkg, loaded, _locked(tmp_path, tmp_path / "upstream", "v1"), dest)
    assert (dest / "python" / "pkg" / "__init__.py").read_text() == "VALUE = 'patched'\n"
    assert not (dest / ".git").exists()


def test_a_patch_that_does_not_apply_fails(patched_stack: Path, tmp_path: Path) -> None:
    loaded = load_stack(patched_stack)
    state = _locked(tmp_path, tmp_path / "upstream", "main")  # where the patch no longer applies
    with pytest.raises(BadInput, match="does not apply"):
        prepare_source(source_packages(loaded)[0], loaded, state, tmp_path / "out")
