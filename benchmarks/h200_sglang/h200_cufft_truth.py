"""GPU ground truth for the static group's cuFFT false-alarm class (issue 22 item 5, issue 25):
`nvidia-cufft-cu12` 11.3.0.4's libcufft.so.11 holds only sm_52 SASS by cuobjdump --list-elf,
its kernels live outside the ELF fatbins; does it run FFTs on SM90?

    python h200_cufft_truth.py /path/to/libcufft.so.11 [--sha256 HEX]

Loads that library file with ctypes (RTLD_LOCAL, beside torch's own cuFFT), checks its sha256
against the wheel's RECORD entry when given, and runs a batched complex-to-complex forward FFT
on GPU memory that torch allocated (cufftPlan1d + cufftExecC2C), compared with numpy. JSON on
stdout; exit 0 only when the FFT ran and matched.
"""

from __future__ import annotations

import argparse
import base64
import ctypes
import hashlib
import json
import sys
from pathlib import Path

CUFFT_C2C = 0x29
CUFFT_FORWARD = -1


def record_hash(path: Path) -> str:
    """sha256 in a wheel RECORD's form (urlsafe base64, no padding)."""
    digest = hashlib.sha256(path.read_bytes()).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).decode().rstrip("=")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("library", type=Path)
    parser.add_argument("--sha256", help="the wheel RECORD's hash of the file (sha256=...)")
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()

    import numpy as np
    import torch

    out: dict[str, object] = {"library": str(args.library), "file_hash": record_hash(args.library)}
    if args.sha256:
        out["hash_matches_record"] = out["file_hash"] == args.sha256
    dev = torch.device("cuda")
    out["gpu"] = torch.cuda.get_device_name(0)
    out["capability"] = list(torch.cuda.get_device_capability(0))
    lib = ctypes.CDLL(str(args.library), mode=ctypes.RTLD_LOCAL)
    version = ctypes.c_int()
    out["cufftGetVersion_rc"] = lib.cufftGetVersion(ctypes.byref(version))
    out["cufft_version"] = version.value
    gen = torch.Generator(device=dev).manual_seed(0)
    x = torch.randn(args.batch, args.n, dtype=torch.complex64, device=dev, generator=gen)
    y = torch.empty_like(x)
    plan = ctypes.c_int()
    out["plan_rc"] = lib.cufftPlan1d(ctypes.byref(plan), args.n, CUFFT_C2C, args.batch)
    ptr = ctypes.c_void_p
    out["exec_rc"] = lib.cufftExecC2C(
        plan, ptr(x.data_ptr()), ptr(y.data_ptr()), ctypes.c_int(CUFFT_FORWARD)
    )
    torch.cuda.synchronize()
    ref = np.fft.fft(x.cpu().numpy(), axis=-1)
    got = y.cpu().numpy()
    rel = float(np.abs(got - ref).max() / np.abs(ref).max())
    out["rel_err"] = rel
    out["destroy_rc"] = lib.cufftDestroy(plan)
    ok = out["plan_rc"] == 0 and out["exec_rc"] == 0 and rel < 1e-4
    out["fft_ran_and_matched"] = ok
    print(json.dumps(out, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
