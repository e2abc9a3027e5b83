"""Fixtures for builder tests: real local PEP 503 indexes made of real wheels, a manifest shaped
like cu130 (explicit CUDA indexes, +cu130 local versions, overrides of upstream exact pins),
and a runner for `python -m builder` as a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.interpreter import PY_MINOR, base_python
from tests.helpers.wheels import make_index, make_wheel

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class LocalStack:
    root: Path
    manifest: Path
    locks: Path
    venvs: Path
    pypi_url: str
    cuda_url: str
    kernel_url: str
    wheels: Path

    def cli(self, *args: str | Path, env: dict[str, str] | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return run_builder(list(args), env=env, timeout=timeout)

    def lock_args(self) -> list[str | Path]:
        return ["lock", self.manifest, "--locks-dir", self.locks, "--python", base_python()]

    def lock(self, *extra: str, env: dict[str, str] | None = None
             ) -> subprocess.CompletedProcess[str]:
        return self.cli(*self.lock_args(), *extra, env=env)

    def build_args(self, *extra: str | Path, python: str | None = None,
                   venvs: Path | None = None) -> list[str | Path]:
        return ["build", self.manifest, "--locks-dir", self.locks, "--venv-root",
                venvs or self.venvs, "--python", python or base_python(), *extra]

    def build(self, *extra: str | Path, env: dict[str, str] | None = None
              ) -> subprocess.CompletedProcess[str]:
        return self.cli(*self.build_args(*extra), env=env)

    @property
    def stack_dir(self) -> Path:
        return self.venvs / self.manifest.stem


def builder_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"UV_PYTHON_DOWNLOADS": "never", "NO_COLOR": "1", "PYTHONPATH": str(ROOT),
                "UV_CACHE_DIR": os.environ.get("STACKGATE_TEST_UV_CACHE", env.get(
                    "UV_CACHE_DIR", str(Path.home() / ".cache" / "uv")))})
    env.pop("VIRTUAL_ENV", None)
    # uv runs in a subprocess the socket guard cannot see: keep it off the network unless the
    # test is about the network (it passes UV_OFFLINE="" to lift this).
    env.setdefault("UV_OFFLINE", "1")
    for key, value in (extra or {}).items():
        if value == "":
            env.pop(key, None)
        else:
            env[key] = value
    return env


def run_builder(args: Sequence[str | Path], *, env: dict[str, str] | None = None,
                timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "builder", *[str(a) for a in args]],
        env=builder_env(env), capture_output=True, text=True, timeout=timeout, cwd=ROOT,
    )


def popen_builder(args: Sequence[str | Path], *, env: dict[str, str] | None = None
                  ) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "builder", *[str(a) for a in args]],
        env=builder_env(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        cwd=ROOT, start_new_session=True,
    )


MANIFEST = """\
schema_version = 1
name = "{name}"
description = "local cu130-shaped stack for builder tests"
python = "{python}"
platform = "linux-x86_64"
overrides = [{overrides}]

[host]
min_driver = "580"
cuda = "13.0.1"
target_archs = ["12.0a"]

[indexes.pypi]
url = "{pypi}"
explicit = false

[indexes.pytorch-cu130]
url = "{cuda}"

[indexes.sgl-kernel-cu130]
url = "{kernel}"

[packages.torch]
version = "{torch}"
index = "pytorch-cu130"

[packages.sgl-kernel]
version = "0.3.21+cu130"
index = "sgl-kernel-cu130"

[packages.flashinfer-python]
version = "0.6.4"
index = "pypi"

[packages.sglang]
version = "0.5.9"
index = "pypi"
{extra}
[build]
memory_per_job_gb = 0.5
memory_margin_gb = 0.5

[environment.common]
CUDA_DEVICE_ORDER = "PCI_BUS_ID"

[environment.topology.pcie]
NCCL_PROTO = "LL"
NCCL_P2P_LEVEL = "SYS"

[environment.topology.nvlink]

[validation]
required = ["host"]
"""

DEFAULT_OVERRIDES = '"flashinfer-python==0.6.4", "torch==2.9.1+cu130", "sgl-kernel==0.3.21+cu130"'


def write_manifest(folder: Path, name: str, urls: dict[str, str], *, torch: str = "2.9.1+cu130",
                   overrides: str = DEFAULT_OVERRIDES, extra: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.toml"
    path.write_text(MANIFEST.format(name=name, python=PY_MINOR, overrides=overrides,
                                    torch=torch, extra=extra, **urls))
    return path


def make_indexes(root: Path) -> dict[str, str]:
    """Three indexes shaped like the real ones, with decoys that a wrong resolver would take."""
    wheels = root / "wheels"
    pypi = [
        # SGLang pins torch and flashinfer exactly, like the real 0.5.9 does.
        make_wheel(wheels / "pypi", "sglang", "0.5.9",
                   requires=["torch==2.9.1", "flashinfer-python==0.6.3", "sgl-kernel==0.3.21",
                             "numpy"]),
        make_wheel(wheels / "pypi", "flashinfer-python", "0.6.3", requires=["torch"]),
        make_wheel(wheels / "pypi", "flashinfer-python", "0.6.4", requires=["torch"]),
        # Decoys: the CPU/cu12 torch PyPI serves and a newer plain sgl-kernel.
        make_wheel(wheels / "pypi", "torch", "2.9.1", requires=["numpy"]),
        make_wheel(wheels / "pypi", "sgl-kernel", "0.3.21"),
        make_wheel(wheels / "pypi", "numpy", "2.0.0"),
    ]
    cuda = [
        make_wheel(wheels / "cuda", "torch", "2.9.1+cu130", requires=["numpy"],
                   files={"torch/__init__.py": "CUDA = '13.0'\n"}),
        make_wheel(wheels / "cuda", "torch", "2.9.1+cu128", requires=["numpy"]),
        # An explicit index serves only what is pinned to it: this numpy must never be used.
        make_wheel(wheels / "cuda", "numpy", "9.9.9"),
    ]
    kernel = [make_wheel(wheels / "kernel", "sgl-kernel", "0.3.21+cu130")]
    return {
        "pypi": make_index(root / "idx-pypi", pypi),
        "cuda": make_index(root / "idx-cuda", cuda),
        "kernel": make_index(root / "idx-kernel", kernel),
    }


@pytest.fixture
def local_stack(tmp_path: Path) -> LocalStack:
    urls = make_indexes(tmp_path)
    manifest = write_manifest(tmp_path / "stacks", "localstack", urls)
    return LocalStack(
        root=tmp_path, manifest=manifest, locks=tmp_path / "locks", venvs=tmp_path / "envs",
        pypi_url=urls["pypi"], cuda_url=urls["cuda"], kernel_url=urls["kernel"],
        wheels=tmp_path / "wheels",
    )


def read_lock_packages(lockfile: Path) -> dict[str, dict[str, object]]:
    import tomllib

    data = tomllib.loads(lockfile.read_text())
    return {p["name"]: p for p in data["package"]}


def uv_wrapper(path: Path, before_sync: str) -> Path:
    """An executable at `path` for STACKGATE_UV: runs the shell line `before_sync` when called
    as `uv sync ...`, then the real uv with the same arguments (a slow or meddling uv, for real)."""
    from stackgate.uvbin import uv_bin

    path.write_text(
        f'#!/bin/sh\nif [ "$1" = sync ]; then {before_sync}; fi\nexec {uv_bin()} "$@"\n'
    )
    path.chmod(0o755)
    return path
