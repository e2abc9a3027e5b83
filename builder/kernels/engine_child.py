"""Compile an engine's just-in-time kernels ahead of time, inside the env's own interpreter.

Run as `<env>/bin/python engine_child.py REQUEST.json` (standalone: the env has no stackgate).
The request names each kernel by the engine function that makes it, with its arguments
(`torch.bfloat16` and friends are written as strings and resolved here), the target archs and
where the built modules go. One JSON line per kernel goes to stdout (name, seconds, files), so
the builder can show progress while nvcc runs for minutes.

- FlashInfer: the function returns a JitSpec; it is built with FlashInfer's own ninja build
  for FLASHINFER_CUDA_ARCH_LIST (set by the caller, read by FlashInfer at import), and its .so
  is copied to `<flashinfer>/data/aot/<name>/<name>.so`: the AOT folder FlashInfer loads before
  any JIT (JitSpec.is_aot), so a server never runs ninja or nvcc for it.
- SGLang's TVM-FFI kernels: the function is SGLang's own `_jit_*_module` builder; it runs under
  `override_jit_cuda_arch` with TVM_FFI_CACHE_DIR set by the caller, and load_jit writes
  `<dir>/<module>__arch_<arch>__tvmffi_<ver>/<module>.so`, the path it loads first on a server.
  Loading the fresh module needs a GPU driver; that failure is expected here and reported.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any


def _resolve(value: Any) -> Any:
    if isinstance(value, str) and value.startswith("torch."):
        import torch  # type: ignore[import-not-found]

        return getattr(torch, value.removeprefix("torch."))
    if isinstance(value, list):
        return [_resolve(v) for v in value]
    if isinstance(value, dict):
        return {k: _resolve(v) for k, v in value.items()}
    return value


def _function(call: str) -> Any:
    module_name, _, attr = call.partition(":")
    target: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        target = getattr(target, part)
    # SGLang's builders are wrapped in its cache_once; the undecorated function is __wrapped__
    return target


def _emit(payload: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(payload, sort_keys=True) + "\n")
    sys.stdout.flush()


def _build_flashinfer(kernel: dict[str, Any], aot_root: Path) -> dict[str, Any]:
    from flashinfer.jit.core import build_jit_specs  # type: ignore[import-not-found]

    spec = _function(kernel["call"])(
        *_resolve(kernel.get("args", [])), **_resolve(kernel.get("kwargs", {}))
    )
    target = aot_root / spec.name / f"{spec.name}.so"
    if target.is_file():
        return {"name": spec.name, "files": [str(target)], "built": False}
    build_jit_specs([spec], verbose=False, skip_prebuilt=False)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(spec.jit_library_path, target)
    return {"name": spec.name, "files": [str(target)], "built": True}


def _build_sglang(kernel: dict[str, Any], arch: str, cache_dir: Path) -> dict[str, Any]:
    from sglang.kernels.jit.utils.arch import override_jit_cuda_arch  # type: ignore[import-not-found]

    major, minor = arch.rstrip("af").split(".")
    before = set(cache_dir.rglob("*.so")) if cache_dir.is_dir() else set()
    load_error = None
    with override_jit_cuda_arch(int(major), int(minor)):
        try:
            _function(kernel["call"])(
                *_resolve(kernel.get("args", [])), **_resolve(kernel.get("kwargs", {}))
            )
        except Exception as exc:  # loading needs libcuda; the .so is written before the load
            load_error = f"{type(exc).__name__}: {exc}"
    after = set(cache_dir.rglob("*.so")) if cache_dir.is_dir() else set()
    new = sorted(str(p) for p in after - before)
    if not new:
        raise RuntimeError(f"{kernel['call']}: no module written under {cache_dir}: {load_error}")
    return {"name": Path(new[0]).stem, "files": new, "built": True, "load_error": load_error}


def main(argv: list[str]) -> int:
    request = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    arch = request["arch"]
    failed = 0
    for kernel in request["kernels"]:
        start = time.monotonic()
        try:
            if kernel["engine"] == "flashinfer":
                import flashinfer.jit.env as fi_env  # type: ignore[import-not-found]

                result = _build_flashinfer(kernel, Path(fi_env._package_root) / "data" / "aot")
            elif kernel["engine"] == "sglang":
                result = _build_sglang(kernel, arch, Path(os.environ["TVM_FFI_CACHE_DIR"]))
            else:
                raise ValueError(f"unknown engine {kernel['engine']!r}")
            result.update(ok=True)
        except Exception as exc:
            failed += 1
            result = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[-4000:]}
        result.update(
            call=kernel["call"], engine=kernel["engine"], seconds=round(time.monotonic() - start, 1)
        )
        _emit(result)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
