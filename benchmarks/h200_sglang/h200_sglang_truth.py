"""Ground truth on the lent H200 for the h200-sglang env (issue 22), run by the env's Python.

    python h200_sglang_truth.py parse --repo REPO
        Every serving profile of stacks/h200-sglang.toml turned into its argv by stackgate's own
        SGLang adapter, then parsed by SGLang 0.5.17's parser (`prepare_server_args`, which also
        runs ServerArgs.__post_init__'s checks): the flags exist and their values are accepted.
    python h200_sglang_truth.py ops [--report RUN.json]
        Real operations on the GPU: sgl_kernel (rmsnorm, silu_and_mul), flashinfer (rmsnorm,
        JIT-compiled here), a cuFFT through torch, each compared with a torch reference; with
        --report, every static.arch* result of that run listed beside what loading and running
        the distribution's code on this GPU gave (a library with no op here is dlopen'ed).
JSON on stdout.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any


def parse(repo: Path) -> dict[str, Any]:
    sys.path.insert(0, str(repo))
    from sglang.srt.server_args import prepare_server_args

    from stackgate.engines import ENGINES
    from stackgate.manifest.loading import load_stack

    out: dict[str, Any] = {}
    manifest = load_stack("h200-sglang").manifest
    for name, profile in manifest.serving.items():
        argv, _ = ENGINES[profile.engine].argv(profile, sys.executable, "127.0.0.1", 30000)
        args = argv[3:]  # after: python -m sglang.launch_server
        try:
            sa = prepare_server_args(args)
            out[name] = {
                "argv": args, "ok": True,
                "parsed": {k: getattr(sa, k, None) for k in (
                    "model_path", "tp_size", "attention_backend", "cuda_graph_max_bs",
                    "trust_remote_code", "tool_call_parser", "reasoning_parser", "random_seed",
                    "served_model_name", "max_running_requests", "mem_fraction_static")},
            }  # fmt: skip
        except BaseException as exc:  # SystemExit from argparse too
            out[name] = {"argv": args, "ok": False, "error": repr(exc)}
    return out


def _timed(name: str, fn: Any, results: list[dict[str, Any]]) -> None:
    start = time.monotonic()
    try:
        detail = fn()
        results.append({"op": name, "ok": True, "s": round(time.monotonic() - start, 2), **detail})
    except BaseException as exc:
        results.append({
            "op": name, "ok": False, "s": round(time.monotonic() - start, 2),
            "error": repr(exc)[:500], "trace": traceback.format_exc()[-1500:],
        })  # fmt: skip


def ops(report: Path | None) -> dict[str, Any]:
    import torch

    results: list[dict[str, Any]] = []
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(0)

    def ref_rmsnorm(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * w.float()).to(x.dtype)

    def sgl_rmsnorm() -> dict[str, Any]:
        import sgl_kernel

        x = torch.randn(64, 7168, device=dev, dtype=torch.bfloat16, generator=gen)
        w = torch.randn(7168, device=dev, dtype=torch.bfloat16, generator=gen)
        y = sgl_kernel.rmsnorm(x, w, 1e-6)
        torch.cuda.synchronize()
        err = (y.float() - ref_rmsnorm(x, w).float()).abs().max().item()
        return {"max_abs_err": err, "pass": err < 0.1, "module": sgl_kernel.__file__}

    def sgl_silu_and_mul() -> dict[str, Any]:
        import sgl_kernel

        x = torch.randn(64, 2 * 2048, device=dev, dtype=torch.bfloat16, generator=gen)
        y = sgl_kernel.silu_and_mul(x)
        torch.cuda.synchronize()
        a, b = x.float().chunk(2, dim=-1)
        err = (y.float() - torch.nn.functional.silu(a) * b).abs().max().item()
        return {"max_abs_err": err, "pass": err < 0.1}

    def flashinfer_rmsnorm() -> dict[str, Any]:
        import flashinfer

        x = torch.randn(64, 7168, device=dev, dtype=torch.bfloat16, generator=gen)
        w = torch.randn(7168, device=dev, dtype=torch.bfloat16, generator=gen)
        y = flashinfer.norm.rmsnorm(x, w, 1e-6)
        torch.cuda.synchronize()
        err = (y.float() - ref_rmsnorm(x, w).float()).abs().max().item()
        return {"max_abs_err": err, "pass": err < 0.1, "version": flashinfer.__version__}

    def cufft() -> dict[str, Any]:
        import numpy as np

        x = torch.randn(8, 4096, device=dev, dtype=torch.complex64, generator=gen)
        y = torch.fft.fft(x)
        torch.cuda.synchronize()
        ref = np.fft.fft(x.cpu().numpy())
        err = float(np.abs(y.cpu().numpy() - ref).max() / np.abs(ref).max())
        libs = sorted({p for p in Path("/proc/self/maps").read_text().split() if "libcufft" in p})
        return {"rel_err": err, "pass": err < 1e-4, "libcufft": libs}

    _timed("sgl_kernel.rmsnorm", sgl_rmsnorm, results)
    _timed("sgl_kernel.silu_and_mul", sgl_silu_and_mul, results)
    _timed("flashinfer.norm.rmsnorm (JIT)", flashinfer_rmsnorm, results)
    _timed("torch.fft.fft (cuFFT)", cufft, results)
    out: dict[str, Any] = {
        "gpu": torch.cuda.get_device_name(0),
        "capability": list(torch.cuda.get_device_capability(0)),
        "torch": torch.__version__,
        "ops": results,
    }
    if report is not None:
        out["static_arch"] = arch_truth(report, {r["op"]: r for r in results})
    return out


def arch_truth(report: Path, done: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Each static.arch* result of the run beside a load (and op, where one ran) here."""
    data = json.loads(report.read_text())
    env = Path(data["env_path"])
    site = next(env.glob("lib/python3.*/site-packages"))
    rows: list[dict[str, Any]] = []
    for check in data["results"]:
        cid = check.get("check", "")
        if not cid.startswith("static.arch"):
            continue
        row: dict[str, Any] = {
            "check": cid,
            "status": check.get("status"),
            "reason": check.get("reason"),
        }
        dist = cid.removeprefix("static.arch").lstrip(".")
        ops_for = {"sglang_kernel": "sgl_kernel", "flashinfer_python": "flashinfer"}
        module = ops_for.get(dist.replace("-", "_"))
        if module:
            row["ops"] = {k: v.get("pass") for k, v in done.items() if k.startswith(module)}
        loads: dict[str, str] = {}
        for info in site.glob(f"{dist.replace('-', '_')}-*.dist-info"):
            record = (info / "RECORD").read_text(encoding="utf-8").splitlines()
            objects = [line.split(",", 1)[0] for line in record if ".so" in line.split(",", 1)[0]]
            for rel in objects[:20]:
                try:
                    ctypes.CDLL(str(site / rel))
                    loads[rel] = "loaded"
                except OSError as exc:
                    loads[rel] = f"dlopen failed: {exc}"[:200]
        row["dlopen"] = loads
        rows.append(row)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("parse")
    p.add_argument("--repo", type=Path, required=True)
    o = sub.add_parser("ops")
    o.add_argument("--report", type=Path)
    args = parser.parse_args()
    result = parse(args.repo) if args.cmd == "parse" else ops(args.report)
    print(json.dumps(result, indent=2, default=str))
    if args.cmd == "parse":
        return 0 if all(v["ok"] for v in result.values()) else 1
    return 0 if all(r["ok"] and r.get("pass", True) for r in result["ops"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
