"""The environment of a stand-in checkout: its own stacks/, state dir, venv root and records/
(STACKGATE_ROOT), so a test or benchmark never reads or writes the real checkout's."""

from __future__ import annotations

import os
from pathlib import Path


def isolated_env(work: Path, stacks: Path) -> dict[str, str]:
    """os.environ with the project's folders under `work` and the stacks from `stacks`."""
    return {
        **os.environ,
        "STACKGATE_ROOT": str(work),  # so records/ is this project's, not the checkout's
        "STACKGATE_STACKS_DIR": str(stacks),
        "STACKGATE_STATE_DIR": str(work / "state"),
        "STACKGATE_VENV_ROOT": str(work / "envs"),
        "UV_PYTHON_DOWNLOADS": "never",
        "NO_COLOR": "1",
    }
