"""The done-when of the static group, on real PyPI wheels: sgl-kernel 0.3.21 beside torch
2.10.0 fails naming both packages and the demangled symbols; beside torch 2.9.1 it passes.
The static verdict is then checked against the real loader (dlopen with RTLD_NOW).

Environments are real uv installs (torch from PyPI is a +cu128 build, so its nvidia-*-cu12
wheels come too: sgl-kernel's libcudart.so.12/libcublas.so.12 resolve honestly), about 4 GB
each, cached under ~/.cache/stackgate/abi-envs (STACKGATE_ABI_ENVS overrides) between runs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stackgate.errors import EnvironmentProblem
from stackgate.python_finder import find_python
from tests.helpers.cache_lock import cache_lock
from tests.validators import elf_env
from validators.static.abi_check import AbiChecker
from validators.static.environment import load_environment

pytestmark = [pytest.mark.network, pytest.mark.slow, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(
    os.environ.get("STACKGATE_ABI_ENVS", Path.home() / ".cache" / "stackgate" / "abi-envs")
)
SGL_KERNEL = "0.3.21"
MANIFEST = """schema_version = 1
name = "{name}"
description = "sgl-kernel {sgl} beside torch {torch} from PyPI (test)"
python = "3.12"
[host]
min_driver = "570.26"
cuda = "12.8"
target_archs = ["9.0a", "12.0a"]
[indexes.pypi]
url = "https://pypi.org/simple"
explicit = false
[packages.torch]
version = "{torch}"
index = "pypi"
cuda = "12.8"
[packages.sgl-kernel]
version = "{sgl}"
index = "pypi"
cuda = "12.9"
"""


def _complete(env: Path, torch: str) -> bool:
    site = next(iter(env.glob("lib/python3*/site-packages")), None)
    return site is not None and all(
        any(site.glob(f"{name}-{version}*.dist-info"))
        for name, version in (("torch", torch), ("sgl_kernel", SGL_KERNEL))
    )


def real_env(torch: str) -> Path:
    env = CACHE / f"torch-{torch}"
    with cache_lock(env):
        return _real_env_locked(env, torch)


def _real_env_locked(env: Path, torch: str) -> Path:
    if _complete(env, torch):
        return env
    uv = shutil.which("uv")
    if uv is None:
        pytest.skip("uv not on PATH")
    shutil.rmtree(env, ignore_errors=True)
    env.parent.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("UV_PYTHON_DOWNLOADS", "never")
    # The builder's finder: PATH, then `pyenv prefix` (a pyenv shim for an inactive version
    # is not an interpreter; uv alone would not find it on a fresh machine).
    try:
        python = find_python("3.12")
    except EnvironmentProblem as exc:
        pytest.skip(f"no Python 3.12: {exc.message}")
    made = subprocess.run(
        [uv, "venv", "-q", "--python", str(python.path), str(env)],
        capture_output=True,
        text=True,
    )
    if made.returncode != 0:
        pytest.fail(f"uv venv with {python.path} failed: {made.stderr.strip()[-300:]}")
    subprocess.run(
        [
            uv,
            "pip",
            "install",
            "-q",
            "--python",
            str(env / "bin" / "python"),
            f"torch=={torch}",
            f"sgl-kernel=={SGL_KERNEL}",
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert _complete(env, torch)
    return env


def static(env: Path, torch: str, tmp_path: Path) -> dict[str, dict]:  # type: ignore[type-arg]
    name = f"sgl-{torch.replace('.', '')}"
    manifest = tmp_path / f"{name}.toml"
    manifest.write_text(MANIFEST.format(name=name, torch=torch, sgl=SGL_KERNEL), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "validators", "static", str(manifest), "--env", str(env), "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert "Traceback" not in done.stderr
    results = {r["check"]: r for r in json.loads(done.stdout)["results"]}
    results["_exit"] = {"code": done.returncode}
    return results


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="needs binutils c++filt")
def test_sgl_kernel_with_torch_2_10_fails_naming_both(tmp_path: Path) -> None:
    env = real_env("2.10.0")
    results = static(env, "2.10.0", tmp_path)
    assert results["_exit"]["code"] == 1
    kernel = results["static.abi.sgl_kernel"]
    assert kernel["status"] == "FAIL"
    assert kernel["reason"].startswith(
        "sgl-kernel 0.3.21 was built against another torch than the installed torch 2.10.0"
    )
    missing = {m["symbol"] for m in kernel["evidence"]["missing_symbols"]}
    assert missing == {
        "c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, int, bool)",
        "c10::MessageLogger::MessageLogger(char const*, int, int)",
    }
    assert {m["provider_package"] for m in kernel["evidence"]["missing_symbols"]} == {
        "torch 2.10.0"
    }
    assert results["static.dists.pins"]["status"] == "PASS"
    assert results["static.abi.torch"]["status"] == "PASS"


def test_sgl_kernel_with_torch_2_9_1_passes(tmp_path: Path) -> None:
    env = real_env("2.9.1")
    results = static(env, "2.9.1", tmp_path)
    bad = {
        k: r["reason"][:200]
        for k, r in results.items()
        if k != "_exit" and r["status"] in ("FAIL", "ERROR")
    }
    assert bad == {}
    assert results["_exit"]["code"] == 0
    assert results["static.abi.sgl_kernel"]["status"] == "PASS"
    assert results["static.arch.sgl_kernel"]["status"] == "PASS"
    assert results["static.dists.lock"]["status"] == "SKIP"


LOAD = """
import ctypes, sys
import torch  # loads libtorch/libc10 the way `import sgl_kernel` finds them
try:
    ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_GLOBAL)  # ctypes always adds RTLD_NOW
    print("LOADED")
