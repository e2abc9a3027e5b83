"""Real kills and real concurrency: a SIGKILLed build at any step leaves the previous env and
`current` untouched, at most a .partial that the next build removes; builds serialize."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from stackgate.build_record import read_build_record as read_record
from stackgate.envtree import compute_tree
from tests.builder.conftest import LocalStack, popen_builder
from tests.helpers.small_disk import small_tmpfs

STEPS = [
    "sources",
    "venv",
    "install",
    "clashes",
    "profile",
    "verify",
    "bytecode",
    "hash",
    "record",
    "publish",
    "switch",
]


def _wait_for_line(popen: subprocess.Popen[str], needle: str, timeout: float = 120) -> None:
    assert popen.stderr is not None
    deadline = time.monotonic() + timeout
    seen: list[str] = []
    while time.monotonic() < deadline:
        line = popen.stderr.readline()
        if not line:
            if popen.poll() is not None:
                break
            continue
        seen.append(line)
        if needle in line:
            return
    raise AssertionError(f"never saw {needle!r}; rc={popen.poll()} stderr:\n{''.join(seen)}")


def _first_env(stack: LocalStack) -> Path:
    assert stack.lock().returncode == 0
    done = stack.build("--json")
    assert done.returncode == 0, done.stderr
    return Path(json.loads(done.stdout)["env"])


def _move_to_second_lock(stack: LocalStack) -> None:
    text = stack.manifest.read_text().replace("0.6.4", "0.6.3")
    stack.manifest.write_text(text)
    assert stack.lock().returncode == 0


def _assert_intact(stack: LocalStack, env: Path) -> None:
    record = read_record(env)
    assert record is not None
    assert compute_tree(env, own_paths=(env,)).sha256 == record.tree.sha256
    assert (stack.stack_dir / "current").resolve() == env.resolve()


@pytest.mark.slow
@pytest.mark.parametrize("step", STEPS)
def test_sigkill_at_each_step_keeps_the_previous_env(local_stack: LocalStack, step: str) -> None:
    first = _first_env(local_stack)
    _move_to_second_lock(local_stack)
    popen = popen_builder(local_stack.build_args(), env={"STACKGATE_TEST_HOLD_AT": step})
    _wait_for_line(popen, f"holding before {step}")
    os.killpg(popen.pid, signal.SIGKILL)
    popen.communicate(timeout=120)
    _assert_intact(local_stack, first)
    envs = {p.name for p in local_stack.stack_dir.glob("localstack-*") if p.is_dir()}
    finished = {name for name in envs if not name.endswith(".partial")}
    # Before the rename only the first env is finished; after it, the new one is complete.
    if STEPS.index(step) <= STEPS.index("publish"):
        assert finished == {first.name}
    else:
        assert len(finished) == 2 and not envs - finished
    # The next build cleans up and finishes; the first env is still there, unchanged.
    done = local_stack.build("--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert not list(local_stack.stack_dir.glob("*.partial"))
    assert Path(out["env"]) != first
    assert (local_stack.stack_dir / "current").resolve() == Path(out["env"]).resolve()
    record = read_record(first)
    assert record is not None
    assert compute_tree(first, own_paths=(first,)).sha256 == record.tree.sha256
    if step == "switch":
        # Killed after the rename: the finished env was reused, not rebuilt.
        assert out["reused"] is True


@pytest.mark.slow
def test_sigkill_of_the_builder_while_uv_installs(local_stack: LocalStack) -> None:
    """Only the builder dies (as under the OOM killer); the orphaned uv keeps the build lock
    until it exits, so the next build waits for it instead of deleting its folder."""
    first = _first_env(local_stack)
    _move_to_second_lock(local_stack)
    popen = popen_builder(local_stack.build_args(), env={"UV_CONCURRENT_INSTALLS": "1"})
    deadline = time.monotonic() + 120
    uv_child = None
    while time.monotonic() < deadline and uv_child is None and popen.poll() is None:
        for child in psutil.Process(popen.pid).children(recursive=True):
            try:
                if "sync" in child.cmdline():
                    uv_child = child
            except psutil.Error:
                continue
    if uv_child is None:
        pytest.fail(f"uv sync never seen running (build rc={popen.poll()})")
    os.kill(popen.pid, signal.SIGKILL)
    popen.communicate(timeout=120)
    _assert_intact(local_stack, first)
    done = local_stack.build("--json")
    assert done.returncode == 0, done.stderr
    assert not list(local_stack.stack_dir.glob("*.partial"))
    _assert_intact(local_stack, Path(json.loads(done.stdout)["env"]))


@pytest.mark.slow
def test_two_builds_serialize_on_the_lock(local_stack: LocalStack) -> None:
    assert local_stack.lock().returncode == 0
    holder = popen_builder(local_stack.build_args(), env={"STACKGATE_TEST_HOLD_AT": "install"})
    _wait_for_line(holder, "holding before install")
    waiter = popen_builder(local_stack.build_args("--json"))
    # The waiter cannot pass the lock while the holder sits inside it; it must still be
    # running once it has reached the lock.
    _wait_for_line(waiter, "done topology", timeout=60)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        assert waiter.poll() is None, "the second build finished while the first held the lock"
        time.sleep(0.2)
    os.killpg(holder.pid, signal.SIGKILL)
    holder.communicate(timeout=120)
    out, err = waiter.communicate(timeout=300)
    assert waiter.returncode == 0, err
    result = json.loads(out)
    assert result["record"]["packages"]["torch"] == "2.9.1+cu130"
    assert any(p.name.endswith(".partial") for p in map(Path, result["removed_partials"]))
    assert not list(local_stack.stack_dir.glob("*.partial"))


@pytest.mark.slow
def test_concurrent_builds_of_one_lock_make_one_env(local_stack: LocalStack) -> None:
    assert local_stack.lock().returncode == 0
    procs = [popen_builder(local_stack.build_args("--json")) for _ in range(3)]
    outs = [json.loads(p.communicate(timeout=300)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert len({o["env"] for o in outs}) == 1
    assert sum(1 for o in outs if not o["reused"]) == 1
    envs = [p for p in local_stack.stack_dir.iterdir() if p.name.startswith("localstack-")]
    assert len(envs) == 1


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 3 MiB filesystem (tmpfs) to fill up; skips where mounting is not allowed."""
    with small_tmpfs(tmp_path, size_mb=3) as mount_point:
        yield mount_point


