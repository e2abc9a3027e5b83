"""Real PyPI, end to end: the committed cu128 lock reproduces, and a small real stack locks,
builds, goes into a wheelhouse and builds again offline from it with the same tree hash."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.builder.conftest import PY_MINOR, ROOT, base_python, run_builder

pytestmark = pytest.mark.network
ONLINE = {"UV_OFFLINE": ""}


def test_lock_cu128_reproduces_the_committed_lock(tmp_path: Path) -> None:
    committed = ROOT / "stacks" / "locks" / "cu128"
    shutil.copytree(committed, tmp_path / "cu128")
    done = run_builder(["lock", "cu128", "--locks-dir", tmp_path, "--json"], env=ONLINE)
    if done.returncode == 3 and "interpreter" in done.stderr:
        pytest.skip(f"no Python 3.12 here: {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "cu128" / "uv.lock").read_bytes() == (committed / "uv.lock").read_bytes()
    assert (tmp_path / "cu128" / "pyproject.toml").read_text() == (
        committed / "pyproject.toml").read_text()


@pytest.mark.slow
def test_small_real_stack_lock_build_wheelhouse_offline(tmp_path: Path) -> None:
    text = (ROOT / "tests/builder/data/smoke.toml").read_text()
    manifest = tmp_path / "stacks" / "smoke.toml"
    manifest.parent.mkdir()
    manifest.write_text(text.replace('python = "3.12"', f'python = "{PY_MINOR}"'))
    py = base_python()
    common = ["--locks-dir", str(tmp_path / "locks")]
    lock = run_builder(["lock", manifest, *common, "--python", py], env=ONLINE)
    assert lock.returncode == 0, lock.stderr
    online = run_builder(["build", manifest, *common, "--venv-root", tmp_path / "a", "--python",
                          py, "--json"], env=ONLINE)
    assert online.returncode == 0, online.stderr
    house = tmp_path / "wheelhouse"
    wh = run_builder(["wheelhouse", manifest, *common, "--to", house, "--json"], env=ONLINE)
    assert wh.returncode == 0, wh.stderr
    assert json.loads(wh.stdout)["files"] == 2
    offline = run_builder(["build", manifest, *common, "--venv-root", tmp_path / "b", "--python",
                           py, "--wheelhouse", house, "--json"],
                          env={"UV_CACHE_DIR": str(tmp_path / "empty-cache")})
    assert offline.returncode == 0, offline.stderr
    a, b = json.loads(online.stdout)["record"], json.loads(offline.stdout)["record"]
    assert b["offline"] is True
    assert a["tree"]["sha256"] == b["tree"]["sha256"]
    assert a["packages"] == b["packages"] == {"idna": "3.10", "six": "1.17.0"}
