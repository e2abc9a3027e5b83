"""Folders named by environment variables (STACKGATE_STATE_DIR, STACKGATE_CACHE, ...).

A variable is input like a flag: `STACKGATE_STATE_DIR=/etc/passwd` or `STACKGATE_CACHE=/dev/null`
is bad input (exit 2) naming the variable, before anything is created under it, not an
OSError deep in a command that names neither the variable nor the value.
"""

from __future__ import annotations

import os
from pathlib import Path

from stackgate.errors import BadInput
from stackgate.path_kind import nearest_part


def folder_from_env(var: str, what: str) -> Path | None:
    """The folder $var names (None when unset or empty); BadInput when it cannot be a folder:
    it, or the nearest part of it that exists, is not a folder (a file, a device)."""
    raw = os.environ.get(var)
    if not raw:
        return None
    if "\0" in raw:
        raise BadInput(f"${var}: contains a NUL byte; it must name a folder for {what}")
    path = Path(raw)
    probe, kind = nearest_part(path)
    if kind not in (None, "folder"):
        where = "is" if probe == path else f"is under {probe}, which is"
        raise BadInput(f"${var}={raw} {where} not a folder; it must name a folder for {what}")
    return path
