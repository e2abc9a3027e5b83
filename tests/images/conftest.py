"""Fixtures for image tests: a tiny stack locked against a real index on 127.0.0.1, and a
buildah store of the session's own holding a local base image and a local uv image."""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from builder.lock.resolve import run_lock
from stackgate.containers.base import KEEP_ENV
from stackgate.containers.buildah import StorageConfig
from stackgate.layout import LockFiles
from stackgate.manifest.loading import LoadedStack, load_stack
from stackgate.python_finder import Interpreter
from tests.helpers.interpreter import PY_MINOR
from tests.helpers.localbase import LocalImage, make_base_image, make_uv_image
from tests.helpers.range_server import running
from tests.helpers.tiny_image import TINY_MANIFEST, QuietHandler
from tests.helpers.wheels import make_index, make_wheel


@pytest.fixture(scope="session")
def wheel_index(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A PEP 503 index served over HTTP on 127.0.0.1 (a flat local folder would make uv write
    an install timestamp, uv_cache.json, into each dist-info: not reproducible)."""
    root = tmp_path_factory.mktemp("index")
    wheels = [
        make_wheel(root / "wheels", "tinyapp", "1.0", requires=["tinydep>=1"]),
        make_wheel(root / "wheels", "tinydep", "2.0"),
    ]
    make_index(root, wheels)
    handler = functools.partial(QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    with running(server):
        yield f"http://127.0.0.1:{server.server_address[1]}/simple"


@dataclass(frozen=True)
class TinyStack:
    loaded: LoadedStack
    lock: LockFiles


@pytest.fixture(scope="session")
def tiny_stack(tmp_path_factory: pytest.TempPathFactory, wheel_index: str) -> TinyStack:
    """The tiny manifest, locked by the builder's own lock code against the local index."""
    folder = tmp_path_factory.mktemp("stack")
    path = folder / "tiny.toml"
    path.write_text(TINY_MANIFEST.format(python=PY_MINOR, index=wheel_index))
    loaded = load_stack(path)
    files = LockFiles(folder / "locks" / "tiny")
    python = Interpreter(path=Path(sys.executable), version=".".join(map(str, sys.version_info[:3])), found_by="--python")
    run_lock(loaded, files, python, index_map={})
    return TinyStack(loaded=loaded, lock=files)


@dataclass(frozen=True)
class Store:
    path: Path
    config: StorageConfig
    base: LocalImage
    uv: LocalImage

    def cli_args(self) -> list[str]:
        return ["--storage-root", str(self.path), "--storage-driver", "vfs"]

    def global_args(self) -> list[str]:
        return self.config.global_args()


@pytest.fixture(scope="session")
def buildah_store() -> Iterator[Store]:
    """A vfs store of the session's own, with the local base and uv images committed in it.

    Not under pytest's basetemp: other pytest sessions on the machine rotate those folders,
    and a store deleted under a running build fails in confusing ways.
    """
    path = Path(tempfile.mkdtemp(prefix="stackgate-test-store-"))
    try:
        base = make_base_image(path, path / "work")
        uv = make_uv_image(path, path / "work")
        config = StorageConfig(root=path / "root", runroot=path / "run", storage_driver="vfs")
        yield Store(path=path, config=config, base=base, uv=uv)
    finally:
        if os.environ.get(KEEP_ENV, "") in ("", "0"):
            subprocess.run(["buildah", *_global(path), "rm", "--all"], capture_output=True, check=False)
            subprocess.run(["buildah", *_global(path), "rmi", "--all", "--force"], capture_output=True, check=False)
            shutil.rmtree(path, ignore_errors=True)


def _global(path: Path) -> list[str]:
    return ["--root", str(path / "root"), "--runroot", str(path / "run"), "--storage-driver", "vfs"]
