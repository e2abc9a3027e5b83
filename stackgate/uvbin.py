"""Where the uv binary is: the `uv` package stackgate depends on, not whatever PATH holds.

`STACKGATE_UV` (a path, or a name looked up on PATH) overrides; without the package (a
vendored copy of the tool, say) PATH is the fallback; neither: exit 3 saying how to get it.
A user who installed stackgate into a venv without activating it still gets that venv's uv.
"""

from __future__ import annotations

import os
from pathlib import Path

from stackgate import proc
from stackgate.errors import ToolNotFound
from stackgate.settings import value


def uv_bin() -> str:
    """The uv executable every uv call uses."""
    if override := value("STACKGATE_UV"):
        found = proc.find(override)
        if found is None or not Path(found).is_file() or not os.access(found, os.X_OK):
            raise ToolNotFound(override, "STACKGATE_UV names no executable uv")
        return found
    try:
        from uv import find_uv_bin
    except ImportError:
        pass
    else:
        try:
            return find_uv_bin()
        except FileNotFoundError:
            pass
    on_path = proc.find("uv")
    if on_path is None:
        raise ToolNotFound("uv", "install stackgate with its dependencies (they include uv)")
    return on_path
