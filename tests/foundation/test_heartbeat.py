"""The suite is never silent for long (tests/helpers/heartbeat.py): a real pytest run with a
test that sleeps past the interval prints which test is running and for how long."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.heartbeat import Heartbeat

ROOT = Path(__file__).resolve().parents[2]


def test_a_silent_interval_names_the_running_tests_longest_first() -> None:
    lines: list[str] = []
    beat = Heartbeat(lines.append, interval_s=15)
    start = beat._started
    beat.pytest_runtest_logstart("tests/a.py::test_long", None)
    beat._running["tests/a.py::test_long"] = start  # started with the session
    beat.pytest_runtest_logstart("tests/b.py::test_short", None)
    beat._running["tests/b.py::test_short"] = start + 100
    assert beat.line(start + 10) is None  # within the interval: quiet
    text = beat.line(start + 200)
    assert text == (
        "[3m20s since start, 0 test(s) finished] still running: "
        "tests/a.py::test_long (3m20s), tests/b.py::test_short (1m40s)"
    )
    assert beat.line(start + 201) is None  # it counts as output itself
    beat.pytest_runtest_logfinish("tests/a.py::test_long", None)
    assert beat.line(beat._last_output + 16) is not None


def test_a_real_run_says_what_is_running(tmp_path: Path) -> None:
    test_file = tmp_path / "test_slow.py"
    test_file.write_text(
        "import time\n\n\ndef test_sleeps():\n"
        "    import tests.helpers.heartbeat as hb\n"
        "    time.sleep(hb.INTERVAL_S * 1.5)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    done = subprocess.run(
        [sys.executable, "-c",
         "import sys, pytest, tests.helpers.heartbeat as hb; hb.INTERVAL_S = 1.0; "
         "sys.exit(pytest.main(sys.argv[1:]))",
         "-p", "tests.conftest", "-p", "no:randomly", "-p", "no:cacheprovider", "-n", "0",
         str(test_file)],
        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:]
    assert "still running: " in done.stdout and "test_slow.py::test_sleeps (" in done.stdout
