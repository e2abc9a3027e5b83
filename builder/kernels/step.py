"""The build's `kernels` step: compile the requested just-in-time kernels into the env, where
the engines load them before any JIT, and say what they cost when they cannot be built.

The compile runs in the env's own interpreter (builder/kernels/engine_child.py, which says
where each engine's modules go), with the engine code the env will serve with, for the
request's arch: no GPU is needed. Both folders are inside the env, so the tree hash, the
listing and `verify` cover them and the static group reads their SASS/PTX like any other GPU
code. SGLang's is `<site>/_stackgate_kernels/tvm-ffi/`: `_stackgate_kernels.pth` sets
TVM_FFI_CACHE_DIR to it at start-up (setdefault: a user's own setting wins); a module compiled
at run time lands there too, and `verify` then names it: the env was not complete. A kernel
that fails is recorded as missing with its error; the build goes on (the first server compiles
it), unless `required`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from builder.kernels import toolchain
from builder.kernels.request import KernelRequest, KernelSpec, request_digest
from stackgate import proc
from stackgate.build_record import (
    BuiltKernel,
    KernelFile,
    KernelsRecord,
    read_build_record,
)
from stackgate.errors import BadInput, CheckFailed, EnvironmentProblem
from stackgate.files import sha256_file

CHILD = Path(__file__).with_name("engine_child.py")
# what a kernel's code comes from, per engine (torch is no input: the modules are TVM-FFI
# extensions, their compile commands name no torch header)
ENGINE_DISTS = {
    "flashinfer": ("flashinfer-python", "apache-tvm-ffi"),
    "sglang": ("sglang", "apache-tvm-ffi"),
}
ALL_ENGINE_DISTS = ("flashinfer-python", "sglang", "apache-tvm-ffi")
EXPORT = Path("stackgate") / "kernels.json"
SGLANG_DIR = Path("_stackgate_kernels") / "tvm-ffi"
PTH_MODULE = "_stackgate_kernels"
COST = (
    "not in the env: the first server on the GPU host compiles it with whatever nvcc it has "
    "(an h200-sglang server's first start: ~513 s to ready, against ~45 s once compiled)"
)


@dataclass(frozen=True)
class KernelsJob:
    requests: list[tuple[Path, KernelRequest]]
    required: bool = False
    source: Path | None = None  # --kernels-from: an env (or its export) holding them


def _spec_key(spec: KernelSpec, arch: str) -> str:
    return json.dumps([spec.engine, spec.call, spec.args, spec.kwargs, arch], sort_keys=True)


def _files(env: Path, paths: list[Path]) -> list[KernelFile]:
    root = env.resolve()
    return [
        KernelFile(
            path=str(p.resolve().relative_to(root)), sha256=sha256_file(p), bytes=p.stat().st_size
        )
        for p in sorted(paths)
    ]


def _write_pth(site: Path) -> None:
    (site / f"{PTH_MODULE}.py").write_text(
        '"""Build-time SGLang kernels of this env (written by the builder\'s kernels step)."""\n'
        "import os\n\n"
        "os.environ.setdefault(\n"
        f'    "TVM_FFI_CACHE_DIR", os.path.join(os.path.dirname(__file__), {str(SGLANG_DIR)!r})\n'
        ")\n",
        encoding="utf-8",
    )
    (site / f"{PTH_MODULE}.pth").write_text(f"import {PTH_MODULE}\n", encoding="utf-8")


def _child_env(
    chain: toolchain.Toolchain, arch: str, env_root: Path, scratch_root: Path, work: Path, jobs: int
) -> dict[str, str]:
    env = proc.child_env()
    env.update(chain.env({env_root: "/env", scratch_root: "/kernels-build"}))
    env.update(
        {
            "FLASHINFER_CUDA_ARCH_LIST": arch,
            "FLASHINFER_WORKSPACE_BASE": str(work / "flashinfer"),
            "TVM_FFI_CACHE_DIR": str(work / "tvm-ffi"),
            "MAX_JOBS": str(max(jobs, 1)),
            "PYTHONDONTWRITEBYTECODE": "1",
        }
    )
    return env


