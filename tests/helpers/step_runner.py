"""The byte-code step's Runner (builder.venv.bytecode.Runner) as plain subprocess: what the build's
watched runner does, without the watchdog, for tests of the step itself."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping, Sequence


def run_lines(
    argv: Sequence[str], env: Mapping[str, str], on_line: Callable[[str], None]
) -> tuple[int, list[str]]:
    done = subprocess.run(list(argv), env=dict(env), capture_output=True, text=True, timeout=300)
    lines = (done.stdout + done.stderr).splitlines()
    for line in lines:
        on_line(line)
    return done.returncode, lines[-40:]
