"""Apply a stack's environment profile inside the env, so every process started from it has it.

A `.pth` file in site-packages runs one import at interpreter start-up; the module it imports
sets the profile's variables with os.environ.setdefault (a variable the user set explicitly
still wins, which keeps ad-hoc experiments possible) and so passes them to every child process
(NCCL reads them in the server's worker processes). The same variables go to
<env>/stackgate/env.sh for shells and non-Python launchers, and the choice is in the record.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from builder.venv.topology import TopologyChoice
from stackgate.env_generated import (
    PROFILE_FORMAT,
    PROFILE_MODULE,
    PROFILE_PTH,
    render_profile_module,
)


def site_packages(env: Path) -> Path:
    found = sorted(env.glob("lib/python3.*/site-packages"))
    if not found:
        raise FileNotFoundError(f"no site-packages under {env}")
    return found[0]


def render_module(variables: dict[str, str], choice: TopologyChoice) -> str:
    return render_profile_module(variables, choice.topology, PROFILE_FORMAT)


def apply_profile(env: Path, variables: dict[str, str], choice: TopologyChoice) -> None:
    site = site_packages(env)
    (site / f"{PROFILE_MODULE}.py").write_text(render_module(variables, choice), encoding="utf-8")
    (site / PROFILE_PTH).write_text(f"import {PROFILE_MODULE}\n", encoding="utf-8")
    record_dir = env / "stackgate"
    record_dir.mkdir(parents=True, exist_ok=True)
    lines = [f"export {k}={shlex.quote(v)}" for k, v in sorted(variables.items())]
    lines.append(f"export STACKGATE_TOPOLOGY={shlex.quote(str(choice.topology))}")
    (record_dir / "env.sh").write_text("\n".join(lines) + "\n", encoding="utf-8")