except OSError as exc:
    print("ERROR", exc)
"""


@pytest.mark.skipif(not elf_env.have_compilers(), reason="needs gcc")
@pytest.mark.parametrize("torch", ["2.9.1", "2.10.0"])
def test_static_verdict_matches_the_real_loader(torch: str, tmp_path: Path) -> None:
    """dlopen each sgl-kernel module (one process each) with a stub libcuda.so.1 that exports
    the driver functions the static check found: exactly the modules it flagged fail, with
    `undefined symbol` naming a symbol it reported."""
    env = real_env(torch)
    environment = load_environment(env)
    checker = AbiChecker(environment)
    modules = sorted((environment.site_packages / "sgl_kernel").rglob("*.so"))
    findings = checker.check(modules)
    stub_src = "".join(
        f"int {n}(void) {{ return 0; }}\n" for n in sorted(findings.host_provided_names)
    )
    elf_env.gcc(
        tmp_path / "stub" / "libcuda.so.1",
        stub_src or "int cuInit(void){return 0;}\n",
        "-Wl,-soname,libcuda.so.1",
    )
    predicted = {m.importer for m in findings.missing_symbols}
    predicted_names = {m.symbol for m in findings.missing_symbols}
    env_vars = {**elf_env.env_vars_without_ld_path(), "LD_LIBRARY_PATH": str(tmp_path / "stub")}
    for module in modules:
        done = subprocess.run(
            [str(env / "bin" / "python"), "-c", LOAD, str(module)],
            capture_output=True,
            text=True,
            env=env_vars,
            timeout=300,
        )
        line = next(
            (ln for ln in done.stdout.splitlines() if ln.startswith(("LOADED", "ERROR"))), ""
        )
        if module.resolve() in predicted:
            assert "undefined symbol" in line, (module, line, done.stderr[-500:])
            assert line.rsplit("undefined symbol: ", 1)[1].strip() in predicted_names
        else:
            assert line == "LOADED", (module, line, done.stderr[-500:])
    assert bool(predicted) is (torch == "2.10.0")


def test_distributed_probe_runs_for_real_on_cpus(tmp_path: Path) -> None:
    """The NCCL-latency probe's process orchestration, on gloo (no GPU here): two real ranks,
    rank 0's JSON, pooled statistics. The H200 run used the same code with NCCL."""
    from validators.runtime import nccl_latency as nl
    from validators.runtime.runner import probe_env, run_distributed

    env = real_env("2.9.1")
    sizes = [7168 * 2, 7168 * 2 * 8]
    o = run_distributed(
        env / "bin" / "python",
        ["nccl", ",".join(map(str, sizes)), "20"],
        world_size=2,
        env=probe_env({"STACKGATE_DIST_BACKEND": "gloo"}),
        timeout=300,
        log_dir=tmp_path,
    )
    assert o.status == "PASS", o.reason
    assert o.evidence["backend"] == "gloo" and o.evidence["world_size"] == 2
    stats = nl.summarize(nl.merge([o.evidence, o.evidence]))
    assert [s.bytes for s in stats] == sizes
    assert all(s.correct and s.samples == 40 and s.p90_us >= s.p50_us > 0 for s in stats)


