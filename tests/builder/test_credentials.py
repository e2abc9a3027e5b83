"""Index credentials never reach a file or log the builder writes (issue 10.6), against a real
index on 127.0.0.1 that answers 401 without HTTP basic auth."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

from stackgate.cli import main_for
from stackgate.credentials import has_credentials, index_env_names, redact, strip_credentials
from tests.builder.conftest import LocalStack, builder_env
from tests.helpers.auth_index import auth_index

SECRET = "s3cret-7f1c2e"
ONLINE = {"UV_OFFLINE": ""}


def _files_holding(root: Path, needle: str) -> list[Path]:
    return [p for p in root.rglob("*")
            if p.is_file() and not p.is_symlink() and needle.encode() in p.read_bytes()]  # fmt: skip


def _no_secret(done: subprocess.CompletedProcess[str]) -> None:
    assert SECRET not in done.stdout and SECRET not in done.stderr


def test_index_map_credentials_reach_uv_and_no_file(local_stack: LocalStack) -> None:
    pypi_folder = Path(local_stack.pypi_url.removeprefix("file://")).parent
    with auth_index(pypi_folder, "alice", SECRET) as index:
        mapping = f"pypi={index.url_with_credentials()}"
        lock = local_stack.lock("--index-map", mapping, env=ONLINE)
        assert lock.returncode == 0, lock.stderr
        build = local_stack.build("--index-map", mapping, "--topology", "pcie", env=ONLINE)
        assert build.returncode == 0, build.stderr
        assert any(p.endswith(".whl") for p in index.authorized), index.authorized
    for done in (lock, build):
        _no_secret(done)
    assert (local_stack.stack_dir / "build.log").is_file()
    assert _files_holding(local_stack.root, SECRET) == []
    assert index.url in (local_stack.locks / "localstack" / "pyproject.toml").read_text()


def test_lock_and_build_pass_credentials_to_uv_and_leave_os_environ_alone(
    local_stack: LocalStack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In this process: the credentials reach uv through its child's environment only."""
    for key in ("UV_OFFLINE", "VIRTUAL_ENV"):
        monkeypatch.delenv(key, raising=False)
    for key, value in builder_env(ONLINE).items():
        monkeypatch.setenv(key, value)
    pypi_folder = Path(local_stack.pypi_url.removeprefix("file://")).parent
    with auth_index(pypi_folder, "alice", SECRET) as index:
        mapping = ["--index-map", f"pypi={index.url_with_credentials()}"]
        before = dict(os.environ)
        lock = [*local_stack.lock_args(), *mapping, "--no-compat"]
        assert main_for(["builder"], "python -m builder", "", [str(a) for a in lock]) == 0
        assert dict(os.environ) == before
        build = local_stack.build_args(*mapping, "--topology", "pcie")
        assert main_for(["builder"], "python -m builder", "", [str(a) for a in build]) == 0
        assert dict(os.environ) == before
    assert any(p.endswith(".whl") for p in index.authorized), index.authorized
    assert not any(SECRET in value for value in os.environ.values())


def test_credentials_in_the_manifest_are_refused_redacted(local_stack: LocalStack) -> None:
    text = local_stack.manifest.read_text().replace(
        f'url = "{local_stack.pypi_url}"', f'url = "https://bob:{SECRET}@pypi.example.invalid/simple"'
    )
    local_stack.manifest.write_text(text)
    done = local_stack.cli("check", local_stack.manifest)
    assert done.returncode == 2, done.stderr
    _no_secret(done)
    assert "indexes.pypi.url: 'https://***@pypi.example.invalid/simple' holds credentials" in (
        done.stderr
    )
    assert "UV_INDEX_PYPI_USERNAME" in done.stderr


def test_unreachable_index_is_named_without_its_credentials(local_stack: LocalStack) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    mapping = f"pypi=http://alice:{SECRET}@127.0.0.1:{port}/simple"
    done = local_stack.lock("--index-map", mapping, env=ONLINE)
    assert done.returncode == 3, done.stderr
    _no_secret(done)
    assert f"index 'pypi' at http://127.0.0.1:{port}/simple cannot be reached" in done.stderr
    assert _files_holding(local_stack.root, SECRET) == []


def test_what_counts_as_a_secret_and_how_it_is_redacted() -> None:
    assert not has_credentials("git+ssh://git@github.com/sgl-project/sglang.git")  # a login
    assert has_credentials("https://token@pypi.example/simple")
    assert has_credentials("git+https://user:pw@github.com/x/y.git")
    assert strip_credentials("https://al%40ice:p%3Aw@h.example:8443/simple") == (
        "https://h.example:8443/simple", "al@ice", "p:w")  # fmt: skip
    assert index_env_names("pytorch-cu130") == (
        "UV_INDEX_PYTORCH_CU130_USERNAME", "UV_INDEX_PYTORCH_CU130_PASSWORD")  # fmt: skip
    assert redact("GET https://u:pw@h/simple/x/ and git+https://tok@g/r") == (
        "GET https://***@h/simple/x/ and git+https://***@g/r")  # fmt: skip


def test_a_lock_written_with_credentials_by_an_older_version_is_refused(
    local_stack: LocalStack,
) -> None:
    assert local_stack.lock().returncode == 0
    pyproject = local_stack.locks / "localstack" / "pyproject.toml"
    old = pyproject.read_text()
    pyproject.write_text(old.replace(f'url = "{local_stack.pypi_url}"',
                                     f'url = "https://bob:{SECRET}@pypi.example.invalid/simple"'))  # fmt: skip
    assert old != pyproject.read_text()
    done = local_stack.build()
    assert done.returncode == 2, done.stderr
    _no_secret(done)
    assert "https://***@pypi.example.invalid/simple" in done.stderr
    assert not local_stack.stack_dir.exists() or not any(local_stack.stack_dir.glob("localstack-*"))
