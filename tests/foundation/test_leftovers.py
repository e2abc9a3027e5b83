"""A test's processes are torn down after it, timed out or not, and a failed child's stderr is
shown (tests/helpers/leftovers.py, wired in tests/conftest.py). Run through a real pytest on a
test file written here, with the suite's conftest as its plugin."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

INNER = '''
import subprocess, sys, time
from pathlib import Path

import pytest

# A CLI child that launches a server and is then killed by subprocess.run's timeout (as a
# pytest timeout's exception would): the server is orphaned, out of any process tree walk.
CHILD = (
    "import subprocess, sys, time; "
    "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
    "open(sys.argv[1], 'w').write(str(p.pid)); time.sleep(600)"
)


@pytest.mark.timeout(20)
def test_server_orphaned_by_a_timeout(tmp_path_factory):
    pidfile = Path(sys.argv[-1]).parent / "server.pid"
    subprocess.run([sys.executable, "-c", CHILD, str(pidfile)], timeout=3)


def test_a_child_that_fails():
    subprocess.run(
        [sys.executable, "-c", "import sys; sys.stderr.write('uv: No space left on device\\\\n'); sys.exit(1)"],
        check=True, capture_output=True, text=True,
    )
'''


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_an_orphaned_server_is_torn_down_and_a_childs_stderr_is_shown(tmp_path: Path) -> None:
    test_file = tmp_path / "test_inner.py"
    test_file.write_text(INNER)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:randomly",
         "-p", "no:cacheprovider", "-n", "0", "-q", str(test_file)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
        env={k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"},
    )  # fmt: skip
    assert done.returncode == 1, done.stdout[-3000:]
    assert "2 failed" in done.stdout, done.stdout[-3000:]
    # the CalledProcessError's captured stderr, under its own heading
    assert "child process output" in done.stdout
    assert "uv: No space left on device" in done.stdout
    # a short traceback: not the source of CPython's subprocess.run (its docstring's first line)
    assert "Run command with arguments and return a CompletedProcess instance" not in done.stdout
    pid = int((tmp_path / "server.pid").read_text())
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    alive = _alive(pid)
    if alive:
        os.kill(pid, 9)
    assert not alive, f"the orphaned server {pid} outlived its test"