@pytest.mark.slow
def test_disk_full_exits_3_and_keeps_the_previous_env(
    local_stack: LocalStack, small_disk: Path
) -> None:
    from tests.helpers.wheels import make_index, make_wheel

    venvs = small_disk / "envs"
    assert local_stack.lock().returncode == 0
    first = local_stack.cli(*local_stack.build_args("--json", venvs=venvs))
    assert first.returncode == 0, first.stderr
    first_env = Path(json.loads(first.stdout)["env"])
    # The next lock adds a package bigger than the space left once unpacked, but small as a
    # wheel (zeros deflate ~1000x), so the check before the build (which counts each local
    # wheel by its file) lets it through and the disk fills mid-install.
    blob = bytes(4 * 1024 * 1024)
    big = make_wheel(
        local_stack.root / "big", "bigdata", "1.0", files={"bigdata/blob.bin": blob}, deflate=True
    )
    assert big.stat().st_size < 64 * 1024
    make_index(local_stack.root / "idx-pypi", [big])
    text = local_stack.manifest.read_text()
    local_stack.manifest.write_text(
        text.replace("[build]", '[packages.bigdata]\nversion = "1.0"\nindex = "pypi"\n\n[build]')
    )
    assert local_stack.lock().returncode == 0
    done = local_stack.cli(*local_stack.build_args(venvs=venvs))
    assert done.returncode == 3, done.stderr
    assert "disk full" in done.stderr
    record = read_record(first_env)
    assert record is not None
    assert compute_tree(first_env, own_paths=(first_env,)).sha256 == record.tree.sha256
    assert (venvs / "localstack" / "current").resolve() == first_env.resolve()
    assert not list((venvs / "localstack").glob("*.partial"))


@pytest.mark.slow
def test_too_small_a_disk_is_refused_before_the_build(
    local_stack: LocalStack, small_disk: Path
) -> None:
    """A lock whose wheels unpack to more than the venv root's free space: exit 3 before any
    .partial exists, saying how much is needed, how much is free and to use --venv-root."""
    import random

    from tests.helpers.wheels import make_index, make_wheel

    venvs = small_disk / "envs"
    blob = random.Random(0).randbytes(4 * 1024 * 1024)  # incompressible: a 4 MiB wheel
    big = make_wheel(local_stack.root / "big", "bigdata", "1.0", files={"bigdata/blob.bin": blob})
    make_index(local_stack.root / "idx-pypi", [big])
    text = local_stack.manifest.read_text()
    local_stack.manifest.write_text(
        text.replace("[build]", '[packages.bigdata]\nversion = "1.0"\nindex = "pypi"\n\n[build]')
    )
    assert local_stack.lock().returncode == 0
    done = local_stack.cli(*local_stack.build_args(venvs=venvs))
    assert done.returncode == 3, done.stderr
    lines = done.stderr.strip().splitlines()
    assert "not enough free disk to build localstack" in done.stderr, done.stderr
    assert "MiB needed" in done.stderr and "--venv-root DIR" in done.stderr
    # The lock names local-index wheels by `path` with no size: each is counted by its file.
    counted = re.search(r"the lock's wheels, ([0-9.]+) MiB, unpacked", done.stderr)
    assert counted is not None, done.stderr
    assert float(counted.group(1)) >= big.stat().st_size / 2**20 - 0.05, done.stderr
    assert "size unknown" not in done.stderr, done.stderr
    assert lines[-1].startswith("REFUSED"), lines[-1]
    assert not list((venvs / "localstack").glob("*.partial"))
