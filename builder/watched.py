"""Run one build step (uv sync, uv build, make) with the job plan's environment, under the
watchdog, with its output streamed to a log file and, line by line, to a callback."""

from __future__ import annotations

import shlex
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from builder.watchdog import Watchdog, WatchReport
from stackgate import proc
from stackgate.credentials import redact


@dataclass(frozen=True)
class StepResult:
    argv: list[str]
    returncode: int
    watch: WatchReport
    tail: list[str]


def run_watched(
    argv: Sequence[str | Path],
    *,
    env: Mapping[str, str],
    cwd: Path | None,
    limit_bytes: int,
    pause_at_bytes: int | None = None,
    log_path: Path,
    on_line: Callable[[str], None] | None = None,
    keep_fds: tuple[int, ...] = (),
    pause: bool = True,
) -> StepResult:
    args = [str(a) for a in argv]
    if "/" not in args[0]:
        args[0] = proc.which(args[0], path=env.get("PATH"))
    log_path.parent.mkdir(parents=True, exist_ok=True)
    tail: list[str] = []
    with log_path.open("a", encoding="utf-8") as log:
        log.write(redact(f"+ {shlex.join(args)}\n"))
        log.flush()
        popen = subprocess.Popen(
            args,
            env=dict(env),
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            pass_fds=keep_fds,
        )

        def pump() -> None:
            assert popen.stdout is not None
            for line in popen.stdout:
                line = redact(line)
                log.write(line)
                tail.append(line.rstrip("\n"))
                del tail[:-40]
                if on_line is not None:
                    on_line(line.rstrip("\n"))

        reader = threading.Thread(target=pump, daemon=True)
        with Watchdog(
            popen.pid, limit_bytes=limit_bytes, pause_at_bytes=pause_at_bytes, pause=pause
        ) as dog:
            reader.start()
            returncode = popen.wait()
        reader.join(timeout=10)
        if popen.stdout is not None:
            popen.stdout.close()
        log.write(f"# exit {returncode}\n")
    return StepResult(args, returncode, dog.report, tail)
