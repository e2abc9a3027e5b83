"""Score `validators compat` against the ground truth of benchmarks/compat/compat_truth.py.

    python benchmarks/compat/compat_truth_compare.py TRUTH.json PRED.json... [--md OUT.md]

PRED files are `validators compat ... --json` outputs. A truth "crash" is a pair that does
not load. Wrong "loads": predicted loads, truth breaks or crashes. Wrong "breaks": predicted
breaks, truth loads. Undecidable pairs are listed with their reasons.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def _optional_only(t: dict) -> bool:  # type: ignore[type-arg]
    """The package imports and every object that fails, fails on a missing library only:
    torchaudio 2.8.0's sox and ffmpeg backends need libsox / libav* from the host, which this
    host lacks; torchaudio imports and registers its ops without them (the static verdict's
    "optional: host-library backend" class). Not a torch pairing failure."""
    if t["verdict"] != "breaks":
        return False
    imports = t.get("imports", {})
    package_imports = [v for k, v in imports.items() if k != "torch"]
    if not package_imports or any(v["outcome"] != "ok" for v in package_imports):
        return False
    bad = [
        s
        for s in t.get("objects", {}).values()
        if s not in ("ok", "ok-isolated", "ok-package-global", "other-python", "other-torch")
    ]
    return bool(bad) and all(s == "missing-lib" for s in bad)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("truth", type=Path)
    parser.add_argument("pred", type=Path, nargs="+")
    parser.add_argument("--md", type=Path)
    args = parser.parse_args()
    truth = {
        (r["package"], r["version"], r["torch"]): r
        for r in json.loads(args.truth.read_text())["pairs"]
    }
    pred = {}
    for path in args.pred:
        data = json.loads(path.read_text())
        for p in data["matrix"]["pairs"]:
            pred[(p["package"], p["version"], p["torch"])] = p
    rows = []
    score = {"pairs": 0, "right": 0, "wrong_loads": 0, "wrong_breaks": 0, "undecidable": 0}
    for key in sorted(truth):
        t = truth[key]
        p = pred.get(key)
        if p is None or t["verdict"] == "not-installable":
            continue
        score["pairs"] += 1
        real = "loads" if t["verdict"] == "loads" or _optional_only(t) else "no"
        if p["verdict"] == "undecidable":
            score["undecidable"] += 1
            outcome = "undecidable"
        elif p["verdict"] == "loads":
            outcome = "right" if real == "loads" else "WRONG loads"
        else:
            outcome = "right" if real == "no" else "WRONG breaks"
        if outcome == "right":
            score["right"] += 1
        elif outcome == "WRONG loads":
            score["wrong_loads"] += 1
        elif outcome == "WRONG breaks":
            score["wrong_breaks"] += 1
        why = (
            p["first"]
            if p["verdict"] == "breaks"
            else (p["reason"] if p["verdict"] == "undecidable" else "")
        )
        rows.append(
            f"| {key[0]} {key[1]} | {key[2]} | {p['verdict']}{' (' + p['kind'] + ')' if p['kind'] else ''} "
            f"| {t['verdict'] + (' (optional host libs only)' if _optional_only(t) else '')} | {outcome} | {why[:140].replace('|', '/')} | {t['first_failure'][:140].replace('|', '/')} |"
        )
    packages = sorted({k[0] for k in truth if k in pred})
    score["packages"] = len(packages)  # type: ignore[assignment]
    score["undecidable_fraction"] = round(score["undecidable"] / max(1, score["pairs"]), 3)  # type: ignore[assignment]
    print(json.dumps(score))
    if args.md:
        lines = [
            "| package | torch | compat says | truth (installed + loaded) | | compat's evidence | truth's first failure |",
            "|---|---|---|---|---|---|---|",
            *rows,
        ]
        args.md.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
