"""`builder image`: every argument is checked before an engine is asked or anything is built.

The engine here is a Docker daemon that does not exist (a socket path with nothing behind
it): reaching the engine is exit 3, so a bad argument that gets past the checks shows up as
exit 3 instead of 2. The old code checked --output and --tag only after the whole build
(export/tag are its last steps) and silently ignored a --source for no source package."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.images.conftest import TinyStack

ROOT = Path(__file__).resolve().parents[2]


def _image(stack: TinyStack, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = [
        sys.executable, "-m", "builder", "image", str(stack.loaded.path),
        "--engine", "docker", "--docker-host", f"unix://{tmp_path / 'no-daemon.sock'}",
        "--lock-dir", str(stack.lock.folder), "--no-tool",
        # No build happens: this only spares a CPython pin for the test's Python X.Y.
        "--base-python", "/usr/local/bin/python3", *extra,
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=ROOT,
                          check=False)


def test_an_engine_that_is_not_there_is_exit_3(tiny_stack: TinyStack, tmp_path: Path) -> None:
    """The yardstick for the cases below: good arguments reach the engine."""
    done = _image(tiny_stack, tmp_path, "--tag", "localhost:5000/stackgate-tiny:lock-1",
                  "--output", f"oci-archive:{tmp_path / 'new' / 'tiny.tar'}")
    assert done.returncode == 3, done.stderr
    assert "no daemon answers" in done.stderr
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--tag", "Stackgate Tiny!"], "--tag 'Stackgate Tiny!': not an image name"),
        (["--tag", "localhost/UPPER:x"], "not an image name"),
        (["--tag", "localhost/tiny:" + "x" * 200], "not an image name"),
        (["--output", "oci-archive:{tmp}"], "is a folder"),
        (["--output", "oci-archive:{tmp}/a-file/tiny.tar"], "is not a folder"),
        # moved into place or unlinked first: a device there (/dev/null as root) was replaced
        (["--output", "oci-archive:{tmp}/fifo"], "exists and is not a regular file"),
        (["--output", "oci-archive:"], "no PATH"),
        (["--source", "nosuch={tmp}"], "--source nosuch: not a package built from source"),
    ],
)
def test_bad_arguments_are_exit_2_before_the_engine(
    tiny_stack: TinyStack, tmp_path: Path, extra: list[str], words: str
) -> None:
    (tmp_path / "a-file").write_text("")
    os.mkfifo(tmp_path / "fifo")
    before = sorted(tmp_path.rglob("*"))
    done = _image(tiny_stack, tmp_path, *[e.format(tmp=tmp_path) for e in extra])
    assert done.returncode == 2, done.stderr
    assert words in done.stderr, done.stderr
    assert sorted(tmp_path.rglob("*")) == before


def test_render_into_a_folder_that_is_not_empty_is_refused(
    tiny_stack: TinyStack, tmp_path: Path
) -> None:
    target = tmp_path / "ctx"
    target.mkdir()
    (target / "keep.txt").write_text("mine")
    done = _image(tiny_stack, tmp_path, "--render", str(target))
    assert done.returncode == 2 and "not empty" in done.stderr, done.stderr
    assert [p.name for p in target.iterdir()] == ["keep.txt"]
