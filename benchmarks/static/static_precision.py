"""Precision/recall of the static ABI verdict on a corpus of real PyPI environments.

Ground truth: benchmarks/static/static_truth.py (every object loaded for real, after `import torch`,
every distribution's top-level packages imported), stored per env in
benchmarks/static/results/static_corpus/truth/<env>.json. Prediction: the static group, in process,
(a) static only (--no-confirm), (b) default (static + confirming loads), (c) --deep (optional), (d) `lock`: the pre-install verdict on the same env's uv.lock
(`static_corpus_envs.py lock NAME`; needs the network or a warm facts cache).
Requirements (the markers class, issue 25): static.dists.requirements' unmet pairs against
`uv pip check`'s on the same env (uv on PATH), per mode except lock.

A distribution is broken in truth when one of its objects fails to load with an ABI error
(undefined symbol, version not found) or crashes the process, or importing its top-level
package crashes or fails with such an error (or on an absent library). It is predicted broken
when its `static.abi.*` result is FAIL. Objects are compared the same way: truth abi/crash vs
the FAIL results' evidence["failing_objects"].

    python benchmarks/static/static_precision.py [--envs a,b] [--modes static,confirm,deep,lock] [--out ...]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import time
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from validators.static.abi_results import AbiOptions
from validators.static.run import StaticInputs, run_static
from validators.static.verdict import torch_tag

ROOT = Path(__file__).resolve().parent
TRUTH = ROOT / "results" / "static_corpus" / "truth"
CORPUS = Path(os.environ.get("STACKGATE_CORPUS", "/work/corpus"))
_ABI = ("undefined symbol", "version `", "cannot open shared object file", "does not exist")


# the package's own import fails on a module nothing installs (bitsandbytes 0.47.0 imports
# packaging without declaring it): the package cannot be used, whatever its symbols say
_IMPORT = ("ModuleNotFoundError: No module named",)
CYTHON_ABI = ("does not export expected C function", "has wrong signature")
DRIVER_LIBS = ("libcuda.so", "libnvidia-", "libnvcuvid.so")


def truth_sets(data: dict, torch: tuple[int, int] | None) -> tuple[set[str], set[str]]:  # type: ignore[type-arg]
    """Objects built for another torch (libfoo_torch29.so beside torch 2.14) are variants the
    package never loads under this torch: not part of the truth either way."""
    broken_pkgs: set[str] = set()
    broken_objs: set[str] = set()
    for path, o in data["objects"].items():
        tag = torch_tag(Path(path).name)
        if tag is not None and torch is not None and tag != torch:
            continue
        status = o["status"]
        # a Cython cross-module C API that does not match: an ABI break, unless the module is
        # one of per-CUDA-major builds (cuda-core cu12/, cu13/): the harness loads both, the
        # package imports the one matching the installed bindings
        cython = any(k in o.get("error", "") for k in CYTHON_ABI)
        if cython and status in ("error", "abi"):
            # one process loads both cu12/ and cu13/ builds; the package imports one
            status = "abi" if _pkg_rel(path) == _full_rel(path) else "variant"
        if status in ("abi", "crash"):
            broken_objs.add(path)
            broken_pkgs.add(o["package"])
    for label, steps in data["imports"].items():
        for msg in steps.values():
            error = msg.get("error", "")
            if any(d in error for d in DRIVER_LIBS):
                continue  # a library of the NVIDIA driver: host-provided, absent on a CPU host
            if msg.get("outcome") in ("crash", "timeout") or (
                not msg["ok"] and any(k in error for k in (*_ABI, *_IMPORT))
            ):
                broken_pkgs.add(label)
    # an object that cannot open a library is broken when its package is (torch's
    # libtorch_cuda.so after `pip uninstall nvidia-cusparselt-cu12`); in a package that
    # imports it is an optional backend (nvshmem's MPI bootstrap) and left out either way.
    # "unreachable" (static_truth.py): the env installs the library and the module, imported
    # the way its package does, still cannot open it (cupy-cuda12x 13.4.1's cuBLAS module
    # beside nvidia-cublas-cu12; issue 25 item 4): broken.
    for path, o in data["objects"].items():
        if o["status"] == "missing-lib" and o.get("package") in broken_pkgs:
            broken_objs.add(path)
    for path, o in data["objects"].items():
        if o["status"] == "unreachable":
            broken_objs.add(path)
            broken_pkgs.add(o["package"])
    return broken_pkgs, broken_objs


def _pkg_rel(path: str) -> str:
    """The module's path below site-packages with CUDA-major folders removed."""
    rel = path.split("site-packages/", 1)[-1]
    return "/".join(part for part in rel.split("/")[:-1] if not part.startswith("cu1"))


