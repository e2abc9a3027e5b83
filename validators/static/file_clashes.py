"""Files two or more installed distributions install (`static.dists.clashes`).

The last owner written stays, so which module an import gets depends on the installer's order
(uv installs in parallel; a stackgate build settles the lock's last owner, `chosen`,
builder/venv/clash_settle.py). Either way the stack imports one wheel's module where another
expected its own: a WARN by default (a PASS whose reason starts with `WARN:`), which a stack
accepts (`[validation.accepted_findings]`) or refuses (`[validation.refused_findings]`: FAIL).
Paths every owner ships with the same bytes (`nvidia/__init__.py`, namespace packages) are
INFO, never a WARN. Only the clashing files are read (RECORDs say which).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from stackgate.build_record import FileClash
from stackgate.envtree.wheel_records import judge, read_claims
from validators.core.checks import StaticCheck
from validators.core.results import Result, make_result

CHECK: StaticCheck = "static.dists.clashes"
MAX_LISTED = 12
MAX_EVIDENCE = 200


def _line(clash: FileClash) -> str:
    held = " and ".join(clash.holds) if clash.holds else "none of them"
    return f"{clash.path} ({', '.join(clash.owners)}; the env holds the copy of {held})"


def clash_result(env_root: Path) -> Result:
    """One result for the env at `env_root`."""
    started = time.perf_counter()
    claims = read_claims(env_root)
    judged = judge(claims, only=claims.clash_paths())
    differing = [c for c in judged.clashes if not c.same_bytes]
    same = [c for c in judged.clashes if c.same_bytes]
    evidence: dict[str, Any] = {
        "severity": "WARN" if differing else ("INFO" if same else "PASS"),
        "clashes": [c.model_dump() for c in differing[:MAX_EVIDENCE]],
        "same_bytes": [c.path for c in same[:MAX_EVIDENCE]],
        "counts": {"different_bytes": len(differing), "same_bytes": len(same)},
    }
    if judged.damaged:
        evidence["unmatched"] = [f"{d.path}: {d.detail}" for d in judged.damaged[:MAX_LISTED]]
    seconds = time.perf_counter() - started
    if differing:
        listed = "; ".join(_line(c) for c in differing[:MAX_LISTED])
        reason = (
            f"WARN: {len(differing)} file(s) installed by two or more distributions with "
            f"different bytes (one copy stays: a stackgate build keeps the last owner's in "
            f"the lock's order): {listed}"
        )
    elif same:
        reason = (
            f"INFO: {len(same)} file(s) installed by several distributions, all with the same "
            f"bytes (e.g. {same[0].path})"
        )
    else:
        reason = "no file is installed by two distributions"
    return make_result(CHECK, "PASS", reason, evidence, seconds, group="static")
