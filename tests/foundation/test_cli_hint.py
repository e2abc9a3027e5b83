"""Hints print commands a newcomer can type where they are: the set-up's `.tools/bin/stackgate`
when it runs this checkout, else the README's `.tools/bin/uv run stackgate`, naming the project
outside the checkout (where `uv run stackgate` alone fails to spawn)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from stackgate import cli_hint

ROOT = Path(__file__).resolve().parents[2]


def test_a_shim_counts_only_when_it_runs_this_checkout(tmp_path: Path) -> None:
    mine = tmp_path / "stackgate"
    mine.write_text(
        f'exec uv run --quiet --frozen --project "{cli_hint.CHECKOUT}" stackgate "$@"\n'
    )
    other = tmp_path / "other"
    other.write_text('exec uv run --quiet --frozen --project "/elsewhere" stackgate "$@"\n')
    assert cli_hint._runs_this_checkout(mine)
    assert not cli_hint._runs_this_checkout(other)
    assert not cli_hint._runs_this_checkout(tmp_path / "missing")


def test_outside_the_checkout_the_hint_names_the_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkout without the set-up's shim (CI's clone has one: the shim is pointed at a
    missing file so this case runs everywhere)."""
    monkeypatch.setattr(cli_hint, "SHIM", tmp_path / "no-shim" / "stackgate")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no stackgate, no uv on PATH
    monkeypatch.chdir(tmp_path)
    hint = cli_hint.cli_command(["build", "my stack"])
    assert hint.endswith(
        f"run --project {shlex.quote(str(cli_hint.CHECKOUT))} stackgate build 'my stack'"
    )
    monkeypatch.chdir(ROOT)
    assert cli_hint.cli_command("build cu128") == ".tools/bin/uv run stackgate build cu128"


def test_a_shim_that_runs_this_checkout_is_the_hint_absolute_outside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shim = tmp_path / "bin" / "stackgate"
    shim.parent.mkdir()
    shim.write_text(
        f'exec uv run --quiet --frozen --project "{cli_hint.CHECKOUT}" stackgate "$@"\n'
    )
    shim.chmod(0o755)
    monkeypatch.setattr(cli_hint, "SHIM", shim)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.chdir(ROOT)
    assert cli_hint.cli_command("build cu128") == f"{shim} build cu128"
    monkeypatch.setenv("PATH", f"{shim.parent}:/usr/bin:/bin")
    assert cli_hint.cli_command("build cu128") == "stackgate build cu128"


def test_python_dash_m_stackgate_runs_the_cli(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "stackgate", "check", str(ROOT / "stacks" / "cu128.toml")],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("OK ")


def test_under_uv_run_a_hint_never_names_the_env_s_own_scripts() -> None:
    """`.tools/bin/uv run stackgate run cu128` (the README's form) said `build it first:
    stackgate build cu128`: `uv run` had put .venv/bin on PATH for its child only, and the
    user's shell has no `stackgate`. The hint's first word must be typeable in that shell."""
    users_path = "/usr/bin:/bin"
    env = {
        **os.environ,
        "UV_RUN_RECURSION_DEPTH": "1",  # what `uv run` sets for its child
        "PATH": f"{Path(sys.executable).parent}:{users_path}",
        "STACKGATE_VENV_ROOT": "/nonexistent/envs",
    }
    done = subprocess.run(
        [sys.executable, "-m", "stackgate", "run", "cu128"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    hint = next(line for line in done.stderr.splitlines() if "build it first:" in line)
    command = hint.split("build it first:", 1)[1].split("(or pass", 1)[0].strip()
    first = shlex.split(command)[0]
    if "/" in first:
        assert (ROOT / first).is_file(), hint
    else:
        assert shutil.which(first, path=users_path) is not None, hint
    assert command.endswith("stackgate build cu128"), hint
    assert done.stderr.strip().splitlines()[-1] == (
        "REFUSED run: bad input, nothing was changed (exit 2)"
    )
