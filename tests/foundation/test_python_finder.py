"""The one interpreter finder (stackgate.python_finder) asks `uv python find` first, outside
any virtual environment, and falls back to PATH and pyenv where uv cannot answer (a pyenv shim
that points nowhere stops uv: it does on this project's machines). Real uv, real interpreters,
a PATH made for each case; the lockcheck's host interpreter comes from the same finder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.interpreter import PY_MINOR, base_python

FIND = (
    "import json, sys\n"
    "from stackgate.python_finder import find_python\n"
    "from stackgate.errors import EnvironmentProblem\n"
    "try:\n"
    "    i = find_python(sys.argv[1], download=False)\n"
    "    print(json.dumps({'path': str(i.path), 'by': i.found_by, 'version': i.version}))\n"
    "except EnvironmentProblem as exc:\n"
    "    print(json.dumps({'error': exc.message, 'details': exc.details}))\n"
)


def _find(tmp_path: Path, folder: Path, minor: str = PY_MINOR) -> dict[str, object]:
    import json

    outer = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    env = {**outer, "PATH": str(folder), "UV_PYTHON_DOWNLOADS": "never",
           "UV_PYTHON_INSTALL_DIR": str(tmp_path / "managed"), "UV_OFFLINE": "1"}  # fmt: skip
    done = subprocess.run([sys.executable, "-c", FIND, minor], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _bin(tmp_path: Path) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    return folder


def test_uv_answers_first_and_never_with_a_venv(tmp_path: Path) -> None:
    folder = _bin(tmp_path)
    (folder / f"python{PY_MINOR}").symlink_to(base_python())
    # A project .venv in the working folder: uv would offer it without --system --no-project.
    venv = tmp_path / ".venv"
    subprocess.run([base_python(), "-m", "venv", "--without-pip", str(venv)], check=True)
    found = _find(tmp_path, folder)
    assert found["by"] == "uv python find", found
    assert Path(str(found["path"])) == Path(base_python()).resolve()
    assert not str(found["path"]).startswith(str(venv))


def test_a_shim_that_points_nowhere_falls_back_past_uv(tmp_path: Path) -> None:
    folder = _bin(tmp_path)
    shim = folder / f"python{PY_MINOR}"
    shim.write_text("#!/bin/sh\necho 'pyenv: no such command' >&2\nexit 127\n")
    shim.chmod(0o755)
    found = _find(tmp_path, folder)
    assert "error" in found, found  # neither uv nor PATH nor pyenv (none here) gives one
    details = " | ".join(str(d) for d in found["details"])  # type: ignore[attr-defined]
    assert f"uv python find {PY_MINOR}: none it could run" in details
    assert f"PATH python{PY_MINOR} (not working)" in details


def test_a_wrong_minor_is_never_taken(tmp_path: Path) -> None:
    folder = _bin(tmp_path)
    (folder / "python3.99").symlink_to(base_python())  # says it is 3.99; runs as PY_MINOR
    found = _find(tmp_path, folder, "3.99")
    assert "error" in found, found


@pytest.mark.parametrize("same", [True, False])
def test_the_lockcheck_stand_in_is_this_interpreter_or_the_finders(same: bool) -> None:
    from validators.lockcheck.check import find_interpreter

    if same:
        assert find_interpreter(sys.version_info[:2]) == Path(sys.executable).resolve()
    else:
        assert find_interpreter((3, 99)) is None
