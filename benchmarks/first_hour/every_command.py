"""Every command of `stackgate --help` as a newcomer types it on a host without a GPU: its last
line and exit code, piped (stdout and stderr into one pipe).

    python benchmarks/first_hour/every_command.py [--out NAME] [--skip-slow] [--cli PATH]

Cases: tests/helpers/every_command.py (the same ones tests/foundation/test_every_command.py
asserts). A tiny real stack (two wheels in a local index) is written to a folder outside the
checkout and locked, built and judged there; the shipped stacks and records are read from the
checkout. Results: benchmarks/first_hour/results/<out>.md (command, last line, exit code,
lines, longest line) and .json.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.helpers.every_command import CASES, VERDICT, newcomer_workspace, run_case  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="every_command")
    parser.add_argument("--skip-slow", action="store_true")
    parser.add_argument("--cli", default=str(ROOT / ".venv" / "bin" / "stackgate"))
    parser.add_argument(
        "--checkout", default=str(ROOT), help="the folder the commands run in (a checkout)"
    )
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="every-command-") as tmp:
        work = Path(tmp)
        values = newcomer_workspace(work)
        for case in CASES:
            if case.slow and args.skip_slow:
                continue
            start = time.monotonic()
            out = run_case(case, [args.cli], values, Path(args.checkout))
            took = time.monotonic() - start
            ok = out.exit_code == case.exit_code and out.last_line.startswith(case.verdict)
            rows.append({
                "command": case.name, "argv": " ".join(case.argv), "exit_code": out.exit_code,
                "last_line": out.last_line, "lines": out.lines,
                "longest_line": out.longest_line, "seconds": round(took, 1),
                "verdict_line": bool(VERDICT.match(out.last_line)), "as_expected": ok,
            })  # fmt: skip
            print(f"{out.exit_code:>3} {took:6.1f}s {case.name}: {out.last_line[:150]}", flush=True)
    results = ROOT / "benchmarks" / "first_hour" / "results"
    (results / f"{args.out}.json").write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    md = [
        "| command | exit | last line (first 160 chars) | lines | longest line | s |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        line = str(r["last_line"])[:160].replace("|", "\\|")
        md.append(f"| `{r['argv']}` | {r['exit_code']} | {line} | {r['lines']} | "
                  f"{r['longest_line']} | {r['seconds']} |")  # fmt: skip
    verdicts = sum(1 for r in rows if r["verdict_line"])
    md.append("")
    md.append(f"{verdicts} of {len(rows)} commands end with a verdict line; "
              f"{sum(1 for r in rows if r['as_expected'])} as the test expects.")  # fmt: skip
    (results / f"{args.out}.md").write_text("\n".join(md) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
