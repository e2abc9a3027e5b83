"""The tree hash is a function of the lock and the profile, and a changed env is caught.

Properties on real uv installs of the smoke stack (real PyPI wheels): the same lock gives the
same hash from a cold uv cache (a fresh UV_CACHE_DIR) and a warm one, on two venv roots, and
before and after the env is used (imports writing __pycache__). Then the attacks of issue 10.3
on real envs from the local indexes: a replaced file, an edited env.sh, a FIFO dropped in.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.builder.conftest import PY_MINOR, ROOT, LocalStack, base_python, run_builder

ONLINE = {"UV_OFFLINE": ""}


def _site(env: Path) -> Path:
    return next(env.glob("lib/python3.*/site-packages"))


def _replace(path: Path, text: str) -> None:
    """Replace a file the way an editor or `pip install` does: a new file renamed over it
    (the old inode is a hard link into uv's cache and must stay as it is)."""
    tmp = path.with_name(path.name + ".new")
    tmp.write_text(text)
    tmp.replace(path)


def _use(env: Path, code: str) -> None:
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([env / "bin" / "python", "-c", code], check=True, env=environ, timeout=120)


@pytest.mark.network
def test_same_lock_same_hash_cold_warm_two_roots_and_after_use(tmp_path: Path) -> None:
    manifest = tmp_path / "stacks" / "smoke.toml"
    manifest.parent.mkdir()
    text = (ROOT / "tests/builder/data/smoke.toml").read_text()
    manifest.write_text(text.replace('python = "3.12"', f'python = "{PY_MINOR}"'))
    py = base_python()
    common = ["--locks-dir", str(tmp_path / "locks"), "--python", py, "--topology", "pcie"]
    assert run_builder(["lock", manifest, *common[:4]], env=ONLINE).returncode == 0
    cache = {"UV_CACHE_DIR": str(tmp_path / "fresh-uv-cache"), **ONLINE}
    builds = {}
    for name in ("cold", "warm"):  # the first fills the fresh cache, the second reuses it
        done = run_builder(["build", manifest, *common, "--venv-root", tmp_path / name,
                            "--json"], env=cache)
        assert done.returncode == 0, done.stderr
        builds[name] = json.loads(done.stdout)
    cold, warm = (Path(builds[n]["env"]) for n in ("cold", "warm"))
    assert cold.parent.parent != warm.parent.parent
    assert builds["cold"]["record"]["tree"] == builds["warm"]["record"]["tree"]

    # the build compiled byte-code; imports write their own where there is none (an env of
    # an older build): both leave the hash as it was
    assert list(_site(cold).glob("__pycache__/six.*.pyc"))
    for folder in _site(cold).rglob("__pycache__"):
        shutil.rmtree(folder)
    _use(cold, "import six, idna; assert idna.encode('bücher.de') == b'xn--bcher-kva.de'")
    assert list(_site(cold).glob("__pycache__/six.*.pyc")), "the import wrote no byte-code"
    assert list(_site(cold).glob("idna/__pycache__/*.pyc"))
    for env in (cold, warm):
        done = run_builder(["verify", manifest, "--venv-root", env.parent.parent, "--json"])
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["actual"] == builds["cold"]["record"]["tree"]["sha256"]


def _built(stack: LocalStack) -> Path:
    assert stack.lock().returncode == 0
    done = stack.build("--json", "--topology", "pcie")
    assert done.returncode == 0, done.stderr
    return Path(json.loads(done.stdout)["env"])


def _verify(stack: LocalStack) -> subprocess.CompletedProcess[str]:
    return stack.cli("verify", stack.manifest, "--venv-root", stack.venvs, "--json", timeout=60)


def test_replaced_file_is_named_and_reuse_refuses_or_repairs_beside_it(
    local_stack: LocalStack,
) -> None:
    env = _built(local_stack)
    done = _verify(local_stack)
    assert done.returncode == 0
    # piped: the verdict as words, never rich's markup printed literally ("[bold green]OK[/]")
    assert done.stderr.splitlines()[-1].startswith("OK "), done.stderr
    target = _site(env) / "torch" / "__init__.py"
    _replace(target, "raise ImportError('damaged')\n")

    done = _verify(local_stack)
    assert done.returncode == 1
    assert "CHANGED " in done.stderr and "[/]" not in done.stderr, done.stderr
    assert json.loads(done.stdout)["differing"] == [
        f"changed: lib/python{PY_MINOR}/site-packages/torch/__init__.py"
    ]
    refused = local_stack.build("--topology", "pcie")
    assert refused.returncode == 1
    assert "--repair" in refused.stderr and "torch/__init__.py" in refused.stderr
    assert (local_stack.stack_dir / "current").resolve() == env.resolve()

    repaired = local_stack.build("--topology", "pcie", "--repair", "--json")
    assert repaired.returncode == 0, repaired.stderr
    fresh = Path(json.loads(repaired.stdout)["env"])
    assert fresh.name == env.name + "-repair1"
    assert (local_stack.stack_dir / "current").resolve() == fresh.resolve()
    assert target.read_text() == "raise ImportError('damaged')\n"  # old one untouched
    assert "damaged" not in (_site(fresh) / "torch" / "__init__.py").read_text()
    assert _verify(local_stack).returncode == 0
    again = local_stack.build("--topology", "pcie", "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["env"] == str(fresh)


def test_edited_env_profile_script_is_caught(local_stack: LocalStack) -> None:
    env = _built(local_stack)
    script = env / "stackgate" / "env.sh"
    script.write_text(script.read_text() + "export LD_PRELOAD=/tmp/evil.so\n")
    done = _verify(local_stack)
    assert done.returncode == 1
    assert json.loads(done.stdout)["differing"] == ["changed: stackgate/env.sh"]


def test_fifo_and_sourceless_bytecode_in_the_env_are_caught_without_blocking(
    local_stack: LocalStack,
) -> None:
    env = _built(local_stack)
    os.mkfifo(_site(env) / "trap")
    (_site(env) / "sitecustomize.pyc").write_bytes(b"\x00" * 32)  # imported at start-up
    done = _verify(local_stack)  # 60 s timeout: opening the FIFO would block forever
    assert done.returncode == 1
    assert json.loads(done.stdout)["differing"] == [
        f"added: lib/python{PY_MINOR}/site-packages/sitecustomize.pyc",
        f"added: lib/python{PY_MINOR}/site-packages/trap",
    ]
