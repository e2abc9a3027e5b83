"""A lock holds packages an env never gets; the build's "installed equals the lock" check expects
only what uv installs for the env's Python here.

Real parts: wheels on a local PEP 503 index, locked by real uv, built by `python -m builder
build`. The shape is vLLM 0.12.0's real lock: pyzmq needs `cffi; implementation_name == 'pypy'`,
so the lock holds cffi and pycparser and a CPython env has neither; the build refused that env
("cffi: locked 2.1.1, installed nothing"). Variants: PyPy by the other marker name, a Python
newer than the env's (a later patch release of its minor), a requested extra (its package is expected and installed), an extra not
requested, and a package needed both ways (through a false marker and unconditionally).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from stackgate.lock.install import env_markers, installed_set
from stackgate.lock.uvlock import read_uv_lock
from tests.builder.conftest import run_builder
from tests.helpers.interpreter import PY_MINOR, base_python
from tests.helpers.local_manifest import local_manifest
from tests.helpers.wheels import make_index, make_wheel

THIS_PYTHON = ".".join(map(str, sys.version_info[:3]))  # a later patch release needs more
EXPECTED = {"app", "pyzmq-like", "gpu-lib", "shared", "py-lib"}
NEVER = {"cffi-like", "pycparser-like", "pypy-only", "future-backport", "docs-lib"}


def _stack(tmp_path: Path) -> Path:
    wheels = tmp_path / "wheels"
    made = [
        make_wheel(
            wheels,
            "app",
            "1.0",
            requires=[
                "pyzmq-like",
                "shared; implementation_name == 'pypy'",
                "gpu-lib; extra == 'gpu'",
                "docs-lib; extra == 'docs'",
            ],
        ),
        make_wheel(
            wheels,
            "pyzmq-like",
            "1.0",
            requires=[
                "cffi-like; implementation_name == 'pypy'",
                "pypy-only; platform_python_implementation == 'PyPy'",
                f"future-backport; python_full_version > '{THIS_PYTHON}'",
                "py-lib; python_version >= '3.0'",
                "shared",
            ],
        ),
        make_wheel(wheels, "cffi-like", "2.1.1", requires=["pycparser-like"]),
        *(make_wheel(wheels, n, "1.0") for n in ("pycparser-like", "pypy-only", "shared")),
        *(make_wheel(wheels, n, "1.0") for n in ("future-backport", "py-lib", "gpu-lib")),
        make_wheel(wheels, "docs-lib", "1.0"),
    ]
    index = make_index(tmp_path / "idx", made)
    manifest = tmp_path / "stacks" / "markers.toml"
    manifest.parent.mkdir()
    manifest.write_text(
        local_manifest(
            name="markers",
            description="packages a universal lock holds for other interpreters",
            python=PY_MINOR,
            index=index,
            packages={"app": "1.0"},
            extras={"app": ["gpu"]},
            host=("570", "12.8", "9.0a"),
            platform="linux-x86_64",
        )
    )
    return manifest


def test_a_build_expects_only_what_uv_installs_for_its_python(tmp_path: Path) -> None:
    manifest = _stack(tmp_path)
    common = ["--locks-dir", tmp_path / "locks", "--python", base_python()]
    locked = run_builder(["lock", manifest, *common])
    assert locked.returncode == 0, locked.stderr
    lock = read_uv_lock(tmp_path / "locks" / "markers" / "uv.lock")
    held = set(lock.by_name())
    assert NEVER - {"docs-lib"} <= held  # the lock holds them (docs-lib: no one asks for it)
    assert set(installed_set(lock, env_markers(None))) == EXPECTED

    built = run_builder(["build", manifest, *common, "--venv-root", tmp_path / "envs", "--json"])
    assert built.returncode == 0, built.stderr
    assert built.stderr.strip().splitlines()[-1].startswith("OK markers built")
    packages = set(json.loads(built.stdout)["record"]["packages"])
    assert packages == EXPECTED


def test_the_walk_still_expects_a_package_the_env_lacks(tmp_path: Path) -> None:
    """Leaving a package out is not a way to pass: what the walk expects is compared, and the
    builder's rule still names a missing one."""
    from stackgate.installed import lock_differences

    manifest = _stack(tmp_path)
    locked = run_builder(
        ["lock", manifest, "--locks-dir", tmp_path / "locks", "--python", base_python()]
    )
    assert locked.returncode == 0, locked.stderr
    expected = installed_set(
        read_uv_lock(tmp_path / "locks" / "markers" / "uv.lock"), env_markers(None)
    )
    installed = {key: versions[0] for key, versions in expected.items() if key != "shared"}
    diff = lock_differences(installed, expected)
    assert diff.not_installed == [("shared", ["1.0"])]
    # a PyPy env would get the PyPy-only packages
    pypy = {
        **env_markers(None),
        "implementation_name": "pypy",
        "platform_python_implementation": "PyPy",
    }
    lock = read_uv_lock(tmp_path / "locks" / "markers" / "uv.lock")
    assert {"cffi-like", "pycparser-like", "pypy-only"} <= set(installed_set(lock, pypy))