def _run_child(
    python: Path,
    request: KernelRequest,
    env: dict[str, str],
    scratch: Path,
    on_line: Callable[[str], None],
) -> list[dict[str, Any]]:
    req_file = scratch / "request.json"
    req_file.write_text(request.model_dump_json(), encoding="utf-8")
    log = scratch / "child.log"
    results: list[dict[str, Any]] = []
    with log.open("ab") as err:
        child = subprocess.Popen(
            [str(python), str(CHILD), str(req_file)],
            stdout=subprocess.PIPE,
            stderr=err,
            env=env,
            text=True,
        )
        assert child.stdout is not None
        for line in child.stdout:
            try:
                item = json.loads(line)
            except json.JSONDecodeError:
                on_line(line.rstrip())
                continue
            results.append(item)
            what = item.get("name") or item.get("call")
            state = "built" if item.get("ok") else "FAILED"
            on_line(f"kernel {what}: {state} ({item.get('seconds')} s)")
        child.wait()
    if len(results) < len(request.kernels):
        tail = log.read_text(encoding="utf-8", errors="replace")[-2000:]
        raise EnvironmentProblem(
            f"the kernel build child stopped after {len(results)} of {len(request.kernels)} "
            f"kernels (exit {child.returncode})",
            details=tail.splitlines()[-12:],
        )
    return results


def _place_sglang(files: list[str], scratch_cache: Path, site: Path) -> list[Path]:
    """Copy only the modules' .so (the objects and ninja files stay in the scratch)."""
    placed: list[Path] = []
    for name in files:
        src = Path(name)
        rel = src.relative_to(scratch_cache)
        dst = site / SGLANG_DIR / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
        placed.append(dst)
    return placed


def _compile(
    env: Path,
    site: Path,
    request: KernelRequest,
    specs: list[KernelSpec],
    chain: toolchain.Toolchain,
    scratch: Path,
    jobs: int,
    on_line: Callable[[str], None],
) -> list[BuiltKernel]:
    sub = KernelRequest(arch=request.arch, kernels=specs)
    # the scratch root (its parent) holds the header overlay too
    child_env = _child_env(chain, request.arch, env, scratch.parent, scratch, jobs)
    results = _run_child(env / "bin" / "python", sub, child_env, scratch, on_line)
    out: list[BuiltKernel] = []
    for spec, item in zip(specs, results, strict=True):
        kernel = _failed(spec, request.arch, item.get("error"))
        kernel = kernel.model_copy(update={"seconds": float(item.get("seconds", 0.0))})
        if item.get("ok"):
            paths = [Path(p) for p in item["files"]]
            if spec.engine == "sglang":
                paths = _place_sglang(item["files"], scratch / "tvm-ffi", site)
            kernel = kernel.model_copy(
                update={
                    "ok": True,
                    # FlashInfer's module already in the AOT folder (`builder kernels` again)
                    "how": "compiled" if item.get("built", True) else "present",
                    "error": None,
                    "name": item.get("name"),
                    "files": _files(env, paths),
                }
            )
        out.append(kernel)
    return out


def _failed(spec: KernelSpec, arch: str, error: str | None) -> BuiltKernel:
    return BuiltKernel(
        engine=spec.engine,
        call=spec.call,
        args=spec.args,
        kwargs=spec.kwargs,
        arch=arch,
        ok=False,
        how="failed",
        error=error,
    )


def read_source(source: Path) -> KernelsRecord:
    """The kernels record of a --kernels-from folder: `stackgate/kernels.json` (written by
    `builder kernels`) or the build record's kernels."""
    export = source / EXPORT
    try:
        if export.is_file():
            return KernelsRecord.model_validate_json(export.read_bytes())
        record = read_build_record(source)
    except (BadInput, ValueError) as exc:
        raise BadInput(f"--kernels-from {source}: no readable kernels record: {exc}") from None
    if record.kernels is None:
        raise BadInput(f"--kernels-from {source}: its build record has no kernels")
    return record.kernels


