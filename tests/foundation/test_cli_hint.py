"""Hints print commands a newcomer can type where they are: the set-up's `.tools/bin/stackgate`
when it runs this checkout, else the README's `.tools/bin/uv run stackgate`, naming the project
outside the checkout (where `uv run stackgate` alone fails to spawn)."""

from __future__ import annotations

import shlex
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


@pytest.mark.skipif(
    cli_hint._runs_this_checkout(cli_hint.CHECKOUT / cli_hint.SHIM),
    reason="this checkout has its own .tools/bin/stackgate: hints use it",
)
def test_outside_the_checkout_the_hint_names_the_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no stackgate, no uv on PATH
    monkeypatch.chdir(tmp_path)
    hint = cli_hint.cli_command(["build", "my stack"])
    assert hint.endswith(
        f"run --project {shlex.quote(str(cli_hint.CHECKOUT))} stackgate build 'my stack'"
    )
    monkeypatch.chdir(ROOT)
    assert cli_hint.cli_command("build cu128") == ".tools/bin/uv run stackgate build cu128"


def test_python_dash_m_stackgate_runs_the_cli(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "stackgate", "check", str(ROOT / "stacks" / "cu128.toml")],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("OK ")
