"""Ground truth for `validators compat`: install each (package version, torch version) pair into
a real venv on this CPU host and load the package the way it loads.

One venv per run (Python 3.12). For each torch version: `uv pip install torch==T` with its
dependencies (the nvidia-* CUDA wheels torch pins: torch cannot even import without them), then
for each package version `uv pip install --no-deps PKG==V` (forced beside this torch, whatever
its metadata pins), load, `uv pip uninstall PKG`. Nothing is cached (`--no-cache`): the disk
peak is one torch closure plus one package (~7 GB for the CUDA 12 torches).

"Load" is what benchmarks/static/static_truth.py does (and its retries): a child of the venv's
interpreter with the driver stubs of validators/static/driver_stub.py first on
LD_LIBRARY_PATH imports torch, then the package's top-level modules, then loads every ELF
object of the distribution (extension modules through Python's extension loader, which runs
PyInit_ and so registers the ops; other libraries with dlopen RTLD_NOW, as
torch.ops.load_library does). Per pair:

- loads:  every object loads (alone or with its package's own objects global, as the
          package's loader does; see static_truth.retry_artefacts), objects tagged for
          another torch (`_torch29`) or Python are not loaded, by design;
- breaks: an object fails with a missing library or an undefined symbol / version
          (the first one is recorded);
- crash:  an object kills the process.

    python benchmarks/compat/compat_truth.py --torch 2.8.0 2.9.1 --out benchmarks/compat/results/compat_truth.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from packaging.utils import canonicalize_name

from validators.elf.elf_symbols import ElfReadError, read_elf
from validators.elf.object_facts import is_python_extension, python_tag
from validators.static.confirm import Step, run_steps
from validators.static.driver_stub import build_stubs
from validators.static.environment import load_environment
from validators.static.verdict import torch_tag

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # benchmarks.static
from benchmarks.static.static_truth import classify, retry_artefacts, top_levels

PACKAGES = [
    "torchvision==0.23.0",
    "torchvision==0.24.1",
    "torchvision==0.25.0",
    "torchaudio==2.8.0",
    "torchaudio==2.9.1",
    "torchaudio==2.10.0",
    "xformers==0.0.32.post2",
    "xformers==0.0.33.post2",
    "xformers==0.0.34",
    "xformers==0.0.35",
    "torchao==0.13.0",
    "torchao==0.14.1",
    "torchao==0.15.0",
    "torch-memory-saver==0.0.8",
    "torch-memory-saver==0.0.9",
    "sgl-kernel==0.3.9.post2",
    "sgl-kernel==0.3.16.post5",
    "sgl-kernel==0.3.21",
]
OK = {"ok", "ok-isolated", "ok-package-global", "other-python", "other-torch"}


def uv(*args: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("uv")
    if exe is None:
        raise SystemExit("uv not found on PATH")
    return subprocess.run([exe, *args], capture_output=True, text=True, check=False)


def _record_objects(dist_info: Path, site: Path) -> list[Path]:
    out = []
    for line in (dist_info / "RECORD").read_text(errors="replace").splitlines():
        rel = line.split(",", 1)[0]
        name = rel.rsplit("/", 1)[-1]
        if name.endswith(".so") or ".so." in name:
            path = site / rel
            if path.is_file():
                out.append(path)
    return out


def _torch_names(site: Path) -> list[str]:
    """Driver names imported by torch's and the nvidia-* wheels' libraries (once per torch)."""
    names: list[str] = []
    for path in [
        *site.glob("torch/lib/*.so*"),
        *site.glob("torch/_C*.so"),
        *site.glob("nvidia/*/lib/*.so*"),
    ]:
        try:
            names.extend(i.name for i in read_elf(path).imports)
        except ElfReadError:
            continue
    return names


def pair_truth(
    venv: Path, package: str, torch_version: tuple[int, int], torch_names: list[str]
) -> dict:  # type: ignore[type-arg]
    site = next((venv / "lib").glob("python3.*")) / "site-packages"
    here = tuple(int(x) for x in site.parent.name[6:].split("."))
    wanted = canonicalize_name(package)
    dist_info = next(
        d for d in site.glob("*.dist-info") if canonicalize_name(d.name.split("-")[0]) == wanted
    )
    label = package
    python = venv / "bin" / "python"
    outcome: dict[str, dict] = {}  # type: ignore[type-arg]
    items: list[Step] = []
    names: list[str] = list(torch_names)
    for path in _record_objects(dist_info, site):
        try:
            obj = read_elf(path)
        except ElfReadError as exc:
            outcome[str(path)] = {"status": "error", "package": label, "error": exc.reason}
            continue
        tag = python_tag(path.name)
        if tag is not None and tag != here:
            outcome[str(path)] = {"status": "other-python", "package": label}
            continue
        ttag = torch_tag(path.name)
        if ttag is not None and ttag != torch_version:
            outcome[str(path)] = {"status": "other-torch", "package": label}
            continue
        names.extend(i.name for i in obj.imports)
        if is_python_extension(obj):
            rel = path.relative_to(site)
            module = ".".join([*rel.parts[:-1], rel.name.split(".", 1)[0]])
            items.append(Step("extension", module, str(path)))
        else:
            items.append(Step("library", path.name, str(path)))
    stubs = build_stubs(names)
    tops = top_levels(dist_info, site)
    steps = [Step("import", "torch"), *(Step("import", t) for t in tops), *items]
    run = run_steps(python, steps, site_packages=site, library_path=stubs.folder, timeout=900)
    imports: dict[str, dict] = {}  # type: ignore[type-arg]
    for r in run.results:
        if r.step.kind == "import":
            imports[r.step.name] = {"outcome": r.outcome, "error": r.error[:400]}
            continue
        status = {"ok": "ok", "crash": "crash", "timeout": "crash"}.get(r.outcome) or classify(
            r.error
        )
        outcome[r.step.path] = {"status": status, "package": label, "error": r.error[:600]}
    # torchao's _C.abi3.so is no Python module: the package loads it with
    # torch.ops.load_library (dlopen); load it that way, not through the extension loader
    not_modules = [
        Step("library", Path(path).name, path)
        for path, o in outcome.items()
        if "does not define module export function" in o.get("error", "")
    ]
    if not_modules:
        again = run_steps(
            python,
            [steps[0], *(Step("import", t) for t in tops), *not_modules],
            site_packages=site,
            library_path=stubs.folder,
            timeout=900,
        )
        for r in again.results:
            if r.step.kind == "library":
                status = {"ok": "ok", "crash": "crash", "timeout": "crash"}.get(
                    r.outcome
                ) or classify(r.error)
                outcome[r.step.path] = {"status": status, "package": label, "error": r.error[:600]}
    if any(o["status"] not in OK for o in outcome.values()):
        # retry_artefacts labels by the env's owner labels ("name version")
        env = load_environment(venv)
        for p, o in outcome.items():
            o["package"] = env.owner_label(Path(p))
        retry_artefacts(venv, outcome)
    bad = {p: o for p, o in outcome.items() if o["status"] not in OK}
    verdict = "loads"
    first = ""
    if any(o["status"] == "crash" for o in bad.values()):
        verdict = "crash"
    elif bad:
        verdict = "breaks"
    if bad:
        p, o = sorted(bad.items())[0]
        first = f"{Path(p).relative_to(site)}: {o.get('error', '')[:300]}"
    return {
        "verdict": verdict,
        "first_failure": first,
        "objects": {str(Path(p).relative_to(site)): o["status"] for p, o in outcome.items()},
        "imports": imports,
        "stub_names": stubs.names,
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--torch", nargs="+", required=True)
    parser.add_argument("--packages", nargs="*", default=PACKAGES)
    parser.add_argument("--python", default="3.12", help="what `uv venv --python` takes")
    parser.add_argument("--venv", type=Path, default=Path("/tmp/compat27-truth-venv"))
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    results: list[dict] = []  # type: ignore[type-arg]
    if args.out.is_file():
        results = json.loads(args.out.read_text())["pairs"]
    done = {(r["package"], r["version"], r["torch"]) for r in results}
    venv: Path = args.venv
    os.environ["VIRTUAL_ENV"] = str(venv)
    for torch in args.torch:
        if all((p.split("==")[0], p.split("==")[1], torch) in done for p in args.packages):
            continue
        have = list(venv.glob(f"lib/python3.*/site-packages/torch-{torch}.dist-info"))
        if not have:  # a venv left by an interrupted run with this torch is reused
            if venv.exists():
                shutil.rmtree(venv)
            made = uv("venv", "--python", args.python, str(venv))
            if made.returncode != 0:
                raise SystemExit(made.stderr)
            t = time.perf_counter()
            got = uv("pip", "install", "--no-cache", f"torch=={torch}", "numpy", "pillow")
            if got.returncode != 0:
                raise SystemExit(f"torch {torch}: {got.stderr[-2000:]}")
            print(f"torch {torch}: installed in {time.perf_counter() - t:.0f} s", flush=True)
        torch_names = _torch_names(next((venv / "lib").glob("python3.*")) / "site-packages")
        release = tuple(int(x) for x in torch.split(".")[:2])
        for spec in args.packages:
            name, version = spec.split("==")
            if (name, version, torch) in done:
                continue
            t = time.perf_counter()
            got = uv("pip", "install", "--no-cache", "--no-deps", spec)
            row: dict = {"package": name, "version": version, "torch": torch}  # type: ignore[type-arg]
            if got.returncode != 0:
                row.update(verdict="not-installable", first_failure=got.stderr[-600:])
            else:
                row.update(pair_truth(venv, name, release, torch_names))  # type: ignore[arg-type]
                uv("pip", "uninstall", name)
            row["seconds"] = round(time.perf_counter() - t, 1)
            print(
                f"  {spec} + torch {torch}: {row['verdict']} {row['first_failure'][:160]}",
                flush=True,
            )
            results.append(row)
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(
                json.dumps({"python": "3.12", "pairs": results}, indent=1) + "\n",
                encoding="utf-8",
            )
    shutil.rmtree(venv, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