def _full_rel(path: str) -> str:
    rel = path.split("site-packages/", 1)[-1]
    return "/".join(rel.split("/")[:-1])


def _cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


TARGETS: tuple[str, ...] = ()  # --targets: GPU archs for the static.arch.* verdicts


def _verdict_fails(results: list, pkgs: dict) -> None:  # type: ignore[type-arg]
    """FAIL results that are not per-package ABI verdicts (static.lock.integrity,
    static.arch.*): a healthy env refused by any of them is a false alarm of the verdict.
    static.dists.* (requirements a forced pair breaks on purpose) are left out."""
    for r in results:
        if r.status in ("FAIL", "ERROR") and r.check.split(".")[:2] in (
            ["static", "arch"],
            ["static", "lock"],
        ):
            pkgs[r.check] = {
                "status": r.status,
                "reason": r.reason[:600],
                "failing_objects": [],
                "severity": "verdict",
            }


_PIP_CHECK = re.compile(r"^The package `([^`]+)` requires `([^`]+)`")
_STATIC_UNMET = re.compile(r"^(\S+) \S+ requires (.+?), (?:not installed|installed \S+)$")


def pip_check(env: Path) -> list[str]:
    """Unmet requirements as `uv pip check` sees them (its own marker evaluation), as
    "requirer -> required" pairs of canonical names: the truth of static.dists.requirements."""
    done = subprocess.run(
        ["uv", "pip", "check", "--python", str(env / "bin" / "python")],
        capture_output=True,
        text=True,
        check=False,
    )
    pairs = set()
    for line in (done.stdout + done.stderr).splitlines():  # uv writes the findings to stderr
        m = _PIP_CHECK.match(line.strip())
        if m:
            required = Requirement(m.group(2).split(";")[0]).name
            pairs.add(f"{canonicalize_name(m.group(1))} -> {canonicalize_name(required)}")
    return sorted(pairs)


def static_unmet(results: list) -> list[str]:  # type: ignore[type-arg]
    """static.dists.requirements' unmet requirements as the same pairs."""
    pairs = set()
    for r in results:
        if r.check == "static.dists.requirements":
            for line in r.evidence.get("unmet", []):
                m = _STATIC_UNMET.match(line)
                if m:
                    required = Requirement(m.group(2)).name
                    pairs.add(f"{canonicalize_name(m.group(1))} -> {canonicalize_name(required)}")
    return sorted(pairs)


UNMET: dict[str, list[str]] = {}  # env -> static's unmet pairs of the last predict()
ARCH: dict[str, dict[str, str]] = {}  # env or lock name -> static.arch.* "STATUS: reason"


def _arch(results: list) -> dict[str, str]:  # type: ignore[type-arg]
    return {
        r.check: f"{r.status}: {r.reason[:200]}"
        for r in results
        if r.check.startswith("static.arch.")
    }


def predict(env: Path, options: AbiOptions) -> tuple[dict, float, float]:  # type: ignore[type-arg]
    wall, cpu = time.perf_counter(), _cpu()
    results = run_static(StaticInputs(env_path=env, abi=options, targets=TARGETS))
    wall, cpu = time.perf_counter() - wall, _cpu() - cpu
    UNMET[str(env)] = static_unmet(results)
    ARCH[str(env)] = _arch(results)
    pkgs: dict[str, dict] = {}  # type: ignore[type-arg]
    for r in results:
        if r.check.startswith("static.abi.") and r.check not in ("static.abi.summary",):
            pkgs[r.check] = {
                "status": r.status,
                "reason": r.reason[:600],
                "failing_objects": r.evidence.get("failing_objects", []),
                "severity": r.evidence.get("severity"),
            }
    _verdict_fails(results, pkgs)
    return pkgs, wall, cpu


