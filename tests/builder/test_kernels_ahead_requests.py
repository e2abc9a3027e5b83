"""The committed kernels requests of h200-sglang against what a real first server compiled: every
TVM-FFI module the h100-1 servers (with and without build-time kernels) compiled at run time is
built by a request, as the CPU build recorded it (`results/cpu-kernels-10.json`: module names
with SGLang's source hashes); and the carry export reads an env `builder build --kernels` built.
Real files: the committed GPU results, the committed requests, the real export script (bash, tar,
sha256sum)."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import tarfile
from pathlib import Path

from builder.kernels.request import load_request
from stackgate.manifest.loading import load_stack
from tests.builder.conftest import ROOT

KA = ROOT / "benchmarks" / "kernels_ahead"
REQUESTS = [KA / "flashinfer-h200-sglang.json", KA / "sglang-h200-sglang.json"]
H100 = KA / "results" / "h100-1"
CPU_BUILD = KA / "results" / "cpu-kernels-10.json"
EXPORT = KA / "kernels_ahead_export.sh"
# a TVM-FFI module folder: <module>__arch_<arch>__tvmffi_<version>
MODULE = re.compile(r"(sgl_kernel_jit_\w+?)__arch_([0-9.]+a?)__tvmffi_")


def _key(spec: dict[str, object]) -> str:
    return json.dumps(
        [spec["engine"], spec["call"], spec.get("args", []), spec.get("kwargs", {})],
        sort_keys=True,
    )


def _compiled_at_run_time() -> set[str]:
    """Module names the h100-1 servers compiled: the without-server's TVM-FFI cache and what
    verify found added to the with-server's env."""
    text = (H100 / "caches-without-after.txt").read_text(encoding="utf-8")
    text += (H100 / "verify-with.txt").read_text(encoding="utf-8")
    return {m.group(1) for m in MODULE.finditer(text) if m.group(2) == "9.0a"}


def test_the_committed_requests_load_for_the_stack_without_duplicates() -> None:
    archs = list(load_stack(str(ROOT / "stacks" / "h200-sglang.toml")).manifest.host.target_archs)
    keys: list[str] = []
    for path in REQUESTS:
        request = load_request(path, archs)
        assert request.arch == "9.0a"
        keys += [_key(k.model_dump()) for k in request.kernels]
    assert len(keys) == len(set(keys)) == 10


def test_every_module_the_h100_server_compiled_is_requested() -> None:
    compiled = _compiled_at_run_time()
    # the four the first requests missed, and the build-time ones the baseline compiled itself
    assert {
        "sgl_kernel_jit_clamp_position_int64_t_f0f4b97752d12e85",
        "sgl_kernel_jit_dsv3_fused_a_gemm_7168_2112_true_0db9b684d3839b11",
        "sgl_kernel_jit_gptq_marlin_repack_3b8430122903c9db",
        "sgl_kernel_jit_fused_rope_false_64_true_bf16_t_bf16_t_d31950f34b6864e0",
        "sgl_kernel_jit_activation_bf16_t_true_64bd1e5883cdfa1c",
    } <= compiled
    built = json.loads(CPU_BUILD.read_text(encoding="utf-8"))
    by_name = {k["name"]: k for k in built["kernels"]}
    missing = sorted(compiled - set(by_name))
    assert not missing, f"compiled on the GPU host but built by no request: {missing}"
    requested = {
        _key(k)
        for path in REQUESTS
        for k in json.loads(path.read_text(encoding="utf-8"))["kernels"]
    }
    for name in compiled:
        assert _key(by_name[name]) in requested, name  # built from the committed request itself


def test_the_cpu_build_record_matches_the_carry_it_describes() -> None:
    built = json.loads(CPU_BUILD.read_text(encoding="utf-8"))
    assert built["carry_sha256"] in (KA / "prereg-2.md").read_text(encoding="utf-8")
    assert {k["how"] for k in built["kernels"]} <= {"copied", "compiled"}
    assert all(k["files"] and k["arch"] == "9.0a" for k in built["kernels"])


def _built_env(tmp_path: Path, kernels: object) -> Path:
    env = tmp_path / "env"
    so = env / "lib" / "python3.12" / "site-packages" / "_stackgate_kernels" / "m" / "m.so"
    so.parent.mkdir(parents=True)
    so.write_bytes(b"\x7fELF module")
    (env / "lib" / "python3.12" / "site-packages" / "other.py").write_text("X = 1\n")
    (env / "stackgate").mkdir()
    (env / "stackgate" / "build-record.json").write_text(
        json.dumps({"stack": "h200-sglang", "kernels": kernels}), encoding="utf-8"
    )
    return env


def test_export_takes_the_kernels_of_a_builder_built_env(tmp_path: Path) -> None:
    rel = "lib/python3.12/site-packages/_stackgate_kernels/m/m.so"
    kernels = {
        "kernels": [
            {"ok": True, "files": [{"path": rel}]},
            {"ok": False, "files": [{"path": "lib/never.so"}]},  # a failed one is not carried
        ]
    }
    env = _built_env(tmp_path, kernels)
    out = tmp_path / "carry"
    done = subprocess.run(["bash", str(EXPORT), str(env), str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1].startswith("OK 1 kernel files")
    with tarfile.open(out / "kernels.tar") as tar:
        assert tar.getnames() == ["stackgate/kernels.json", rel]
        listed = tar.extractfile("stackgate/kernels.json")
        assert listed is not None and json.load(listed) == kernels
    digest = hashlib.sha256((out / "kernels.tar").read_bytes()).hexdigest()
    assert (out / "kernels.tar.sha256").read_text() == f"{digest}  kernels.tar\n"
    assert not (out / "stage").exists()


def test_export_refuses_an_env_without_kernels(tmp_path: Path) -> None:
    env = _built_env(tmp_path, None)
    done = subprocess.run(
        ["bash", str(EXPORT), str(env), str(tmp_path / "c")], capture_output=True, text=True
    )
    assert done.returncode == 2
    assert "build-record.json: kernels: none" in done.stderr
    assert not (tmp_path / "c" / "kernels.tar").exists()
    bare = tmp_path / "bare"
    bare.mkdir()
    done = subprocess.run(
        ["bash", str(EXPORT), str(bare), str(tmp_path / "d")], capture_output=True, text=True
    )
    assert done.returncode == 2 and "REFUSED" in done.stderr
    assert not (tmp_path / "d").exists()
