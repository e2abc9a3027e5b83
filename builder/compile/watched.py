"""Run one build step (uv sync, uv build, make) with the job plan's environment, under the
watchdog, with its output streamed to a log file and, line by line, to a callback.

On a terminal a step can be given one of its own (a pty the size of the user's): uv then
draws its progress bars, passed through to the user as they are, while the log, the tail
kept for error messages and the callback get only the lines a terminal keeps
(builder.compile.terminal_lines), never the redraws or their escape sequences."""

from __future__ import annotations

import codecs
import fcntl
import os
import shlex
import struct
import subprocess
import termios
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from builder.compile.terminal_lines import TerminalLines
from builder.compile.watchdog import Watchdog, WatchReport
from stackgate import proc
from stackgate.credentials import redact
from stackgate.owned_files import open_owned


@dataclass(frozen=True)
class StepResult:
    argv: list[str]
    returncode: int
    watch: WatchReport
    tail: list[str]


@dataclass(frozen=True)
class Terminal:
    """The user's terminal: its size, and where a step's output goes as drawn."""

    columns: int
    rows: int
    write: Callable[[str], None]


class _Lines:
    """Each finished line of a step: redacted, to the log, the tail and the callback."""

    def __init__(self, log: TextIO, on_line: Callable[[str], None] | None) -> None:
        self.log = log
        self.on_line = on_line
        self.tail: list[str] = []

    def __call__(self, line: str) -> None:
        line = redact(line.rstrip("\n"))
        self.log.write(line + "\n")
        self.tail.append(line)
        del self.tail[:-40]
        if self.on_line is not None:
            self.on_line(line)


def _pump_pipe(stream: TextIO, lines: _Lines) -> None:
    for line in stream:
        lines(line)


def _pump_pty(master: int, lines: _Lines, terminal: Terminal) -> None:
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    kept = TerminalLines()
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the step and everything it started closed the pty
            break
        if not chunk:
            break
        text = decoder.decode(chunk)
        # uv writes a whole redraw at once, so a URL with credentials is not split here.
        # "\r\n" is what our pty made of uv's "\n"; the user's terminal adds its own "\r".
        terminal.write(redact(text).replace("\r\n", "\n"))
        for line in kept.feed(text):
            lines(line)
    for line in [*kept.feed(decoder.decode(b"", final=True)), *kept.finish()]:
        lines(line)


def _open_pty(terminal: Terminal) -> tuple[int, int]:
    master, slave = os.openpty()
    size = struct.pack("HHHH", max(terminal.rows, 1), max(terminal.columns, 20), 0, 0)
    fcntl.ioctl(slave, termios.TIOCSWINSZ, size)
    return master, slave


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
    terminal: Terminal | None = None,
) -> StepResult:
    args = [str(a) for a in argv]
    if "/" not in args[0]:
        args[0] = proc.which(args[0], path=env.get("PATH"))
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log_fd = open_owned(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)  # never a link
    with os.fdopen(log_fd, "a", encoding="utf-8") as log:
        log.write(redact(f"+ {shlex.join(args)}\n"))
        log.flush()
        lines = _Lines(log, on_line)
        popen: subprocess.Popen[str] | subprocess.Popen[bytes]
        if terminal is None:
            popen = subprocess.Popen(
                args,
                env=proc.child_env(env),
                cwd=cwd,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
                pass_fds=keep_fds,
            )
            assert popen.stdout is not None
            reader = threading.Thread(target=_pump_pipe, args=(popen.stdout, lines), daemon=True)
        else:
            master, slave = _open_pty(terminal)
            try:
                popen = subprocess.Popen(
                    args,
                    env=proc.child_env(env),
                    cwd=cwd,
                    stdout=slave,
                    stderr=slave,
                    pass_fds=keep_fds,
                )
            except BaseException:
                os.close(master)
                raise
            finally:
                os.close(slave)  # the child holds it now: EIO on master once the child is done
            reader = threading.Thread(target=_pump_pty, args=(master, lines, terminal), daemon=True)
        with Watchdog(
            popen.pid, limit_bytes=limit_bytes, pause_at_bytes=pause_at_bytes, pause=pause
        ) as dog:
            reader.start()
            returncode = popen.wait()
        reader.join(timeout=10)
        if popen.stdout is not None:
            popen.stdout.close()
        if terminal is not None:
            os.close(master)
        log.write(f"# exit {returncode}\n")
    return StepResult(args, returncode, dog.report, lines.tail)