def predict_lock(name: str) -> tuple[dict, float, float]:  # type: ignore[type-arg]
    """The pre-install verdict on the env's uv.lock (static_corpus_envs.py lock NAME), with
    the failing objects' virtual paths mapped onto the installed env's."""
    from stackgate.lock.wheels import read_lock
    from validators.elf.facts_cache import FactsCache, default_root
    from validators.lockcheck.check import LockInputs, find_interpreter, run_lock_check

    lock = CORPUS / "locks" / name / "uv.lock"
    wall, cpu = time.perf_counter(), _cpu()
    wheels = read_lock(lock)
    results, _ = run_lock_check(
        LockInputs(
            lock=lock,
            wheels=wheels,
            cache=FactsCache(default_root()),
            interpreter=find_interpreter(wheels.python),
            targets=TARGETS,
        )
    )
    wall, cpu = time.perf_counter() - wall, _cpu() - cpu
    ARCH[str(CORPUS / name)] = _arch(results)
    site = next((CORPUS / name).glob("lib/python3*/site-packages"), CORPUS / name)

    def installed(path: str) -> str:
        rel = path.split("site-packages/", 1)
        return str(site / rel[1]) if len(rel) == 2 else path

    pkgs: dict[str, dict] = {}  # type: ignore[type-arg]
    for r in results:
        if r.check.startswith("static.abi.") and r.check not in ("static.abi.summary",):
            pkgs[r.check] = {
                "status": r.status,
                "reason": r.reason[:600],
                "failing_objects": [installed(o) for o in r.evidence.get("failing_objects", [])],
                "severity": r.evidence.get("severity"),
            }
    _verdict_fails(results, pkgs)
    return pkgs, wall, cpu


def key(label: str) -> str:
    from validators.static.abi_results import check_key

    return f"static.abi.{check_key(label)}"


def env_torch(env: Path) -> tuple[int, int] | None:
    found = sorted(env.glob("lib/python3*/site-packages/torch-*.dist-info"))
    if not found:
        return None
    major, minor = found[0].name.split("-")[1].split(".")[:2]
    return int(major), int(minor)


def score(truth: dict, pred: dict, torch: tuple[int, int] | None) -> dict:  # type: ignore[type-arg]
    broken_pkgs, broken_objs = truth_sets(truth, torch)
    truth_keys = {key(lbl) for lbl in broken_pkgs}
    fail_keys = {
        k.removesuffix(".files")
        for k, v in pred.items()
        if v["status"] == "FAIL" and v["severity"] != "verdict"
    }
    verdict = sorted(k for k, v in pred.items() if v["severity"] == "verdict")
    pred_objs = {o for v in pred.values() if v["status"] == "FAIL" for o in v["failing_objects"]}
    return {
        # a FAIL/ERROR beside the per-package verdicts on an env that truth calls healthy
        "verdict_fp": verdict if not broken_pkgs else [],
        "packages": {
            "tp": sorted(truth_keys & fail_keys),
            "fp": sorted(fail_keys - truth_keys),
            "miss": sorted(truth_keys - fail_keys),
        },
        "objects": {
            "tp": len(broken_objs & pred_objs),
            "fp": sorted(pred_objs - broken_objs),
            "miss": sorted(broken_objs - pred_objs),
        },
    }


def _cell(entry: dict, mode: str) -> str:  # type: ignore[type-arg]
    m = entry.get(mode)
    if not m:
        return ""
    p = m["packages"]
    refused = f" + {', '.join(m['verdict_fp'])} FAIL" if m.get("verdict_fp") else ""
    return f"{len(p['tp'])}/{len(p['fp'])}/{len(p['miss'])}{refused} ({m['cpu_s']} CPU s)"


def table(report: dict, before: dict, names: list[str], modes: list[str]) -> str:  # type: ignore[type-arg]
    """Markdown rows: per env and mode, packages TP/FP/miss before (another run's JSON) and
    now, and the totals."""
    head = "| env | truth: broken | " + " | ".join(f"{m} before | {m} now" for m in modes) + " |"
    rows = [head, "|" + " --- |" * (2 + 2 * len(modes))]
    totals = {(m, w): [0, 0, 0] for m in modes for w in ("before", "now")}
    for name in names:
        now, old = report.get(name, {}), before.get(name, {})
        cells = []
        for m in modes:
            for which, src in (("before", old), ("now", now)):
                cells.append(_cell(src, m))
                if src.get(m):
                    p = src[m]["packages"]
                    for i, k in enumerate(("tp", "fp", "miss")):
                        totals[(m, which)][i] += len(p[k])
        broken = ", ".join(now.get("truth_broken_packages", [])) or "none"
        rows.append(f"| {name} | {broken} | " + " | ".join(cells) + " |")
    total = " | ".join(
        "**{}/{}/{}**".format(*totals[(m, w)]) for m in modes for w in ("before", "now")
    )
    rows.append(f"| **total** | | {total} |")
    return "\n".join(rows)