def _copyable(source: Path, engines: dict[str, str]) -> dict[str, BuiltKernel]:
    """The kernels of `source` this env can take: built from the same engine versions."""
    record = read_source(source)
    out: dict[str, BuiltKernel] = {}
    for k in record.kernels:
        if k.ok and all(record.engines.get(d) == engines.get(d) for d in ENGINE_DISTS[k.engine]):
            spec = KernelSpec(engine=k.engine, call=k.call, args=k.args, kwargs=k.kwargs)
            out[_spec_key(spec, k.arch)] = k
    return out


def _copy(env: Path, source: Path, kernel: BuiltKernel) -> BuiltKernel:
    started = time.monotonic()
    paths: list[Path] = []
    for f in kernel.files:
        src = source / f.path
        if not src.is_file() or sha256_file(src) != f.sha256:
            raise BadInput(
                f"--kernels-from {source}: {f.path} is missing or differs from its record"
            )
        dst = env / f.path
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
        paths.append(dst)
    return kernel.model_copy(
        update={
            "how": "copied",
            "seconds": round(time.monotonic() - started, 1),
            "files": _files(env, paths),
        }
    )


def build_kernels(
    env: Path,
    site: Path,
    sites: list[Path],
    installed: dict[str, str],
    job: KernelsJob,
    scratch: Path,
    jobs: int,
    on_line: Callable[[str], None] = lambda _line: None,
) -> KernelsRecord:
    """Build (or copy) every requested kernel into `env`; the record says what is missing."""
    started = time.monotonic()
    engines = {d: installed[d] for d in ALL_ENGINE_DISTS if d in installed}
    available = _copyable(job.source, engines) if job.source is not None else {}
    built: list[BuiltKernel] = []
    chain_info: dict[str, str] = {}
    chain: toolchain.Toolchain | None = None
    for _path, request in job.requests:
        to_compile: list[KernelSpec] = []
        for spec in request.kernels:
            found = available.get(_spec_key(spec, request.arch))
            if found is not None:
                built.append(_copy(env, job.source or env, found))
            else:
                to_compile.append(spec)
        if not to_compile:
            continue
        try:
            if chain is None:
                chain = toolchain.prepare(sites, scratch / "toolchain")
                chain_info = {
                    "nvcc": chain.nvcc_version,
                    "cuda_home": str(chain.cuda_home),
                    "libcuda_link_stub": chain.link_stub,
                    "headers_from_wheels": " ".join(chain.overlaid),
                }
            work = scratch / f"work-{len(built)}"
            work.mkdir(parents=True, exist_ok=True)
            built += _compile(env, site, request, to_compile, chain, work, jobs, on_line)
        except EnvironmentProblem as exc:
            reason = " ".join([exc.message, *exc.details])[-2000:]
            built += [_failed(s, request.arch, reason) for s in to_compile]
    if any(k.ok and k.engine == "sglang" for k in built):
        _write_pth(site)
    record = KernelsRecord(
        request_sha256=request_digest([r for _p, r in job.requests]),
        requests=[str(p) for p, _r in job.requests],
        engines=engines,
        toolchain=chain_info,
        source=str(job.source) if job.source is not None else None,
        kernels=built,
        seconds=round(time.monotonic() - started, 1),
    )
    missing = record.missing()
    if missing and job.required:
        raise CheckFailed(
            f"{len(missing)} of {len(built)} requested kernels could not be built "
            "(--kernels-required)",
            details=[f"{k.call}: {(k.error or '')[-300:]}" for k in missing],
        )
    return record


def missing_lines(record: KernelsRecord) -> list[str]:
    """One line per kernel the env lacks, with what it costs."""
    return [f"kernel {k.name or k.call} ({k.engine}, {k.arch}): {COST}" for k in record.missing()]
