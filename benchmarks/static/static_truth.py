"""Ground truth for the static-ABI benchmark: load every shared object of an env for real.

For each distribution that ships ELF files, one child process of the env's own interpreter
(restarted after a crash, so one crash costs one object) does what the issue prescribes:
`import torch` (when installed), import the distribution's top-level packages, then load each
of its objects: extension modules through Python's extension loader (runs PyInit_, i.e. op
registration), other objects with dlopen(RTLD_NOW) (ctypes; what torch.ops.load_library does).
The child processes are run by validators/static/confirm.py's `run_steps` (the mechanism only:
which objects to load and how to judge the outcome are decided here, for every object).
The driver libraries are the stubs of validators/static/driver_stub.py (no GPU here).

Outcome per object: ok | missing-lib (a DT_NEEDED file absent: "cannot open shared object
file") | unreachable (the file is installed in the env, and importing the module the way its
package does still cannot open it) | abi (undefined symbol / version not found) | crash
(signal) | error (other) | other-python (extension for another Python ABI, cannot be
imported by design).

    python benchmarks/static/static_truth.py ENV [--out truth.json] [--userland]

--userland: Debian's real libcuda1 userland (validators/static/driver_userland.py, unpacked by
.ci/bootstrap) ahead of the stubs, as a host with the driver installed but no GPU has it: a
library that crashes only under the stub (onnxruntime-gpu 1.22's CUDA provider) loads there.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from validators.elf.elf_symbols import ElfReadError, read_elf
from validators.elf.object_facts import is_python_extension, python_tag
from validators.static.confirm import Step, run_steps
from validators.static.driver_stub import build_stubs
from validators.static.driver_userland import find_userland
from validators.static.environment import load_environment
from validators.static.verdict import installed_torch, torch_tag

CHUNK = 12  # distributions per child process: each child pays one `import torch`
USERLAND: list[Path] = []  # --userland: the real driver userland's folder, ahead of the stubs


def classify(error: str) -> str:
    if "cannot open shared object file" in error:
        return "missing-lib"
    if "undefined symbol" in error or "version `" in error or "not found (required by" in error:
        return "abi"
    if "does not export expected C function" in error or "has wrong signature" in error:
        return "abi"
    return "error"


def top_levels(dist_info: Path, site: Path) -> list[str]:
    top = dist_info / "top_level.txt"
    if top.is_file():
        names = [n.strip() for n in top.read_text(errors="replace").splitlines() if n.strip()]
    else:
        names = []
        record = dist_info / "RECORD"
        for line in record.read_text(errors="replace").splitlines() if record.is_file() else []:
            first = line.split(",", 1)[0].split("/", 1)[0]
            if first.endswith(".py"):
                names.append(first[:-3])
            elif (site / first / "__init__.py").is_file():
                names.append(first)
    out = []
    for n in dict.fromkeys(names):
        if (
            n.isidentifier()
            and not n.startswith("_")
            and ((site / n / "__init__.py").is_file() or (site / f"{n}.py").is_file())
        ):
            out.append(n)
    return out


def truth(env_path: Path) -> dict:  # type: ignore[type-arg]
    env = load_environment(env_path)
    python = env_path / "bin" / "python"
    site = env.site_packages
    here = (sys.version_info.major, sys.version_info.minor)
    version = subprocess.run(
        [str(python), "-c", "import sys; print(sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    env_py = tuple(int(x) for x in version.strip("()\n ").split(", "))
    per_dist: dict[str, list[dict]] = defaultdict(list)  # type: ignore[type-arg]
    names: list[str] = []
    outcome: dict[str, dict] = {}  # type: ignore[type-arg]
    for path in env.shared_objects():
        try:
            obj = read_elf(path)
        except ElfReadError as exc:
            outcome[str(path)] = {"status": "error", "error": exc.reason}
            continue
        names.extend(i.name for i in obj.imports)
        label = env.owner_label(path)
        tag = python_tag(path.name)
        if tag is not None and tag != env_py:
            outcome[str(path)] = {"status": "other-python", "package": label}
            continue
        module = None
        if is_python_extension(obj):
            rel = path.relative_to(site)
            module = ".".join([*rel.parts[:-1], rel.name.split(".", 1)[0]])
        per_dist[label].append({"path": str(path), "module": module})
    stubs = build_stubs(names)
    has_torch = "torch" in env.distributions
    imports: dict[str, dict] = {}  # type: ignore[type-arg]
    started = time.perf_counter()
    labels = sorted(per_dist)
    top_owner: dict[str, str] = {}
    for start in range(0, len(labels), CHUNK):  # one child per CHUNK distributions
        chunk = labels[start : start + CHUNK]
        tops: list[str] = []
        items: list[dict] = []  # type: ignore[type-arg]
        for label in chunk:
            dist = next((d for d in env.distributions.values() if d.label() == label), None)
            for top in top_levels(dist.dist_info, site) if dist is not None else []:
                top_owner.setdefault(f"import {top}", label)
                tops.append(top)
            items.extend(per_dist[label])
        steps = [Step("import", "torch")] if has_torch else []
        steps += [Step("import", top) for top in dict.fromkeys(tops)]
        steps += [
            Step("extension", i["module"], i["path"])
            if i["module"]
            else Step("library", Path(i["path"]).name, i["path"])
            for i in items
        ]
        owner_of = {i["path"]: label for label in chunk for i in per_dist[label]}
        run = run_steps(
            python, steps, site_packages=site, library_path=[*USERLAND, stubs.folder], timeout=1800
        )
        for r in run.results:
            if r.step.kind == "import":
                msg = {"ok": r.outcome == "ok", "outcome": r.outcome, "error": r.error}
                imports.setdefault(top_owner.get(f"import {r.step.name}", "torch"), {})[
                    f"import {r.step.name}"
                ] = msg
                continue
            status = {"ok": "ok", "crash": "crash", "timeout": "crash"}.get(r.outcome) or classify(
                r.error
            )
            outcome[r.step.path] = {
                "status": status,
                "package": owner_of.get(r.step.path, "?"),
                "error": r.error,
            }
        for label in chunk:
            ok = sum(1 for i in per_dist[label] if outcome.get(i["path"], {}).get("status") == "ok")
            print(f"  {label}: {ok}/{len(per_dist[label])} load", flush=True)
    del here
    retry_artefacts(env_path, outcome)
    return {
        "env": str(env_path),
        "python": list(env_py),
        "objects": outcome,
        "imports": imports,
        "seconds": round(time.perf_counter() - started, 1),
        "stub_names": stubs.names,
        "driver_userland": [str(p) for p in USERLAND],
    }


def retry_artefacts(env_path: Path, outcome: dict[str, dict]) -> None:  # type: ignore[type-arg]
    env = load_environment(env_path)
    python = env_path / "bin" / "python"
    site = env.site_packages
    has_torch = "torch" in env.distributions
    torch_version = installed_torch(env)
    names = [i.name for p in env.shared_objects() for i in _imports(p)]
    stubs = build_stubs(names)
    # Loading everything in a few processes has two artefacts, each retried in a fresh child
    # doing what the package does: (1) a crash may come from a sibling variant already loaded
    # (nanobind refuses to register one enum twice): load the object alone after its
    # package's imports; (2) undefined symbols its package makes global first (cuda-core
    # loads torch._C RTLD_GLOBAL before _tensor_bridge, triton its libtriton before a
    # plugin): load torch._C and the package's own other objects RTLD_GLOBAL, then it.
    by_pkg: dict[str, list[str]] = defaultdict(list)
    for path, o in outcome.items():
        by_pkg[o.get("package", "?")].append(path)
    for path, o in list(outcome.items()):
        crashed = o["status"] == "crash"
        unresolved = o["status"] == "abi" and "undefined symbol" in o.get("error", "")
        if not (crashed or unresolved):
            continue
        tag = torch_tag(Path(path).name)
        if tag is not None and torch_version is not None and tag != torch_version:
            continue  # a build for another torch: never loaded under this one
        label = o.get("package", "?")
        dist = next((d for d in env.distributions.values() if d.label() == label), None)
        steps = [Step("import", "torch")] if has_torch else []
        steps += [Step("import", t) for t in (top_levels(dist.dist_info, site) if dist else [])]
        rel = Path(path).relative_to(site)
        ext = ".cpython-" in rel.name or ".abi3." in rel.name
        mod = ".".join([*rel.parts[:-1], rel.name.split(".", 1)[0]])
        target = Step("extension", mod, path) if ext else Step("library", rel.name, path)
        attempts = [[*steps, target]]
        if crashed:  # variants picked by GPU arch (sgl_kernel sm90/ vs sm100/) clash in one process
            attempts.append([*steps[:1], target])
        if unresolved:
            torch_global = [Step("global", "torch._C")] if has_torch else []
            own_global = [
                Step("global", Path(q).name, q)
                for q in by_pkg[label]
                if q != path and outcome[q]["status"] == "ok"
            ]
            attempts = [[*steps, *torch_global, target], [*steps, *own_global, target]]
        for attempt in attempts:
            again = run_steps(
                python,
                attempt,
                site_packages=site,
                library_path=[*USERLAND, stubs.folder],
                timeout=900,
            )
            last = next((r for r in again.results if r.step == target), None)
            if last is not None and last.outcome == "ok":
                o["status"] = "ok-isolated" if crashed else "ok-package-global"
                o["first_error"] = o.get("error", "")
                break


_MISSING = re.compile(r"(\S+\.so[\w.]*): cannot open shared object file")


def retry_missing_through_package(env_path: Path, outcome: dict[str, dict]) -> None:  # type: ignore[type-arg]
    """An extension module that could not open a library the env installs is imported again
    the way its package imports it (`from parent import child`, after `import torch` and the
    package's own top-level imports: cupy 14's package __getattr__ preloads pip's CUDA
    library there, through cuda-pathfinder; a bare importlib of the submodule fails), and,
    failing that, after the package's modules that loaded so (cupyx._cusolver after
    cupy_backends' cusolver). Loads: "ok-package-path". Still fails on a library the env
    installs: "unreachable" (cupy-cuda12x 13.4.1 beside nvidia-cublas-cu12: the user
    installed the library and the package cannot reach it, issue 25 item 4); on one it does
    not install, it stays "missing-lib" (an optional backend: libsox, cuDNN 8)."""
    env = load_environment(env_path)
    site = env.site_packages
    installed = {Path(p).name for p in outcome}
    stubs = build_stubs([])
    env_vars = {**os.environ, "LD_LIBRARY_PATH": ":".join(map(str, [*USERLAND, stubs.folder]))}
    todo: dict[str, str] = {}  # path -> dotted module
    loaded: dict[str, list[str]] = {}  # package -> modules that loaded the package's way
    for path, o in outcome.items():
        rel = Path(path).relative_to(site)
        if o["status"] == "ok-package-path":
            dotted = ".".join([*rel.parts[:-1], rel.name.split(".", 1)[0]])
            loaded.setdefault(o["package"], []).append(dotted)
        wanted = _MISSING.search(o.get("error", ""))
        if o["status"] not in ("missing-lib", "unreachable") or wanted is None:
            continue
        if wanted.group(1) in installed and (".cpython-" in rel.name or ".abi3." in rel.name):
            todo[path] = ".".join([*rel.parts[:-1], rel.name.split(".", 1)[0]])
    for second in (False, True):
        for path, module in todo.items():
            o = outcome[path]
            if o["status"] == "ok-package-path":
                continue
            dist = next((d for d in env.distributions.values() if d.label() == o["package"]), None)
            first = (["torch"] if "torch" in env.distributions else []) + (
                top_levels(dist.dist_info, site) if dist else []
            )
            before = loaded.get(o["package"], []) if second else []
            code = (
                "import importlib\n"
                f"for name in {first!r}:\n    importlib.import_module(name)\n"
                "def _from(dotted):\n"
                "    parent, _, child = dotted.rpartition('.')\n"
                "    p = importlib.import_module(parent)\n"
                "    return getattr(p, child, None) or importlib.import_module(dotted)\n"
                + "".join(f"_from({m!r})\n" for m in [*before, module])
            )
            done = subprocess.run(
                [str(env_path / "bin" / "python"), "-c", code],
                env=env_vars,
                capture_output=True,
                text=True,
                timeout=900,
                check=False,
            )
            if done.returncode == 0:
                o["status"], o["first_error"] = "ok-package-path", o.get("error", "")
                loaded.setdefault(o["package"], []).append(module)
                continue
            again = _MISSING.search(done.stderr)
            if again is not None and again.group(1) in installed:
                o["status"] = "unreachable"
                o["error"] = done.stderr.strip().splitlines()[-1][:300]
            else:
                o["status"] = "missing-lib"


def _imports(path: Path) -> list:  # type: ignore[type-arg]
    try:
        return list(read_elf(path).imports)
    except ElfReadError:
        return []


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("env", type=Path)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--retry-only", action="store_true", help="redo only the retries on --out")
    parser.add_argument("--userland", action="store_true", help="the real libcuda1 userland too")
    args = parser.parse_args()
    if args.userland:
        found = find_userland()
        if found is None:
            raise SystemExit("--userland: no driver userland (run .ci/bootstrap)")
        USERLAND.append(found.folder)
    if args.retry_only:
        data = json.loads(args.out.read_text())
        retry_artefacts(args.env, data["objects"])
    else:
        data = truth(args.env)
    retry_missing_through_package(args.env, data["objects"])
    text = json.dumps(data, indent=1, sort_keys=True)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n", encoding="utf-8")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