def rescore(out: Path, names: list[str]) -> int:
    """The stored predictions (each mode's FAIL checks and failing objects) scored against
    the truth files as they are now."""
    report = json.loads(out.read_text())
    for name in names or sorted(report):
        entry = report[name]
        truth = json.loads((TRUTH / f"{name}.json").read_text())
        torch = env_torch(CORPUS / name)
        entry["truth_broken_packages"] = sorted(truth_sets(truth, torch)[0])
        for mode, m in entry.items():
            if not isinstance(m, dict) or "fails" not in m:
                continue
            pred = {
                check: {
                    "status": "FAIL",
                    "severity": "verdict" if check.split(".")[1] in ("arch", "lock") else "FAIL",
                    "failing_objects": m["failing_objects"] if i == 0 else [],
                }
                for i, check in enumerate(m["fails"])
            }
            m.update(score(truth, pred, torch))
            p = m["packages"]
            print(
                f"{name:24} {mode:8} pkgs tp={len(p['tp'])} fp={len(p['fp'])} miss={len(p['miss'])}"
            )
    out.write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--envs", default="")
    parser.add_argument("--modes", default="static,confirm")
    parser.add_argument("--targets", default="", help="GPU archs for static.arch.*, e.g. 12.0")
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "static_precision.json")
    parser.add_argument(
        "--table", type=Path, help="print a markdown table (before: this JSON) and stop"
    )
    parser.add_argument(
        "--rescore",
        action="store_true",
        help="score --out's stored FAILs against the truth files again (a truth rule changed)",
    )
    args = parser.parse_args()
    if args.rescore:
        return rescore(args.out, [n for n in args.envs.split(",") if n])
    global TARGETS
    TARGETS = tuple(t for t in args.targets.split(",") if t)
    if args.table:
        report = json.loads(args.out.read_text())
        print(
            table(
                report,
                json.loads(args.table.read_text()),
                [n for n in args.envs.split(",") if n] or sorted(report),
                args.modes.split(","),
            )
        )
        return 0
    names = [n for n in args.envs.split(",") if n] or sorted(p.stem for p in TRUTH.glob("*.json"))
    modes = {
        "static": AbiOptions(confirm=False),
        "confirm": AbiOptions(),
        "deep": AbiOptions(deep=True),
    }
    report: dict[str, dict] = {}  # type: ignore[type-arg]
    if args.out.is_file():
        report = json.loads(args.out.read_text())
    for name in names:
        truth = json.loads((TRUTH / f"{name}.json").read_text())
        entry = report.setdefault(name, {})
        torch = env_torch(CORPUS / name)
        entry["truth_broken_packages"] = sorted(truth_sets(truth, torch)[0])
        for mode in args.modes.split(","):
            if mode == "lock" and not (CORPUS / "locks" / name / "uv.lock").is_file():
                continue  # an uninstall cannot be written as a lock
            pred, wall, cpu = (
                predict_lock(name) if mode == "lock" else predict(CORPUS / name, modes[mode])
            )
            s = score(truth, pred, torch)
            entry[mode] = {
                "wall_s": round(wall, 2),
                "cpu_s": round(cpu, 2),
                **s,
                "fails": {k: v["reason"] for k, v in pred.items() if v["status"] == "FAIL"},
                "failing_objects": sorted(
                    {
                        o
                        for v in pred.values()
                        if v["status"] == "FAIL"
                        for o in v["failing_objects"]
                    }
                ),
                "notes": {
                    k: v["reason"][:300]
                    for k, v in pred.items()
                    if v["severity"] in ("WARN", "INFO")
                },
            }
            if TARGETS:
                entry[mode]["arch"] = ARCH.get(str(CORPUS / name), {})
            if mode != "lock":
                truth_unmet = pip_check(CORPUS / name)
                mine = UNMET.get(str(CORPUS / name), [])
                entry[mode]["requirements"] = {
                    "pip_check": truth_unmet,
                    "static": mine,
                    "fp": sorted(set(mine) - set(truth_unmet)),
                    "miss": sorted(set(truth_unmet) - set(mine)),
                }
            p, o = s["packages"], s["objects"]
            print(
                f"{name:24} {mode:8} pkgs tp={len(p['tp'])} fp={len(p['fp'])} miss={len(p['miss'])}"
                f"  .so tp={o['tp']} fp={len(o['fp'])} miss={len(o['miss'])}"
                f"  wall={wall:.1f}s cpu={cpu:.1f}s  fp={p['fp']} miss={p['miss']}"
                f"  verdict_fp={s['verdict_fp']}"
                f"  requirements={entry[mode].get('requirements', {}).get('fp', '-')}"
                f"/{entry[mode].get('requirements', {}).get('miss', '-')}",
                flush=True,
            )
        args.out.write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
