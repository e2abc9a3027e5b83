"""The origin check's index listing runs beside the install (builder.venv.origin_ahead): uv
installs from its cache alone meanwhile, and a listing that answers wrong still refuses the
build with the same exit code and words, the `.partial` removed and nothing published.

Real parts: the builder tests' PEP 503 indexes served over HTTP on 127.0.0.1 and locked by real
uv; a first build fills uv's cache, then the index's page for numpy is changed on the server
(the file left out, another sha256, the page gone) and a second build into a fresh venv root
installs every wheel from the cache before the listing's answer stops it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.builder.conftest import LocalStack, write_manifest
from tests.helpers.hostile import HostileServer, hostile_server

ONLINE = {"UV_OFFLINE": ""}  # loopback only
NUMPY = "numpy-2.0.0-py3-none-any.whl"


@pytest.fixture
def served(local_stack: LocalStack) -> Iterator[tuple[LocalStack, HostileServer]]:
    with hostile_server(local_stack.root) as server:
        base = f"http://127.0.0.1:{server.server_port}"
        urls = {"pypi": f"{base}/idx-pypi/simple", "cuda": f"{base}/idx-cuda/simple",
                "kernel": f"{base}/idx-kernel/simple"}  # fmt: skip
        local_stack.manifest = write_manifest(local_stack.root / "stacks", "localstack", urls)
        lock = local_stack.lock(env=ONLINE)
        assert lock.returncode == 0, lock.stderr
        yield local_stack, server


def _unlisted(page: Path) -> None:
    text = page.read_text()
    assert NUMPY in text
    page.write_text(re.sub(r"<a [^>]*>" + re.escape(NUMPY) + r"</a><br/>", "", text))


def _other_sha256(page: Path) -> None:
    page.write_text(re.sub(r"#sha256=[0-9a-f]{64}", "#sha256=" + "0" * 64, page.read_text()))


def _gone(page: Path) -> None:
    page.unlink()


WRONG = {
    "file-not-listed": (_unlisted, 2, "is not a file index"),
    "another-sha256": (_other_sha256, 2, "the index lists sha256 " + "0" * 64),
    "page-gone": (_gone, 3, "answers HTTP 404"),
}


@pytest.mark.parametrize("answer", sorted(WRONG))
def test_a_listing_that_answers_wrong_after_a_cached_install_refuses_and_publishes_nothing(
    served: tuple[LocalStack, HostileServer], answer: str
) -> None:
    stack, server = served
    first = stack.build(env=ONLINE)
    assert first.returncode == 0, first.stderr
    assert "OK localstack built:" in first.stdout + first.stderr

    change, code, said = WRONG[answer]
    change(stack.root / "idx-pypi" / "simple" / "numpy" / "index.html")
    asked = len(server.requests)
    venvs = stack.root / "venvs-again"
    again = stack.cli(*stack.build_args(venvs=venvs), env=ONLINE)
    out = again.stdout + again.stderr
    assert again.returncode == code, out
    assert said in out and "numpy" in out, out
    assert "Traceback" not in out and "OK localstack built" not in out, out
    # uv installed every wheel from its cache (nothing downloaded) before the listing refused:
    # the refusal came from the check that ran beside the install ...
    assert not [p for p in server.requests[asked:] if p.endswith(".whl")]
    log = (venvs / "localstack" / "build.log").read_text()
    assert re.search(r"^Installed \d+ packages? in ", log, re.M), log
    # ... and the partial env is gone, nothing published, no `current`.
    left = sorted(p.name for p in (venvs / "localstack").iterdir())
    assert not [n for n in left if n.startswith("localstack-")], left
    assert not (venvs / "localstack" / "current").exists(), left
    # the first build's env is untouched and still current where it was built
    assert (stack.stack_dir / "current").is_symlink()


def test_an_uncached_lock_waits_for_the_listing_before_any_download(
    served: tuple[LocalStack, HostileServer], tmp_path: Path
) -> None:
    """An empty uv cache: the cache-only install fails, the build waits for the listing, and a
    file the index does not list is never fetched (exit 2, as when the check ran first)."""
    stack, server = served
    _unlisted(stack.root / "idx-pypi" / "simple" / "numpy" / "index.html")
    cache = {**ONLINE, "UV_CACHE_DIR": str(tmp_path / "empty-uv-cache")}
    asked = len(server.requests)  # `uv lock` fetched wheels for their metadata
    done = stack.build(env=cache)
    out = done.stdout + done.stderr
    assert done.returncode == 2, out
    assert "is not a file index" in out and "numpy" in out, out
    assert not [p for p in server.requests[asked:] if p.endswith(".whl")], server.requests
    assert not [p for p in stack.stack_dir.iterdir() if p.name.startswith("localstack-")]


def test_an_uncached_lock_the_index_lists_is_downloaded_once_the_listing_passed(
    served: tuple[LocalStack, HostileServer], tmp_path: Path
) -> None:
    stack, server = served
    cache = {**ONLINE, "UV_CACHE_DIR": str(tmp_path / "empty-uv-cache")}
    asked = len(server.requests)
    done = stack.build(env=cache)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "OK localstack built:" in out, out
    assert "uv's cache lacks files of this lock" in out, out
    assert [p for p in server.requests[asked:] if p.endswith(NUMPY)]
