"""Marker guards: tests that need a tool, a registry or hardware say so with a marker.

- Under CI=true every skip FAILS unless its reason is listed in `tests/allowed_skips.py` (no GPU,
  no Docker daemon, root reads mode-000 files): a tool `.ci/bootstrap` installs can never go
  missing quietly. Locally tests skip with the reason. The allowed skips are listed at the end.
- An unmarked test that opens a connection to anything but loopback fails: mark it `network`.
"""

from __future__ import annotations

import ipaddress
import os
import shutil
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.allowed_skips import ALLOWED_SKIPS, allowed
from tests.helpers import heartbeat
from tests.helpers.leftovers import MARKER, stderr_tail, tear_down

IN_CI = os.environ.get("CI") == "true"
ROOT = Path(__file__).resolve().parent.parent


def _has_gpu() -> bool:
    return shutil.which("nvidia-smi") is not None and Path("/dev/nvidia0").exists()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--alone",
        choices=("include", "exclude", "only"),
        default="include",
        help="tests marked `alone` (they compare measured rates) run with nothing beside them: "
        "`nox -s tests` runs the rest in parallel with --alone=exclude, then these with --alone=only",
    )


@pytest.hookimpl(trylast=True)  # after the terminal reporter is registered
def pytest_configure(config: pytest.Config) -> None:
    """A line every 15 s of silence naming the tests still running (tests/helpers/heartbeat.py)."""
    heartbeat.install(config)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (--dist loadgroup), tests that share one costly session fixture run on
    one worker: every buildah test uses the session's vfs store with its committed base images.
    `--alone` deselects (never skips) the `alone` tests or everything else."""
    for item in items:
        if item.get_closest_marker("buildah"):
            item.add_marker(pytest.mark.xdist_group("buildah"))
    mode = config.getoption("--alone")
    if mode == "include":
        return
    keep = [i for i in items if (i.get_closest_marker("alone") is not None) == (mode == "only")]
    dropped = [i for i in items if i not in keep]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("gpu") and not _has_gpu():
        pytest.skip("no NVIDIA GPU on this machine")
    if item.get_closest_marker("buildah") and shutil.which("buildah") is None:
        pytest.skip("buildah not installed (apt-get install buildah)")
    if item.get_closest_marker("slurm"):
        from tests.helpers.slurm_cluster import missing_tools

        missing = missing_tools()
        why = (
            f"Slurm tools missing: {', '.join(missing)} (apt-get install slurmctld slurmd "
            "slurm-client munge)"
            if missing
            else ("the one-host Slurm cluster runs its daemons as root" if os.getuid() else "")
        )
        if why:
            if IN_CI:
                pytest.fail(f"{why}; CI must run the Slurm tests (.ci/bootstrap installs them)")
            pytest.skip(why)
    if item.get_closest_marker("network") and os.environ.get("STACKGATE_OFFLINE") == "1":
        pytest.skip("STACKGATE_OFFLINE=1")


def _loopback(address: Any) -> bool:
    if isinstance(address, tuple) and address:
        host = address[0]
        if host in ("localhost", ""):
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False
    return True  # unix sockets


@pytest.fixture(autouse=True)
def _no_network_unless_marked(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    if request.node.get_closest_marker("network"):
        yield
        return
    real_connect = socket.socket.connect

    def guarded(self: socket.socket, address: Any) -> Any:
        if not _loopback(address):
            pytest.fail(f"unmarked test tried to reach {address!r}: mark it @pytest.mark.network")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)
    yield


@pytest.fixture(autouse=True)
def _processes_torn_down(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every process the test started (its servers and their orphaned workers included) is
    gone after it: passed, failed or timed out (tests/helpers/leftovers.py)."""
    token = uuid.uuid4().hex
    monkeypatch.setenv(MARKER, token)
    try:
        yield
    finally:
        tear_down(token)


@pytest.fixture
def repo_root() -> Path:
    return ROOT


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failure caused by a child process shows that child's stderr tail. Under CI=true a skip
    whose reason is not in tests/allowed_skips.py is a failure."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()  # type: ignore[attr-defined]
    if report.failed and call.excinfo is not None:
        # A failed child's captured stderr says why; its CalledProcessError does not. The
        # traceback is kept short: the long one printed ~90 lines of CPython's subprocess.run.
        tail = stderr_tail(call.excinfo.value)
        if tail:
            # pytest's own rendering (its internal frames cut), in its "short" style
            report.longrepr = item._repr_failure_py(call.excinfo, style="short")  # type: ignore[attr-defined]
            report.sections.append(("child process output", tail))
    if not (IN_CI and report.skipped) or hasattr(report, "wasxfail"):
        return
    reason = _skip_reason(report)
    if allowed(reason) is None:
        report.outcome = "failed"
        report.longrepr = (
            f"skipped under CI=true: {reason}\n"
            "CI must run this test: install what it needs in .ci/bootstrap, or, if no install can "
            "cure it on CI's machine, add the reason to tests/allowed_skips.py with why."
        )


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    skipped = terminalreporter.stats.get("skipped", [])
    if not skipped:
        return
    terminalreporter.section("allowed skips (tests/allowed_skips.py)")
    for entry in ALLOWED_SKIPS:
        hits = [r for r in skipped if allowed(_skip_reason(r)) == entry]
        terminalreporter.write_line(f"{len(hits):4d}  {entry.pattern!r}: {entry.why}")
    others = [r for r in skipped if allowed(_skip_reason(r)) is None]
    if others:
        terminalreporter.write_line(f"{len(others):4d}  not allowed under CI (fail there):")
        for r in others:
            terminalreporter.write_line(f"      {r.nodeid}: {_skip_reason(r)}")
