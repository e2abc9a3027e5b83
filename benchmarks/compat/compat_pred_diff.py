"""Diff two directories of `validators compat ... --json` outputs (pred-*.json), ignoring what
changes run to run: timings, bytes and requests of the read, cache flags.

    python benchmarks/compat/compat_pred_diff.py OLD_DIR NEW_DIR

Prints each pair whose record differs (the fields that differ, old -> new), each other
top-level field that differs, and which fields one side has that the other lacks. Exit 0 when
every pair's record is the same, 1 when a pair differs (a verdict, its evidence or reason).
"""

from __future__ import annotations

import argparse
import difflib
import json
import sys
from pathlib import Path
from typing import Any

RUN_TO_RUN = {
    "seconds",
    "bytes_fetched",
    "verdicts_from_cache",
    "from_cache",
    "prefetch_bytes",
    "prefetch_seconds",
    "requests",
}


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in RUN_TO_RUN}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _pairs(data: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(p["package"], p["version"], p["torch"]): p for p in data["matrix"].pop("pairs")}


def _lines(old: Any, new: Any) -> list[str]:
    """The changed lines of a field's JSON text (proposed rules are TOML strings: their lines)."""
    a = (
        "\n".join(old)
        if isinstance(old, list) and all(isinstance(x, str) for x in old)
        else json.dumps(old, indent=1)
    )
    b = (
        "\n".join(new)
        if isinstance(new, list) and all(isinstance(x, str) for x in new)
        else json.dumps(new, indent=1)
    )
    diff = difflib.unified_diff(a.splitlines(), b.splitlines(), lineterm="", n=0)
    return [line for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---")]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    args = parser.parse_args()
    pair_diffs = other_diffs = pairs = 0
    for new_path in sorted(args.new.glob("pred-*.json")):
        old_path = args.old / new_path.name
        if not old_path.is_file():
            print(f"{new_path.name}: no {old_path}")
            other_diffs += 1
            continue
        old = _strip(json.loads(old_path.read_text()))
        new = _strip(json.loads(new_path.read_text()))
        old_pairs, new_pairs = _pairs(old), _pairs(new)
        for key in sorted(old_pairs.keys() | new_pairs.keys()):
            pairs += 1
            a, b = old_pairs.get(key, {}), new_pairs.get(key, {})
            if a != b:
                pair_diffs += 1
                fields = {
                    f: [a.get(f), b.get(f)]
                    for f in sorted(a.keys() | b.keys())
                    if a.get(f) != b.get(f)
                }
                print(f"{new_path.name} {' '.join(key)}: {json.dumps(fields)}")
        for field in sorted(old.keys() | new.keys()):
            if old.get(field) != new.get(field):
                other_diffs += 1
                print(f"{new_path.name} {field}: differs")
                for line in _lines(old.get(field), new.get(field)):
                    print(f"    {line}")
    print(f"{pairs} pairs: {pair_diffs} differ; {other_diffs} other fields differ")
    return 1 if pair_diffs else 0


if __name__ == "__main__":
    sys.exit(main())
