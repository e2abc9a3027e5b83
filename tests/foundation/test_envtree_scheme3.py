"""Tree hash scheme 3 (stackgate.envtree): an empty folder added to an env (a namespace
package: `import foo` and `find_spec("foo")` then succeed) and a set-user/group-id bit are
changes; an env with neither hashes the same as under scheme 2, so nothing built before moves.
Real files, real imports in a real interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from stackgate.envtree import SCHEME, check_tree, compute_tree, write_listing


def _env(tmp_path: Path) -> tuple[Path, Path]:
    env = tmp_path / "env"
    site = env / "lib" / "python3.12" / "site-packages"
    site.mkdir(parents=True)
    (site / "mod.py").write_text("X = 1\n")
    (env / "bin").mkdir()
    (env / "bin" / "tool").write_text("#!/bin/sh\n")
    (env / "bin" / "tool").chmod(0o755)
    (env / "stackgate").mkdir()  # the record folder: its own files are never hashed
    (env / "stackgate" / "build-record.json").write_text("{}")
    return env, site


def test_scheme_3_equals_scheme_2_without_empty_folders_or_id_bits(tmp_path: Path) -> None:
    env, _site = _env(tmp_path)
    assert SCHEME == 3
    assert compute_tree(env, scheme=3).sha256 == compute_tree(env, scheme=2).sha256


def test_an_empty_folder_is_a_namespace_package_and_changes_the_hash(tmp_path: Path) -> None:
    env, site = _env(tmp_path)
    before = compute_tree(env)
    write_listing(env, before)
    (site / "flash_attn").mkdir()
    found = subprocess.run(
        [sys.executable, "-c", "import importlib.util, sys; sys.path.insert(0, sys.argv[1]);"
         "print(importlib.util.find_spec('flash_attn') is not None)", str(site)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert found.stdout.strip() == "True"  # what an optional-dependency check now believes
    check = check_tree(env, before.sha256)
    assert not check.ok
    assert check.differing == ["added: lib/python3.12/site-packages/flash_attn"]
    (site / "flash_attn" / "__pycache__").mkdir()  # byte-code folders still do not count
    assert not check_tree(env, before.sha256).ok


@pytest.mark.parametrize("bit", [0o4000, 0o2000], ids=["setuid", "setgid"])
def test_a_set_id_bit_changes_the_hash(tmp_path: Path, bit: int) -> None:
    env, _site = _env(tmp_path)
    before = compute_tree(env)
    write_listing(env, before)
    (env / "bin" / "tool").chmod(0o755 | bit)
    check = check_tree(env, before.sha256)
    assert not check.ok
    assert check.differing == ["mode changed (X -> Xs): bin/tool"]
