"""The env root is a shared, writable place (issue 23 section 4).

Attacks, each on real files and real links: `envs/<stack>/.build.lock` or `build.log` replaced
by a symlink (build truncated and wrote through it) or a hard link, a FIFO, a file of
another user; `envs/<stack>/current` pointing at another stack's env (`builder verify` and
`validators run` said OK). The link's target must be untouched and the command must say
what is there.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from stackgate.errors import EnvironmentProblem
from stackgate.owned_files import open_owned
from tests.builder.conftest import LocalStack
from tests.helpers.build_records import write_hashed_sample_env

ROOT = Path(__file__).resolve().parents[2]
VICTIM_TEXT = "precious: not the builder's to write\n"


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim.txt"
    victim.write_text(VICTIM_TEXT)
    return victim


def test_open_owned_refuses_what_is_not_a_plain_file_of_ours(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    link = tmp_path / "build.log"
    link.symlink_to(victim)
    with pytest.raises(EnvironmentProblem, match=r"a symlink \(to .*victim.txt\)"):
        open_owned(link, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    hard = tmp_path / ".build.lock"
    os.link(victim, hard)
    with pytest.raises(EnvironmentProblem, match="a hard link"):
        open_owned(hard, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
    fifo = tmp_path / "fifo.log"
    os.mkfifo(fifo)
    with pytest.raises(EnvironmentProblem, match="not a regular file"):
        open_owned(fifo, os.O_WRONLY | os.O_CREAT)  # O_NONBLOCK: no reader, no hang
    assert victim.read_text() == VICTIM_TEXT
    own = tmp_path / "own.log"
    own.write_text("old")
    os.close(open_owned(own, os.O_WRONLY | os.O_CREAT | os.O_TRUNC))
    assert own.read_text() == ""


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another uid needs root")
def test_open_owned_refuses_a_file_of_another_user(tmp_path: Path) -> None:
    folder = tmp_path / "stack"
    folder.mkdir()
    planted = folder / "build.log"
    planted.write_text("theirs")
    os.chown(planted, 12345, 12345)
    with pytest.raises(EnvironmentProblem, match="owned by uid 12345"):
        open_owned(planted, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    assert planted.read_text() == "theirs"


@pytest.mark.parametrize("name", [".build.lock", "build.log"])
def test_build_never_writes_through_a_planted_symlink(local_stack: LocalStack, tmp_path: Path,
                                                      name: str) -> None:
    assert local_stack.lock().returncode == 0
    victim = _victim(tmp_path)
    local_stack.stack_dir.mkdir(parents=True)
    (local_stack.stack_dir / name).symlink_to(victim)
    done = local_stack.build()
    assert done.returncode == 3, done.stderr
    assert f"{name}: a symlink" in done.stderr and "Traceback" not in done.stderr
    assert victim.read_text() == VICTIM_TEXT
    assert not (local_stack.stack_dir / "current").exists()


# -- `current` must belong to the stack -------------------------------------------------------


def _project(tmp_path: Path) -> dict[str, str]:
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    for name in ("cu128.toml", "cu130.toml", "rules.toml"):
        (stacks / name).write_bytes((ROOT / "stacks" / name).read_bytes())
    return {**os.environ, "STACKGATE_ROOT": str(tmp_path), "STACKGATE_STACKS_DIR": str(stacks),
            "STACKGATE_VENV_ROOT": str(tmp_path / "envs"), "NO_COLOR": "1",
            "STACKGATE_STATE_DIR": str(tmp_path / "state")}  # fmt: skip


def _run(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *argv], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300, check=False)  # fmt: skip


def _plant(tmp_path: Path, how: str) -> Path:
    """envs/cu128/current leading to cu130's env, as `how` says."""
    envs = tmp_path / "envs"
    other = write_hashed_sample_env(envs / "cu130", "cu130")  # envs/cu130/cu130-env
    stack_dir = envs / "cu128"
    stack_dir.mkdir(parents=True)
    current = stack_dir / "current"
    if how == "relative-out":
        current.symlink_to(Path("..") / "cu130" / other.name)
    elif how == "absolute":
        current.symlink_to(other)
    elif how == "renamed-copy":  # a folder named for cu128, holding cu130's env
        (stack_dir / "cu128-0123456789ab").symlink_to(other)  # a link in place of a folder
        current.symlink_to("cu128-0123456789ab")
    elif how == "moved-in":  # cu130's env moved under cu128's name
        other.rename(stack_dir / "cu128-0123456789ab")
        current.symlink_to("cu128-0123456789ab")
    elif how == "folder":
        other.rename(current)
    return current


@pytest.mark.parametrize("how", ["relative-out", "absolute", "renamed-copy", "moved-in", "folder"])
def test_current_leading_to_another_stacks_env_is_refused(tmp_path: Path, how: str) -> None:
    env = _project(tmp_path)
    _plant(tmp_path, how)
    verified = _run(env, "builder", "verify", "cu128")
    assert verified.returncode == 2, verified.stdout + verified.stderr
    assert "OK" not in verified.stderr and "current" in verified.stderr
    ran = _run(env, "validators", "run", "cu128", "--only", "static")
    assert ran.returncode == 2, ran.stdout + ran.stderr
    assert "current" in ran.stderr and "Traceback" not in ran.stderr


def test_current_of_the_stack_itself_still_verifies(tmp_path: Path) -> None:
    env = _project(tmp_path)
    own = write_hashed_sample_env(tmp_path / "envs" / "cu128", "cu128")
    (tmp_path / "envs" / "cu128" / "current").symlink_to(own.name)
    verified = _run(env, "builder", "verify", "cu128")
    assert verified.returncode == 0, verified.stderr
    assert "OK" in verified.stderr


def test_verify_names_the_stack_an_explicit_env_was_built_for(tmp_path: Path) -> None:
    env = _project(tmp_path)
    other = write_hashed_sample_env(tmp_path / "envs" / "cu130", "cu130")
    verified = _run(env, "builder", "verify", "cu128", "--env", str(other))
    assert verified.returncode == 2, verified.stderr
    assert "built for stack 'cu130', not 'cu128'" in verified.stderr
