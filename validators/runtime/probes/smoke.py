# mypy: ignore-errors
# (runs under the environment's interpreter, where torch is untyped for us)
"""Runtime probe run by the environment's own interpreter (stdlib + what the env has).

Usage: python smoke.py PROBE   (PROBE: torch, sgl_kernel, flashinfer, flashinfer_jit, sglang)
Prints one line `STACKGATE_PROBE {json}` with status PASS/FAIL/SKIP/ERROR, reason, evidence.
This file must not import stackgate: the environment under test does not have it.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
import traceback
from typing import Any


def emit(status: str, reason: str, **evidence: Any) -> None:
    sys.stdout.write(
        "STACKGATE_PROBE "
        + json.dumps({"status": status, "reason": reason, "evidence": evidence}, default=str)
        + "\n"
    )
    sys.stdout.flush()


def _tail(exc: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()[-2000:]


def _import_or_emit(module: str, what: str | None = None) -> Any:
    """The module, or None after emitting SKIP (not installed) or FAIL (the import breaks)."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        emit("SKIP", f"{what or module} is not installed in this environment ({exc})")
    except Exception as exc:
        emit("FAIL", f"import {module} failed: {_tail(exc)}")
    return None


def _torch_cuda() -> Any:
    import torch

    if not torch.cuda.is_available():
        return None
    return torch


def probe_torch() -> None:
    try:
        import torch
    except Exception as exc:
        emit("FAIL", f"import torch failed: {_tail(exc)}")
        return
    ev: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.version.cuda}
    if not torch.cuda.is_available():
        emit("SKIP", "torch imports, but CUDA is not available (no GPU or no driver)", **ev)
        return
    n = torch.cuda.device_count()
    ev["devices"] = [
        {"name": torch.cuda.get_device_name(i), "cc": list(torch.cuda.get_device_capability(i))}
        for i in range(n)
    ]
    ev["arch_list"] = torch.cuda.get_arch_list()
    a = torch.randn(256, 256, device="cuda", dtype=torch.float32)
    b = torch.randn(256, 256, device="cuda", dtype=torch.float32)
    got = (a @ b).cpu()
    ref = a.cpu() @ b.cpu()
    err = float((got - ref).abs().max())
    ev["matmul_max_abs_err"] = err
    if err > 1e-2:
        emit("FAIL", f"a 256x256 fp32 matmul on the GPU differs from the CPU by {err}", **ev)
        return
    emit("PASS", f"torch {torch.__version__} (CUDA {torch.version.cuda}) runs on {n} GPU(s)", **ev)


def probe_sgl_kernel() -> None:
    sgl_kernel = _import_or_emit("sgl_kernel")
    if sgl_kernel is None:
        return
    torch = _torch_cuda()
    ver = getattr(sgl_kernel, "__version__", "?")
    if torch is None:
        emit("SKIP", f"sgl_kernel {ver} imports; no GPU to run an op on")
        return
    x = torch.randn(8, 2 * 1024, device="cuda", dtype=torch.bfloat16)
    out = sgl_kernel.silu_and_mul(x)
    d = x.shape[-1] // 2
    ref = torch.nn.functional.silu(x[..., :d].float()) * x[..., d:].float()
    err = float((out.float() - ref).abs().max())
    status = "PASS" if err < 5e-2 else "FAIL"
    emit(status, f"sgl_kernel {ver} silu_and_mul vs torch: max abs err {err:.3g}", max_abs_err=err)


def probe_flashinfer() -> None:
    flashinfer = _import_or_emit("flashinfer")
    if flashinfer is None:
        return
    emit("PASS", f"flashinfer {getattr(flashinfer, '__version__', '?')} imports")


def probe_flashinfer_jit() -> None:
    """Compile (JIT) and run one small kernel for the device arch: RMSNorm vs torch."""
    flashinfer = _import_or_emit("flashinfer")
    if flashinfer is None:
        return
    torch = _torch_cuda()
    if torch is None:
        emit("SKIP", "no GPU: FlashInfer JIT needs a device to target")
        return
    ev = {
        "FLASHINFER_CUDA_ARCH_LIST": os.environ.get("FLASHINFER_CUDA_ARCH_LIST"),
        "cc": list(torch.cuda.get_device_capability()),
    }
    t = time.perf_counter()
    try:
        x = torch.randn(4, 4096, device="cuda", dtype=torch.float16)
        w = torch.randn(4096, device="cuda", dtype=torch.float16)
        out = flashinfer.norm.rmsnorm(x, w, eps=1e-6)
        xf = x.float()
        ref = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()
        err = float((out.float() - ref).abs().max())
    except Exception as exc:
        emit("FAIL", _tail(exc), seconds=round(time.perf_counter() - t, 2), **ev)
        return
    ev["seconds"] = round(time.perf_counter() - t, 2)
    emit(
        "PASS" if err < 5e-2 else "FAIL",
        f"FlashInfer JIT rmsnorm vs torch: max abs err {err:.3g}",
        max_abs_err=err,
        **ev,
    )


def probe_flashinfer_comm_arch() -> None:
    """Build (flags only, no compile) FlashInfer's trtllm all-reduce fusion module for the archs
    FLASHINFER_CUDA_ARCH_LIST names (or the device's): its arch gate raises "No supported CUDA
    architectures found for major versions [...]" when none is allowed. Needs no GPU when the
    list is set."""
    comm = _import_or_emit("flashinfer.jit.comm", "flashinfer")
    if comm is None:
        return
    arch_list = os.environ.get("FLASHINFER_CUDA_ARCH_LIST")
    ev = {"FLASHINFER_CUDA_ARCH_LIST": arch_list}
    if not arch_list:
        try:
            import torch

            if not torch.cuda.is_available():
                emit(
                    "SKIP",
                    "FLASHINFER_CUDA_ARCH_LIST is unset and there is no GPU to take the arch from",
                )
                return
            ev["cc"] = list(torch.cuda.get_device_capability())
        except Exception as exc:
            emit("ERROR", f"cannot read the device arch: {_tail(exc)}")
            return
    try:
        spec = comm.gen_trtllm_comm_module()
    except Exception as exc:
        emit("FAIL", _tail(exc), **ev)
        return
    emit(
        "PASS",
        f"FlashInfer's trtllm_comm module accepts the target archs ({getattr(spec, 'name', '?')})",
        **ev,
    )


def probe_sglang() -> None:
    sglang = _import_or_emit("sglang")
    if sglang is None:
        return
    info: dict[str, Any] = {"sglang": getattr(sglang, "__version__", "?")}
    try:
        from sglang.srt.distributed.device_communicators import all_reduce_utils as aru

        info["symm_mem_max_sizes_keys"] = sorted(aru.TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES)
    except Exception as exc:
        info["symm_mem_table"] = f"unreadable: {_tail(exc)}"
    emit("PASS", f"sglang {info['sglang']} imports", **info)


PROBES = {
    "torch": probe_torch,
    "sgl_kernel": probe_sgl_kernel,
    "flashinfer": probe_flashinfer,
    "flashinfer_jit": probe_flashinfer_jit,
    "flashinfer_comm_arch": probe_flashinfer_comm_arch,
    "sglang": probe_sglang,
}

if __name__ == "__main__":
    name = sys.argv[1] if len(sys.argv) > 1 else ""
    probe = PROBES.get(name)
    if probe is None:
        emit("ERROR", f"unknown probe {name!r}; known: {', '.join(PROBES)}")
        sys.exit(2)
    try:
        probe()
    except Exception as exc:
        emit("ERROR", f"probe {name} crashed: {_tail(exc)}")
