"""Patched source trees for in-image builds: a real git repository, a real patch."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from builder.image.context import prepare_source
from builder.image.recipe import source_packages
from stackgate.errors import CommandFailed
from stackgate.loading import load_stack


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


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
    prepare_source(pkg, loaded, dest)
    assert (dest / "python" / "pkg" / "__init__.py").read_text() == "VALUE = 'patched'\n"
    assert not (dest / ".git").exists()


def test_a_patch_that_does_not_apply_fails(patched_stack: Path, tmp_path: Path) -> None:
    text = patched_stack.read_text().replace('ref = "v1"', 'ref = "main"')
    patched_stack.write_text(text)
    loaded = load_stack(patched_stack)
    with pytest.raises(CommandFailed, match="git"):
        prepare_source(source_packages(loaded)[0], loaded, tmp_path / "out")
