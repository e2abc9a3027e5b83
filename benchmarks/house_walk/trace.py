"""Walk one stackgate command through the house: which of the project's modules it enters and
how often it comes back to one it had left (issue 28's review measure).

Usage: python benchmarks/house_walk/trace.py OUT.json MODULE [ARGS...]
  runs `python -m MODULE ARGS...` in this process under sys.setprofile.

How it counts: every Python 'call' and 'return' event moves "where the command is" to the
module whose code runs next (its frame's __name__). Frames outside the project packages
(stackgate, builder, validators, fleet) and module bodies run at import time (<module>) are
skipped, so the walk is the project's own functions in the order control passes through them.
Consecutive events in one module are one visit. entered = distinct modules visited;
returns = visits to a module already visited before (each time control comes back to a room
it had left, whether by a call or by a return; loops over items count every pass);
returned_to = how many distinct modules were come back to at least once.
calls = how often each function of COUNTED ran (issue 28 §2: each manifest loaded and each
record resolved once per command).
"""

from __future__ import annotations

import json
import runpy
import sys
from pathlib import Path
from types import FrameType
from typing import Any

PROJECT = ("stackgate", "builder", "validators", "fleet")
# (module, function) pairs whose calls are counted: loading a manifest, resolving a record,
# parsing a record file or a run report (*_from_file_data: the parse once the JSON is read;
# a tree without them reads through read_record_file / read_report alone).
COUNTED = (
    ("stackgate.manifest.loading", "load_stack"),
    ("validators.records.resolve", "resolve_record"),
    ("validators.records.json_files", "read_record_file"),
    ("validators.records.json_files", "record_from_file_data"),
    ("validators.records.resolve", "read_report"),
    ("validators.records.resolve", "report_from_file_data"),
)


def main(argv: list[str]) -> int:
    out, module, *args = argv
    walk: list[str] = []
    calls = {f"{m}.{f}": 0 for m, f in COUNTED}

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event not in ("call", "return"):
            return
        if event == "call":
            key = f"{frame.f_globals.get('__name__', '')}.{frame.f_code.co_name}"
            if key in calls:
                calls[key] += 1
        if event == "return":
            back = frame.f_back
            if back is None:
                return
            frame = back
        if frame.f_code.co_name == "<module>":
            return
        name = frame.f_globals.get("__name__", "")
        if not isinstance(name, str) or name.split(".")[0] not in PROJECT:
            return
        if name == "__main__":
            return
        if not walk or walk[-1] != name:
            walk.append(name)

    sys.argv = [module, *args]
    code = 0
    sys.setprofile(profile)
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.setprofile(None)
    entered = sorted(set(walk))
    result = {
        "command": [module, *args],
        "exit": code,
        "entered": len(entered),
        "visits": len(walk),
        "returns": len(walk) - len(entered),
        "returned_to": sum(1 for m in entered if walk.count(m) > 1),
        "calls": calls,
        "most_returned": {m: walk.count(m) - 1 for m in sorted(entered, key=walk.count)[::-1][:8]},
        "modules": entered,
    }
    Path(out).write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"{' '.join([module, *args[:2]])}: exit {code}, entered {len(entered)} modules, "
        f"returned {len(walk) - len(entered)} times",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
