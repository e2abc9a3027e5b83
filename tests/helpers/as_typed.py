"""Commands of the README and docs run as a user types them.

A doc's ```bash / ```console blocks are read as command lines (comments dropped, continuation
lines joined, a console block's `$ ` lines); a line runs through `.tools/bin/uv` exactly as
written, after the shell's own expansion of `$VAR` / `"$VAR"` (the docs name this host's inputs,
e.g. its base site, that way). Where the checkout has no `.tools/bin/uv` (a developer's worktree
without the bootstrap) the uv installed beside this Python (stackgate depends on the `uv`
package) stands in for it and says so; CI runs `.ci/bootstrap` first, so there it is the real
one. The project environment `uv run` creates is the test's own (UV_PROJECT_ENVIRONMENT: the
checkout's `.venv` is the user's).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
UV = ".tools/bin/uv"
STACKGATE = [UV, "run", "stackgate"]
# Variables the test decides, never the developer's shell: a doc command reads only these.
PROJECT_VARIABLES = ("VIRTUAL_ENV", "STACKGATE_ROOT", "STACKGATE_STACKS_DIR", "STACKGATE_VENV_ROOT")


def command_lines(markdown: str, marker: str | None = None) -> list[str]:
    """Every command of the ```bash and ```console blocks (of the block after `<!-- marker`
    only, when given), comments dropped, continuation lines joined."""
    if marker is not None:
        markdown = markdown.split(f"<!-- {marker}", 1)[1].split("<!-- /", 1)[0]
    commands: list[str] = []
    for lang, body in re.findall(r"```(bash|console)\n(.*?)```", markdown, re.S):
        lines = body.splitlines()
        if lang == "console":
            lines = [line[2:] for line in lines if line.startswith("$ ")]
        joined = "\n".join(lines).replace("\\\n", " ")
        for line in joined.splitlines():
            words = line.split("#", 1)[0].strip() if not line.lstrip().startswith("#") else ""
            if words:
                commands.append(words)
    return commands


def stackgate_words(command: str) -> list[str] | None:
    """The words after `.tools/bin/uv run stackgate`, None for any other command."""
    words = shlex.split(command)
    return words[3:] if words[:3] == STACKGATE else None


@dataclass(frozen=True)
class TypedShell:
    """The uv a user's `.tools/bin/uv` is here and the environment commands run in."""

    uv: str
    env: Mapping[str, str]

    def run(
        self, command: str, timeout: int = 600, **variables: str
    ) -> subprocess.CompletedProcess[str]:
        """`command` as typed: `$VAR` expanded from `variables` (then this environment), as the
        shell would; `.tools/bin/uv` is self.uv."""
        env = {**self.env, **variables}
        words = [_expand(word, env) for word in shlex.split(command)]
        assert words[0] == UV, command
        return subprocess.run(
            [self.uv, *words[1:]], cwd=ROOT, env=env, capture_output=True, text=True,
            timeout=timeout,
        )  # fmt: skip


def _expand(word: str, env: Mapping[str, str]) -> str:
    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        assert name in env, f"the command names ${name}, which the test did not set"
        return env[name]

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", value, word)


def typed_shell(project_venv: Path) -> TypedShell:
    """`.tools/bin/uv` (or its stand-in) with a project venv of the test's own, created by a
    first `uv run` (it says so on stderr; the commands compared line by line run after it, as
    a user's second command would)."""
    uv = ROOT / UV
    if not uv.is_file():
        assert os.environ.get("CI") != "true", "CI runs .ci/bootstrap first: .tools/bin/uv"
        beside = Path(sys.executable).parent / "uv"
        assert beside.is_file(), "the uv package installs uv beside this Python"
        print(f"no {UV} in this checkout: {beside} stands in for it")
        uv = beside
    env = {**os.environ, "UV_PROJECT_ENVIRONMENT": str(project_venv)}
    for name in PROJECT_VARIABLES:
        env.pop(name, None)
    first = subprocess.run(
        [str(uv), "run", "stackgate", "--version"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr[-2000:]
    return TypedShell(str(uv), env)


def last_line(done: subprocess.CompletedProcess[str]) -> str:
    """The verdict: the last line on stderr."""
    lines = done.stderr.strip().splitlines()
    return lines[-1] if lines else ""
