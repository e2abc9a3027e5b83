"""Programs the runner starts come from absolute, non-world-writable PATH entries only, and
children never inherit the loader's injection variables (stackgate/proc.py)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from stackgate import proc
from stackgate.errors import ToolNotFound


def _tool(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / name
    exe.write_text("#!/bin/sh\necho planted\n")
    exe.chmod(0o755)
    return exe


def test_empty_relative_and_world_writable_path_entries_are_not_searched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _tool(tmp_path / "cwd", "sg-probe-tool")
    _tool(tmp_path / "cwd" / "rel", "sg-probe-tool")
    shared = tmp_path / "shared"
    _tool(shared, "sg-probe-tool")
    shared.chmod(0o777 | stat.S_ISVTX)
    monkeypatch.chdir(tmp_path / "cwd")
    path = f":rel:.:{shared}"
    assert proc.search_path(path) == ""
    assert proc.find("sg-probe-tool", path=path) is None
    with pytest.raises(ToolNotFound):
        proc.run(["sg-probe-tool"], env={"PATH": path})
    assert proc.find("./sg-probe-tool") is None  # a relative name is refused too
    owned = tmp_path / "owned"
    _tool(owned, "sg-probe-tool")
    done = proc.run(["sg-probe-tool"], env={"PATH": f"::{owned}"})
    assert done.argv[0] == str(owned / "sg-probe-tool")


def test_children_do_not_inherit_loader_injection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LD_PRELOAD", "/tmp/evil.so")
    monkeypatch.setenv("LD_AUDIT", "/tmp/evil.so")
    monkeypatch.setenv("PATH", f":.:{os.environ['PATH']}")
    out = proc.run(["env"]).stdout
    assert "LD_PRELOAD" not in out and "LD_AUDIT" not in out
    path_line = next(line for line in out.splitlines() if line.startswith("PATH="))
    entries = path_line.removeprefix("PATH=").split(":")
    assert all(e.startswith("/") for e in entries), entries
