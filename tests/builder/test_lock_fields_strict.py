"""A uv.lock whose fields have the wrong TOML type is bad input (issue 23 §5).

`version = "1"` was coerced to 1 by stackgate's reader, so `build` went on and uv refused the
lock (exit 3, an "environment problem"), and `wheelhouse` started downloading. TOML's types
are exact and uv writes them exactly: a string where uv writes an integer is not a lock uv
wrote. Each case is the real cu128 lock with one field changed, read by the real commands.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.builder.conftest import builder_env

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "stacks" / "locks" / "cu128"

CASES = {
    "version as a string": (r'^version = 1$', 'version = "1"', "version"),
    "version zero": (r'^version = 1$', "version = 0", "version"),
    "a wheel size as a string": (r'(size = )(\d+)', r'\1"\2"', "size"),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("command", ["build", "wheelhouse"])
def test_a_mistyped_lock_field_is_exit_2_naming_it(tmp_path: Path, name: str, command: str
                                                   ) -> None:  # fmt: skip
    pattern, replacement, field = CASES[name]
    locks = tmp_path / "locks"
    (locks / "cu128").mkdir(parents=True)
    (locks / "cu128" / "pyproject.toml").write_bytes((LOCK / "pyproject.toml").read_bytes())
    text = (LOCK / "uv.lock").read_text()
    changed = re.sub(pattern, replacement, text, count=1, flags=re.M)
    assert changed != text
    (locks / "cu128" / "uv.lock").write_text(changed)
    where = ["--venv-root", str(tmp_path / "envs")] if command == "build" else [
        "--to", str(tmp_path / "wheels")]
    done = subprocess.run(
        [sys.executable, "-m", "builder", command, "cu128", "--locks-dir", str(locks), *where],
        cwd=ROOT, env=builder_env(), capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "not a uv.lock stackgate can read" in done.stderr and field in done.stderr
    assert not (tmp_path / "envs" / "cu128").exists() or not any(
        (tmp_path / "envs" / "cu128").glob("cu128-*"))
    assert not any((tmp_path / "wheels").glob("*")) if (tmp_path / "wheels").exists() else True
