"""More variants of issue 10.6 (credentials never reach an output): a password holding `@`
(urlsplit splits the user info at the LAST `@`, a redaction that stops at the first one
leaves the tail of the password), the same through --debug and --json, and a credential URL
in the UV_INDEX_URL variable uv reads itself. Real uv against a port nothing listens on."""

from __future__ import annotations

import socket

import pytest

from stackgate.credentials import has_credentials, redact, strip_credentials
from tests.builder.conftest import LocalStack

SECRET_TAIL = "tail-9d2b"
PASSWORD = f"p@ss:{SECRET_TAIL}"
ONLINE = {"UV_OFFLINE": ""}


def _dead_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_redact_hides_a_password_that_holds_an_at_sign() -> None:
    url = f"https://alice:{PASSWORD}@h.example/simple"
    assert strip_credentials(url)[2] == PASSWORD  # what uv and urllib take as the password
    shown = redact(f"GET {url} failed; also git+https://tok@en@g.example/r and https://h/x@y")
    assert SECRET_TAIL not in shown and "en@g" not in shown, shown
    assert "https://***@h.example/simple" in shown
    assert "https://h/x@y" in shown  # an @ after the host is not user info


@pytest.mark.parametrize("extra", [(), ("--debug",), ("--json",)], ids=["plain", "debug", "json"])
def test_index_map_password_with_at_never_printed(
    local_stack: LocalStack, extra: tuple[str, ...]
) -> None:
    mapping = f"pypi=http://alice:{PASSWORD}@127.0.0.1:{_dead_port()}/simple"
    done = local_stack.cli("lock", local_stack.manifest, "--locks-dir", local_stack.locks,
                           "--index-map", mapping, *extra, env=ONLINE)  # fmt: skip
    assert done.returncode == 3, done.stderr
    assert SECRET_TAIL not in done.stdout + done.stderr, done.stdout + done.stderr
    for path in local_stack.root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert SECRET_TAIL.encode() not in path.read_bytes(), path


def test_credentials_in_uv_index_url_are_not_printed(local_stack: LocalStack) -> None:
    url = f"http://alice:{PASSWORD}@127.0.0.1:{_dead_port()}/simple"
    done = local_stack.cli("lock", local_stack.manifest, "--locks-dir", local_stack.locks,
                           env={**ONLINE, "UV_INDEX_URL": url, "UV_DEFAULT_INDEX": url})  # fmt: skip
    assert SECRET_TAIL not in done.stdout + done.stderr, done.stdout + done.stderr
    for path in local_stack.root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert SECRET_TAIL.encode() not in path.read_bytes(), path


QUERY_SECRET = "qtok-51c0"


def test_a_token_in_the_query_string_is_a_credential_and_redacted() -> None:
    url = f"https://gitlab.example/api/v4/projects/7/packages/pypi/simple?private_token={QUERY_SECRET}"
    assert has_credentials(url)
    assert has_credentials(f"https://h.example/simple?x=1&access_key={QUERY_SECRET}")
    assert not has_credentials("https://h.example/simple?page=2")
    shown = redact(f"GET {url} failed")
    assert QUERY_SECRET not in shown and "private_token=***" in shown, shown


def test_a_manifest_index_with_a_query_token_is_refused_redacted(local_stack: LocalStack) -> None:
    text = local_stack.manifest.read_text().replace(
        f'url = "{local_stack.pypi_url}"',
        f'url = "https://pypi.example.invalid/simple?token={QUERY_SECRET}"',
    )
    local_stack.manifest.write_text(text)
    done = local_stack.cli("check", local_stack.manifest)
    assert done.returncode == 2, done.stderr
    assert QUERY_SECRET not in done.stdout + done.stderr
    assert "holds credentials" in done.stderr


def test_index_map_with_a_query_token_is_refused(local_stack: LocalStack) -> None:
    mapping = f"pypi=http://127.0.0.1:{_dead_port()}/simple?token={QUERY_SECRET}"
    done = local_stack.lock("--index-map", mapping, env=ONLINE)
    assert done.returncode == 2, done.stderr
    assert QUERY_SECRET not in done.stdout + done.stderr
    for path in local_stack.root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert QUERY_SECRET.encode() not in path.read_bytes(), path
