"""Wheelhouse downloads over real HTTP (a server on 127.0.0.1), hash-checked, resumable, and
an offline build from it; a file that changed on the server is refused."""

from __future__ import annotations

import functools
import http.server
import json
import threading
from collections.abc import Iterator

import pytest

from tests.builder.conftest import LocalStack, write_manifest
from tests.helpers.swap import racing
from tests.helpers.wheels import make_wheel


@pytest.fixture
def http_indexes(local_stack: LocalStack) -> Iterator[LocalStack]:
    """The same three indexes, served over HTTP; the manifest points at them."""
    handler = functools.partial(
        http.server.SimpleHTTPRequestHandler, directory=str(local_stack.root)
    )
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    urls = {
        "pypi": f"{base}/idx-pypi/simple",
        "cuda": f"{base}/idx-cuda/simple",
        "kernel": f"{base}/idx-kernel/simple",
    }
    local_stack.manifest = write_manifest(local_stack.root / "stacks", "localstack", urls)
    try:
        yield local_stack
    finally:
        server.shutdown()
        server.server_close()


ONLINE = {"UV_OFFLINE": ""}  # loopback only


def test_wheelhouse_over_http_then_offline_build(http_indexes: LocalStack) -> None:
    stack = http_indexes
    lock = stack.lock(env=ONLINE)
    assert lock.returncode == 0, lock.stderr
    house = stack.root / "house"
    args = ["wheelhouse", stack.manifest, "--locks-dir", stack.locks, "--to", house, "--json"]
    first = stack.cli(*args, env=ONLINE)
    assert first.returncode == 0, first.stderr
    out = json.loads(first.stdout)
    names = sorted(p.name for p in house.glob("*.whl"))
    assert "torch-2.9.1+cu130-py3-none-any.whl" in names
    assert not any("cu128" in n for n in names)  # only what the lock pins
    assert out["downloaded"] == out["files"] == len(names)
    again = json.loads(stack.cli(*args, env=ONLINE).stdout)
    assert again["downloaded"] == 0 and again["kept"] == out["files"]
    built = stack.build(
        "--wheelhouse", house, "--json", env={"UV_CACHE_DIR": str(stack.root / "cold-cache")}
    )
    assert built.returncode == 0, built.stderr
    assert json.loads(built.stdout)["record"]["packages"]["torch"] == "2.9.1+cu130"


def test_a_changed_file_on_the_server_is_refused(http_indexes: LocalStack) -> None:
    stack = http_indexes
    lock = stack.lock(env=ONLINE)
    assert lock.returncode == 0, lock.stderr
    served = stack.root / "idx-pypi" / "simple" / "numpy"
    evil = make_wheel(stack.root / "evil", "numpy", "2.0.0", files={"numpy/x.py": "EVIL = 1\n"})
    (served / evil.name).write_bytes(evil.read_bytes())
    house = stack.root / "house"
    done = stack.cli(
        "wheelhouse", stack.manifest, "--locks-dir", stack.locks, "--to", house, env=ONLINE
    )
    assert done.returncode == 3, done.stderr
    assert "hash mismatch for numpy-2.0.0-py3-none-any.whl" in done.stderr
    assert not (house / evil.name).exists() and not list(house.glob("*.part"))


def test_a_wheelhouse_folder_swapped_for_a_symlink_mid_download_writes_nothing_there(
    http_indexes: LocalStack,
) -> None:
    """A real racer swaps the wheelhouse folder for a link to a victim folder while real
    downloads run (tests/helpers/swap.py); every file is written relative to the folder
    opened once, so nothing ever lands in the victim (a run that opened the link is refused)."""
    stack = http_indexes
    lock = stack.lock(env=ONLINE)
    assert lock.returncode == 0, lock.stderr
    house = stack.root / "house"
    victim = stack.root / "victim"
    victim.mkdir()
    args = ["wheelhouse", stack.manifest, "--locks-dir", stack.locks, "--to", house, "--json"]
    assert stack.cli(*args, env=ONLINE).returncode == 0
    codes = []
    with racing(house, victim) as racer:
        for _ in range(6):
            for whl in house.glob("*") if house.is_dir() and not house.is_symlink() else []:
                whl.unlink(missing_ok=True)
            codes.append(stack.cli(*args, env=ONLINE).returncode)
    assert racer.swaps > 0 and set(codes) <= {0, 3}, codes
    assert list(victim.iterdir()) == []
