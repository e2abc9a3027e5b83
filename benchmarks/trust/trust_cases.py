"""Trust boundaries, round three: run every case of this round against this checkout and
print the three tables (security / bad input / faults: tried, stopped) and a JSON record.

Each case is a real command or a real racer (benchmarks/trust/cases_*.py); a case whose setup
is the suite's own fixtures runs that test. Usage (from the checkout's root):

    nice -n 10 .tools/bin/uv run python -m benchmarks.trust.trust_cases [--only KEY,...] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
import traceback
from pathlib import Path

from benchmarks.trust import cases_input, cases_security  # noqa: F401  (they register the cases)
from benchmarks.trust.harness import CASES, ROOT, Case

TABLES = ("security", "bad input", "faults")


def run_case(c: Case, base: Path) -> None:
    tmp = Path(tempfile.mkdtemp(prefix=f"{c.key}-", dir=base))
    started = time.monotonic()
    try:
        outcome = c.run(tmp)
        stopped, seen = outcome.stopped, outcome.seen
    except Exception as exc:  # the harness's own failure: reported, never counted as stopped
        stopped, seen = (
            False,
            f"HARNESS ERROR {type(exc).__name__}: {exc} | {traceback.format_exc(limit=2)[-300:]}",
        )
    c.result = {"key": c.key, "table": c.table, "item": c.item, "origin": c.origin, "title": c.title,
                "stopped": stopped, "seen": seen, "seconds": round(time.monotonic() - started, 1)}  # fmt: skip


def tables(cases: list[Case]) -> str:
    lines = ["| table | tried | stopped | not stopped |", "| --- | --- | --- | --- |"]
    for t in TABLES:
        rows = [c for c in cases if c.table == t]
        bad = [c.key for c in rows if not c.result["stopped"]]
        lines.append(f"| {t} | {len(rows)} | {len(rows) - len(bad)} | {', '.join(bad) or '-'} |")
    lines += [
        "",
        "| case | table | item | origin | stopped | s | what | seen |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in cases:
        r = c.result
        seen = str(r["seen"]).replace("|", "/")
        lines.append(
            f"| {c.key} | {c.table} | {c.item} | {c.origin} | {'yes' if r['stopped'] else '**NO**'} | {r['seconds']} | {c.title} | {seen} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated case keys (default: all)")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks/trust/results/trust_cases.json"
    )
    args = parser.parse_args()
    only = {k for k in args.only.split(",") if k}
    chosen = [c for c in CASES if not only or c.key in only]
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="trust-cases-") as base:
        for c in chosen:
            run_case(c, Path(base))
            print(
                f"{c.key:6} {'stopped' if c.result['stopped'] else 'NOT STOPPED'} {c.result['seconds']:6.1f}s {c.title[:70]}",
                flush=True,
            )
    print()
    print(tables(chosen))
    record = {
        "commit": os.popen(f"git -C {ROOT} rev-parse --short HEAD").read().strip(),
        "host": platform.node(), "load_avg": os.getloadavg(), "wall_s": round(time.monotonic() - started, 1),
        "cases": [c.result for c in chosen],
    }  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    bad = sum(not c.result["stopped"] for c in chosen)
    print(
        f"\n{'OK' if not bad else 'FAILED'}: {len(chosen) - bad} of {len(chosen)} cases stopped; JSON: {args.out}"
    )
    return 0 if not bad else 1


if __name__ == "__main__":
    raise SystemExit(main())
