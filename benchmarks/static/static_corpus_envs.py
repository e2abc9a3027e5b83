"""The corpus of real PyPI environments the static-ABI precision/recall benchmark runs on.

Each entry is one `uv pip install` into a fresh Python 3.12 venv under $STACKGATE_CORPUS
(default /work/corpus, outside the repo). Pairs that pip would refuse (a torchvision built for
another torch) are installed with a second `--no-deps` step, as a user forcing them would.

    python benchmarks/static/static_corpus_envs.py build NAME...   # one env at a time
    python benchmarks/static/static_corpus_envs.py lock NAME...    # a uv.lock of the same env
    python benchmarks/static/static_corpus_envs.py list

`lock` writes $STACKGATE_CORPUS/locks/NAME/{pyproject.toml,uv.lock} for the pre-install
verdict (`python -m validators static --lock .../uv.lock`): the same requirements, Linux
x86_64 and CPython 3.12 only; a forced pair is expressed as uv's `override-dependencies`
(what a user forcing it in a project would write), so the lock holds the broken pair.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

CORPUS = Path(os.environ.get("STACKGATE_CORPUS", "/work/corpus"))


# the CUDA 12 libraries torch 2.9.1 installs: an env of other CUDA users pinned to them shares
# their files with the torch envs (uv hard-links them from its cache)
CU12_AS_TORCH_291 = (
    "nvidia-cublas-cu12==12.8.4.1",
    "nvidia-cuda-nvrtc-cu12==12.8.93",
    "nvidia-cuda-runtime-cu12==12.8.90",
    "nvidia-cudnn-cu12==9.10.2.21",
    "nvidia-cufft-cu12==11.3.3.83",
    "nvidia-curand-cu12==10.3.9.90",
    "nvidia-cusolver-cu12==11.7.3.90",
    "nvidia-cusparse-cu12==12.5.8.93",
    "nvidia-nvjitlink-cu12==12.8.93",
)


@dataclass(frozen=True)
class CorpusEnv:
    name: str
    install: tuple[str, ...]  # resolved together
    forced: tuple[str, ...] = ()  # installed afterwards with --no-deps
    expect: str = "healthy"  # what the issue says; the ground truth comes from real loads
    note: str = ""
    uninstall: tuple[str, ...] = ()  # removed afterwards (a user's `pip uninstall`)


ENVS: tuple[CorpusEnv, ...] = (
    CorpusEnv(
        "tv021-t291",
        ("torch==2.9.1",),
        ("torchvision==0.21.0",),
        "broken",
        "torchvision built for torch 2.6: plugin _C.so misses torch symbols",
    ),
    CorpusEnv(
        "tv023-t291",
        ("torch==2.9.1",),
        ("torchvision==0.23.0",),
        "broken",
        "torchvision built for torch 2.8: crashes at load",
    ),
    CorpusEnv(
        "ta28-t291",
        ("torch==2.9.1",),
        ("torchaudio==2.8.0",),
        "broken",
        "torchaudio built for torch 2.8: c10::SymInt::sym_ne missing",
    ),
    CorpusEnv(
        "sgk0321-t210",
        ("torch==2.10.0", "sgl-kernel==0.3.21"),
        (),
        "broken",
        "sgl-kernel built for torch 2.9.1: two c10 symbols changed signature",
    ),
    CorpusEnv("t28-ta28-tv023", ("torch==2.8.0", "torchaudio==2.8.0", "torchvision==0.23.0")),
    CorpusEnv(
        "t291-tv0241-ta291-sgk",
        ("torch==2.9.1", "torchvision==0.24.1", "torchaudio==2.9.1", "sgl-kernel==0.3.21"),
    ),
    CorpusEnv(
        "nvjitlink-old-t291",
        ("torch==2.9.1",),
        ("nvidia-nvjitlink-cu12==12.4.127",),
        "broken",
        "libcusparse.so.12 needs a newer libnvJitLink.so.12: import torch fails",
    ),
    CorpusEnv("numba-cudacore-t291", ("torch==2.9.1", "numba", "cuda-core[cu12]")),
    CorpusEnv("vllm0330", ("vllm==0.33.0",)),
    CorpusEnv(
        "vllm0330-t213",
        ("vllm==0.33.0",),
        ("torch==2.13.0",),
        "healthy",
        "vLLM 0.33 uses torch's stable ABI",
    ),
    CorpusEnv("sglang0523", ("sglang==0.5.23",)),
    # wave 2 (rt-static, 2026-12-01): real envs the static group had never seen
    CorpusEnv("bnb-t291", ("torch==2.9.1", "bitsandbytes==0.50.2")),
    CorpusEnv("xformers-t291", ("xformers==0.0.33.post2",), note="pins torch 2.9.1"),
    CorpusEnv("t210-tv025-ta210", ("torch==2.10.0", "torchvision==0.25.0", "torchaudio==2.10.0")),
    CorpusEnv("triton-only", ("triton==3.6.0",), note="no torch"),
    CorpusEnv("ort-gpu", ("onnxruntime-gpu==1.31.1",), note="no CUDA libraries installed"),
    CorpusEnv("ort-gpu-cuda", ("onnxruntime-gpu[cuda,cudnn]==1.31.1",)),
    CorpusEnv("jax-cuda12", ("jax[cuda12]==0.12.0.1",), note="nvidia-*-cu12 wheels, no torch"),
    CorpusEnv(
        "nvidia-cu13-only",
        (
            "nvidia-cudnn-cu13",
            "nvidia-cusolver",
            "nvidia-cusparse",
            "nvidia-cufft",
            "nvidia-curand",
            "nvidia-nccl-cu13",
            "nvidia-nvshmem-cu13",
            "nvidia-cusparselt-cu13",
            "nvidia-cuda-nvrtc",
            "nvidia-cuda-cupti",
        ),
        note="CUDA 13 library wheels alone, no torch",
    ),
    CorpusEnv(
        "cupy-ct2-faiss",
        ("cupy-cuda12x==14.2.0", "ctranslate2==4.8.5", "faiss-gpu-cu12==1.14.1.post1"),
        note="CUDA users without torch: libraries found through cuda-pathfinder / nvidia wheels",
    ),
    CorpusEnv("vllm0300", ("vllm==0.30.0",), note="torch 2.13.0"),
    CorpusEnv("sglang0515", ("sglang==0.5.15",), note="torch 2.11.0, cu13 wheels"),
    CorpusEnv(
        "xformers0332-t210",
        ("torch==2.10.0",),
        ("xformers==0.0.33.post2",),
        "broken?",
        "xformers built for torch 2.9.1 beside torch 2.10.0",
    ),
    CorpusEnv(
        "tv025-t291",
        ("torch==2.9.1",),
        ("torchvision==0.25.0",),
        "broken?",
        "torchvision built for torch 2.10 beside torch 2.9.1 (a downgrade under it)",
    ),
    CorpusEnv(
        "ta211-t210",
        ("torch==2.10.0",),
        ("torchaudio==2.11.0",),
        "broken?",
        "torchaudio built for torch 2.11 beside torch 2.10.0",
    ),
    CorpusEnv(
        "ta211-t213",
        ("torch==2.13.0",),
        ("torchaudio==2.11.0",),
        "healthy?",
        "torchaudio 2.11 (abi3, torch's stable C ABI) beside a newer torch 2.13.0",
    ),
    CorpusEnv(
        "vllm0300-t214",
        ("vllm==0.30.0",),
        ("torch==2.14.0",),
        "broken?",
        "vLLM 0.30.0 (built for torch 2.13.0) with torch 2.14.0 forced under it",
    ),
    CorpusEnv(
        "sglang0515-t213",
        ("sglang==0.5.15",),
        ("torch==2.13.0",),
        "broken?",
        "SGLang 0.5.15 (sglang-kernel 0.4.4 for torch 2.11.0) with torch 2.13.0 forced under it",
    ),
    CorpusEnv(
        "t291-tv0241-no-cusparselt",
        ("torch==2.9.1", "torchvision==0.24.1"),
        uninstall=("nvidia-cusparselt-cu12",),
        expect="broken",
        note="a DT_NEEDED library uninstalled: libtorch_cuda.so needs libcusparseLt.so.0",
    ),
    # issue 25 wave 2: one env per class the first wave fixed, plus variants of each
    CorpusEnv(
        "cufft11213-only",
        ("nvidia-cufft-cu12==11.2.1.3",),
        note="kernels outside .nv_fatbin: 17,607 fatbins in .data (408-byte .nv_fatbin stub); "
        "GPU truth: FFTs run on SM90 (benchmarks/h200_sglang/results/cufft)",
    ),
    CorpusEnv(
        "cufft11304-only",
        ("nvidia-cufft-cu12==11.3.0.4",),
        note="kernels outside .nv_fatbin, another layout (22,705 fatbins in .data)",
    ),
    CorpusEnv(
        "cufft11213-t291",
        ("torch==2.9.1",),
        ("nvidia-cufft-cu12==11.2.1.3",),
        "healthy?",
        "torch 2.9.1 with the cuFFT of torch 2.6 forced under it (the 11.2 fatbin layout)",
    ),
    CorpusEnv(
        "ort122-cuda12",
        ("onnxruntime-gpu[cuda,cudnn]==1.22.0", *CU12_AS_TORCH_291),
        note="libonnxruntime_providers_cuda.so segfaults at load under a stub libcuda, loads "
        "with Debian's libcuda1 userland (truth: static_truth.py --userland)",
    ),
    CorpusEnv(
        "bnb047-t291",
        ("torch==2.9.1", "bitsandbytes==0.47.0"),
        expect="broken",
        note="bitsandbytes 0.47.0 imports packaging without declaring it; nothing installs it",
    ),
    CorpusEnv(
        "cupy1341-cuda12",
        ("cupy-cuda12x==13.4.1", *CU12_AS_TORCH_291),
        note="cupy 13.4.1 does not search nvidia/*/lib; libcudnn.so.8 is optional (cuDNN 8)",
    ),
    # "loaded first" read from each package's own code (package_loads.py, preloaders.py)
    CorpusEnv(
        "t260-ort122-cupy1341",
        ("torch==2.6.0", "onnxruntime-gpu==1.22.0", "cupy-cuda12x==13.4.1"),
        expect="broken",
        note="torch 2.6.0's import does not load cuSOLVER: cupy's cusolver modules cannot load",
    ),
    CorpusEnv(
        "cupy-ort-cu124",
        (
            "onnxruntime-gpu==1.22.0",
            "cupy-cuda12x==13.4.1",
            "nvidia-cublas-cu12==12.4.5.8",
            "nvidia-cuda-runtime-cu12==12.4.127",
            "nvidia-cusolver-cu12==11.6.1.9",
            "nvidia-cusparse-cu12==12.3.1.170",
            "nvidia-cufft-cu12==11.2.1.3",
            "nvidia-curand-cu12==10.3.5.147",
            "nvidia-cudnn-cu12==9.1.0.70",
            "nvidia-nvjitlink-cu12==12.4.127",
            "nvidia-cuda-nvrtc-cu12==12.4.127",
        ),
        expect="broken",
        note="no torch: nothing loads nvidia/*/lib first; onnxruntime loads them only in "
        "preload_dlls()",
    ),
    CorpusEnv("t291-sgk0321", ("torch==2.9.1", "sgl-kernel==0.3.21")),
    CorpusEnv(
        "jax081-cuda12",
        (
            "jax[cuda12]==0.8.1",
            *CU12_AS_TORCH_291,
            "nvidia-nccl-cu12==2.27.5",
            "nvidia-cuda-cupti-cu12==12.8.90",
            "nvidia-nvshmem-cu12==3.3.20",
        ),
        note="the plugin loads nvidia/*/lib in initialize() (at backend start), not at import",
    ),
    CorpusEnv(
        "ta291-t291",
        ("torch==2.9.1", "torchaudio==2.9.1"),
        note="_torchaudio.so needs lib/libtorchaudio.so with no RPATH; torchaudio loads it first",
    ),
    CorpusEnv("numba-t291", ("torch==2.9.1", "numba")),
    CorpusEnv(
        "vllm0110",
        ("vllm==0.11.0",),
        note="requirement lines under markers: numba==0.60.0 only for python_version == '3.9'",
    ),
)


def by_name(name: str) -> CorpusEnv:
    for env in ENVS:
        if env.name == name:
            return env
    raise SystemExit(f"unknown corpus env {name!r}; known: {', '.join(e.name for e in ENVS)}")


def python312() -> str:
    prefix = subprocess.run(
        ["pyenv", "prefix", "3.12.1"], capture_output=True, text=True, check=True
    ).stdout.strip()
    return f"{prefix}/bin/python"


def build(env: CorpusEnv) -> int:
    target = CORPUS / env.name
    done = target / ".corpus-ok"
    if done.exists():
        print(f"{env.name}: already built")
        return 0
    if target.exists():
        shutil.rmtree(target)
    started = time.time()
    base = {**os.environ, "UV_PYTHON_DOWNLOADS": "never", "VIRTUAL_ENV": str(target)}
    steps = [
        ["uv", "venv", "--python", python312(), str(target)],
        ["uv", "pip", "install", "--python", str(target / "bin" / "python"), *env.install],
    ]
    if env.forced:
        steps.append(
            [
                "uv",
                "pip",
                "install",
                "--python",
                str(target / "bin" / "python"),
                "--no-deps",
                *env.forced,
            ]
        )
    if env.uninstall:
        python = str(target / "bin" / "python")
        steps.append(["uv", "pip", "uninstall", "--python", python, *env.uninstall])
    for argv in steps:
        print("+", " ".join(argv), flush=True)
        rc = subprocess.run(argv, env=base, check=False).returncode
        if rc:
            print(f"{env.name}: step failed rc={rc}", file=sys.stderr)
            return rc
    done.write_text(f"{time.time() - started:.0f}s\n", encoding="utf-8")
    print(f"{env.name}: built in {time.time() - started:.0f} s")
    return 0


def write_lock(env: CorpusEnv) -> int:
    if env.uninstall:
        print(f"{env.name}: a lock cannot express an uninstall; no lock written")
        return 0
    folder = CORPUS / "locks" / env.name
    folder.mkdir(parents=True, exist_ok=True)
    deps = ", ".join(f'"{r}"' for r in (*env.install, *env.forced))
    overrides = ", ".join(f'"{r}"' for r in (*env.install, *env.forced)) if env.forced else ""
    text = (
        "[project]\n"
        f'name = "corpus-{env.name}"\n'
        'version = "0"\n'
        'requires-python = ">=3.12,<3.13"\n'
        f"dependencies = [{deps}]\n\n"
        "[tool.uv]\n"
        "environments = [\"sys_platform == 'linux' and platform_machine == 'x86_64'\"]\n"
        + (f"override-dependencies = [{overrides}]\n" if overrides else "")
    )
    (folder / "pyproject.toml").write_text(text, encoding="utf-8")
    base = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}
    argv = ["uv", "lock", "--python", python312(), "--directory", str(folder)]
    print("+", " ".join(argv), flush=True)
    return subprocess.run(argv, env=base, check=False).returncode


def main() -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build")
    b.add_argument("names", nargs="*")
    lk = sub.add_parser("lock")
    lk.add_argument("names", nargs="*")
    sub.add_parser("list")
    args = parser.parse_args()
    if args.cmd == "list":
        for e in ENVS:
            print(e.name, e.expect, " ".join(e.install), "| --no-deps", " ".join(e.forced))
        return 0
    rc = 0
    action = build if args.cmd == "build" else write_lock
    for name in args.names or [e.name for e in ENVS]:
        rc = action(by_name(name)) or rc
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
