"""Scale and cost of `validators compat`: whole package histories against torch versions,
cold (an empty facts cache: every wheel read by byte ranges) then warm (the same request
again: facts and verdicts cached), in one run. Records wall time, CPU time, bytes read vs
bytes of the wheels judged, the verdict counts and the undecidable reasons.

    python benchmarks/compat/compat_scale.py --cache /tmp/x --out benchmarks/compat/results/compat_scale.json \
        --package sgl-kernel --package sglang-kernel --torch 2.6.0 2.7.1 ... 2.14.1
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from collections import Counter
from pathlib import Path

from packaging.specifiers import SpecifierSet

from validators.elf.facts_cache import FactsCache
from validators.lockcheck.check import find_interpreter
from validators.torch_abi.matrix import Matrix, Request, compute


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime + c.ru_utime + c.ru_stime


def _summary(m: Matrix, wall: float, cpu: float) -> dict:  # type: ignore[type-arg]
    counts = Counter(p.verdict for p in m.pairs)
    kinds = Counter(f"{p.verdict}:{p.kind}" for p in m.pairs)
    return {
        "package": m.package,
        "versions": len(m.versions),
        "torch_versions": m.torch_versions,
        "pairs": len(m.pairs),
        "counts": dict(counts),
        "kinds": dict(kinds),
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "bytes_fetched": m.bytes_fetched,
        "wheel_bytes": m.wheel_bytes,
        "fetched_fraction": round(m.bytes_fetched / max(1, m.wheel_bytes), 5),
        "verdicts_from_cache": m.verdicts_from_cache,
        "prefetch_s": m.prefetch_seconds,
        "prefetch_bytes": m.prefetch_bytes,
        "prefetch_requests": m.requests,
        "undecidable": [
            f"{p.version} + torch {p.torch}: {p.kind}: {p.reason[:200]}"
            for p in m.pairs
            if p.verdict == "undecidable"
        ],
    }


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cache", type=Path, required=True, help="an empty folder for cold")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--package", action="append", required=True)
    parser.add_argument("--torch", nargs="+", required=True)
    parser.add_argument("--processes", type=int, default=2, help="worker processes")
    args = parser.parse_args()
    interpreter = find_interpreter((3, 12))
    out: dict = {"torch": args.torch, "runs": []}  # type: ignore[type-arg]
    for phase in ("cold", "warm"):
        for package in args.package:
            request = Request(
                package=package,
                versions=(SpecifierSet(""),),
                torch=tuple(SpecifierSet(f"=={t}") for t in args.torch),
                python=(3, 12),
                glibc=(2, 35),
                processes=args.processes,
            )
            t, c, load = time.perf_counter(), _cpu(), os.getloadavg()[0]
            m = compute(request, FactsCache(args.cache), interpreter)
            row = {
                "phase": phase,
                "processes": args.processes,
                "load_before": round(load, 1),
                "load_after": round(os.getloadavg()[0], 1),
                **_summary(m, time.perf_counter() - t, _cpu() - c),
            }
            out["runs"].append(row)
            if phase == "cold":
                matrix_file = args.out.with_name(f"{args.out.stem}.{package}.matrix.json")
                matrix_file.write_text(m.model_dump_json(indent=1) + "\n", encoding="utf-8")
            print(json.dumps({k: v for k, v in row.items() if k != "undecidable"}), flush=True)
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