def test_nccl_latency_check_fails_above_the_manifest_threshold(tmp_path: Path) -> None:
    """The whole latency check (profile vs defaults, pooling, threshold) with real ranks on
    gloo: a 1 us p50 limit cannot be met, so it is a FAIL that says by how much."""
    from stackgate.manifest.loading import load_stack
    from validators.core.context import RunContext
    from validators.core.options import parse_options
    from validators.runtime import nccl_latency as nl
    from validators.runtime.distributed import _nccl

    env = real_env("2.9.1")
    loaded = load_stack("cu130")
    thresholds = loaded.manifest.validation.thresholds.model_copy(
        update={"allreduce_p50_us_max": 1.0}
    )
    validation = loaded.manifest.validation.model_copy(update={"thresholds": thresholds})
    manifest = loaded.manifest.model_copy(update={"validation": validation})
    ctx = RunContext(
        stack=type(loaded)(loaded.path, manifest, loaded.raw),
        options=parse_options(["nccl_iters=5", "nccl_repeats=1"]),
    )
    stack_env = {**manifest.env_for("pcie"), "STACKGATE_DIST_BACKEND": "gloo"}
    result = _nccl(ctx, env / "bin" / "python", stack_env, "pcie", 2, 300.0, tmp_path)
    assert result.status == "FAIL", result.reason
    assert "exceeds the manifest's allreduce_p50_us_max 1.0 us" in result.reason
    assert result.evidence["profile_env"]["NCCL_PROTO"] == "LL"
    assert [row["bytes"] for row in result.evidence["rows"]] == nl.message_sizes()


def test_runtime_distributed_checks_at_the_profiles_eight_ranks_on_gloo(tmp_path: Path) -> None:
    """Issue 18 on CPUs: the cu130 profile runs TP 8, so the distributed checks start 8 real
    torch processes (gloo), rendezvous, time every message size for the profile and for NCCL's
    defaults, and pool the results, with no GPU on this host. symm-mem needs CUDA: a SKIP."""
    from stackgate.manifest.loading import load_stack
    from validators.core.context import RunContext
    from validators.core.options import parse_options
    from validators.runtime import nccl_latency as nl
    from validators.runtime.distributed import distributed_checks
    from validators.runtime.runner import ProbeOutcome, probe_env

    env = real_env("2.9.1")
    loaded = load_stack("cu130")
    gloo = {"STACKGATE_DIST_BACKEND": "gloo"}
    ctx = RunContext(
        stack=loaded,
        options=parse_options(["nccl_iters=5", "nccl_repeats=1", "probe_timeout=600"]),
        out_dir=tmp_path,
    )
    stack_env = {**loaded.manifest.env_for("pcie"), **gloo}
    no_gpu = ProbeOutcome("SKIP", "torch imports, but CUDA is not available")
    out = {
        r.check: r
        for r in distributed_checks(
            ctx, env / "bin" / "python", probe_env(stack_env), stack_env, "pcie", 0, no_gpu
        )
    }
    assert out["runtime.symm_mem"].status == "SKIP"
    assert "gloo backend" in out["runtime.symm_mem"].reason
    nccl = out["runtime.nccl_latency"]
    assert nccl.status == "PASS", nccl.reason
    assert nccl.evidence["world_size"] == 8 and nccl.reason.startswith("8 ranks")
    assert [row["bytes"] for row in nccl.evidence["rows"]] == nl.message_sizes()
    logs = sorted(p.name for p in (tmp_path / "runtime-logs").iterdir())
    assert len(logs) == 16  # 8 ranks x (profile, defaults)
