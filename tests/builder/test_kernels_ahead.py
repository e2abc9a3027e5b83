"""Build-time kernels (`builder build --kernels`), with real compiles: FlashInfer 0.6.15.post1's
`quantization` module (two translation units, the smallest with GPU code) built by this
host's nvcc for sm_90a, without a GPU, into a real locked env layered over a real PyTorch
(the PyPI torch 2.10.0 env the static tests cache). What it proves:

- the module lands where FlashInfer loads it before any JIT (JitSpec.is_aot), is listed in the
  build record with its sha256, is in the env's tree listing, and `verify` catches an edit;
- the static group reads its SASS: PASS for 9.0a, a FAIL naming it for 12.0a (wrong arch);
- `--kernels-from` copies it into a second env (no compile): same bytes, same tree hash;
- a kernel that cannot be built is listed with its cost and the build goes on, unless
  `--kernels-required` (exit 1, nothing published).
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from stackgate.files import sha256_file
from tests.builder.conftest import ROOT, run_builder
from tests.validators.test_real_wheels import real_env

pytestmark = [pytest.mark.network, pytest.mark.slow, pytest.mark.timeout(1800)]

MANIFEST = """schema_version = 1
name = "kt"
description = "FlashInfer's JIT kernels built at build time over a torch env (test)"
python = "3.12"
overrides = [
  "torch; sys_platform == 'never'",
  "numpy; sys_platform == 'never'",
  "nvidia-cudnn-frontend; sys_platform == 'never'",
  "nvidia-cutlass-dsl; sys_platform == 'never'",
  "cuda-python; sys_platform == 'never'",
]
[host]
min_driver = "580"
cuda = "13.0"
target_archs = ["9.0a"]
[indexes.pypi]
url = "https://pypi.org/simple"
explicit = false
[packages.flashinfer-python]
version = "0.6.15.post1"
index = "pypi"
[packages.apache-tvm-ffi]
version = "0.1.11"
index = "pypi"
"""
QUANT = {"engine": "flashinfer", "call": "flashinfer.jit.quantization:gen_quantization_module"}
# The lock and the build read PyPI (the test is marked `network`): offline, they passed only
# where an earlier run had left these wheels in uv's cache, and failed on a fresh machine.
ONLINE = {"UV_OFFLINE": ""}
AOT = "lib/python3.12/site-packages/flashinfer/data/aot/quantization/quantization.so"


def _write(path: Path, data: object) -> Path:
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def _static(manifest: Path, env: Path, *targets: str) -> tuple[int, dict[str, dict]]:  # type: ignore[type-arg]
    extra = ["--targets", ",".join(targets)] if targets else []
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "validators",
            "static",
            str(manifest),
            "--env",
            str(env),
            "--json",
            *extra,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    results = json.loads(done.stdout)["results"]
    return done.returncode, {r["check"]: r for r in results if r["check"].startswith("static.arch")}


def _aot_result(results: dict[str, dict]) -> dict:  # type: ignore[type-arg]
    found = [r for r in results.values() if "flashinfer/data/aot/quantization" in json.dumps(r)]
    assert len(found) == 1, results
    return found[0]


def test_a_kernel_built_at_build_time_is_part_of_the_env(tmp_path: Path) -> None:
    torch_site = next((real_env("2.10.0") / "lib").glob("python3.12/site-packages"))
    manifest = _write(tmp_path / "kt.toml", MANIFEST)
    request = _write(tmp_path / "quant.json", {"arch": "9.0a", "kernels": [QUANT]})
    locks, venvs = tmp_path / "locks", tmp_path / "envs"
    assert run_builder(["lock", manifest, "--locks-dir", locks], env=ONLINE).returncode == 0
    common = [manifest, "--locks-dir", locks, "--base-site", torch_site, "--kernels", request]
    done = run_builder(["build", *common, "--venv-root", venvs, "--json"], env=ONLINE, timeout=1500)
    assert done.returncode == 0, done.stderr[-3000:]
    env = Path(json.loads(done.stdout)["env"])
    kernels = json.loads((env / "stackgate" / "build-record.json").read_text())["kernels"]
    (kernel,) = kernels["kernels"]
    assert kernel["ok"] and kernel["how"] == "compiled" and kernel["name"] == "quantization"
    assert [f["path"] for f in kernel["files"]] == [AOT]
    assert kernel["files"][0]["sha256"] == sha256_file(env / AOT)
    assert kernels["toolchain"]["nvcc"].startswith("13.")
    with gzip.open(env / "stackgate" / "tree.tsv.gz", "rt") as listing:
        assert any(line.rstrip("\n").endswith("\t" + AOT) for line in listing)

    # FlashInfer takes it without JIT: its AOT path is this file
    probe = (
        "from flashinfer.jit.quantization import gen_quantization_module as g; s = g(); "
        "print(s.is_aot, s.aot_path)"
    )
    out = subprocess.run(
        [env / "bin" / "python", "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin", "FLASHINFER_CUDA_ARCH_LIST": "9.0a"},
    ).stdout.split()
    assert out == ["True", str(env / AOT)]

    # the static group reads its SASS like any GPU code: right arch PASS, wrong arch a FAIL
    _code, ok = _static(manifest, env)
    assert _aot_result(ok)["status"] == "PASS" and "sm_90a" in _aot_result(ok)["reason"]
    code, wrong = _static(manifest, env, "12.0a")
    assert code == 1 and _aot_result(wrong)["status"] == "FAIL"
    assert "no SASS that runs on 12.0a" in _aot_result(wrong)["reason"]

    # a second env takes it from the first without compiling: same bytes, same tree
    other = tmp_path / "envs2"
    copied = run_builder(
        ["build", *common, "--venv-root", other, "--kernels-from", env, "--json"], timeout=900
    )
    assert copied.returncode == 0, copied.stderr[-3000:]
    record2 = json.loads(copied.stdout)["record"]
    assert record2["kernels"]["kernels"][0]["how"] == "copied"
    assert record2["kernels"]["toolchain"] == {}
    first = json.loads((env / "stackgate" / "build-record.json").read_text())
    assert record2["tree"]["sha256"] == first["tree"]["sha256"]

    # verify covers it: one byte appended is named
    verify = ["verify", manifest, "--venv-root", venvs]
    assert run_builder(verify).returncode == 0
    with (env / AOT).open("ab") as handle:
        handle.write(b"\0")
    changed = run_builder(verify)
    assert changed.returncode == 1 and "quantization.so" in changed.stderr, changed.stderr


def test_a_kernel_that_cannot_be_built_is_reported_with_its_cost(tmp_path: Path) -> None:
    torch_site = next((real_env("2.10.0") / "lib").glob("python3.12/site-packages"))
    manifest = _write(tmp_path / "kt.toml", MANIFEST)
    bogus = {"engine": "flashinfer", "call": "flashinfer.jit.norm:gen_no_such_module"}
    request = _write(tmp_path / "bogus.json", {"arch": "9.0a", "kernels": [bogus]})
    locks, venvs = tmp_path / "locks", tmp_path / "envs"
    assert run_builder(["lock", manifest, "--locks-dir", locks], env=ONLINE).returncode == 0
    common = [manifest, "--locks-dir", locks, "--base-site", torch_site, "--kernels", request]
    required = run_builder(
        ["build", *common, "--venv-root", venvs, "--kernels-required"], env=ONLINE
    )
    assert required.returncode == 1, required.stderr[-2000:]
    assert "gen_no_such_module" in required.stderr
    assert not list((venvs / "kt").glob("kt-*")), "nothing is published"
    done = run_builder(["build", *common, "--venv-root", venvs, "--json"], env=ONLINE, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "the first server on the GPU host compiles it" in done.stderr
    (kernel,) = json.loads(done.stdout)["record"]["kernels"]["kernels"]
    assert not kernel["ok"] and "gen_no_such_module" in kernel["error"]
