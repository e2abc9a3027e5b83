"""A project for the bisect tests: stacks of the bisect index (tests/bisect/index.py) served on
127.0.0.1, a known-good baseline built and recorded, and candidates to bisect."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from tests.bisect.index import NEUTRAL, REPEATS, bisect_manifest, build_index, versions
from tests.gate.conftest import ROOT, Project
from tests.helpers.interpreter import base_python
from tests.helpers.range_server import serve

BASE_PACKAGES = {
    **versions(NEUTRAL, "1.0"),
    **versions(("slowpkg", "slowtoo", "duoa", "duob", "brokenpkg", "jitter"), "1.0"),
    "coupled": "1.0",
}


@dataclass(frozen=True)
class BisectProject(Project):
    """tests/gate's project (its own stacks/, state and records) with the bisect index's URL."""

    url: str = ""

    def stack(self, name: str, packages: Mapping[str, str], **kw: object) -> None:
        path = self.stacks / f"{name}.toml"
        path.write_text(bisect_manifest(name, self.url, packages, **kw))  # type: ignore[arg-type]
        self.run("builder", "lock", name, "--python", base_python(), check=True)

    def candidate(self, name: str, changes: Mapping[str, str], **kw: object) -> None:
        self.stack(name, {**BASE_PACKAGES, **changes}, **kw)

    def bisect(self, name: str, *extra: str) -> tuple[int, dict[str, Any], str]:
        done = self.run("validators", "bisect", "--good", "base", "--bad", name, "--json",
                        "--python", base_python(), *extra)  # fmt: skip
        try:
            data = json.loads(done.stdout)
        except json.JSONDecodeError:
            raise AssertionError(f"exit {done.returncode}\n{done.stdout}\n{done.stderr}") from None
        return done.returncode, data, done.stderr


@pytest.fixture(scope="module")
def bisect_project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BisectProject]:
    root = tmp_path_factory.mktemp("bisect")
    served = build_index(root)
    stacks = root / "stacks"
    stacks.mkdir()
    (stacks / "rules.toml").write_bytes((ROOT / "stacks" / "rules.toml").read_bytes())
    with serve(served) as server:
        env = {
            **os.environ,
            "STACKGATE_ROOT": str(root),
            "STACKGATE_STACKS_DIR": str(stacks),
            "STACKGATE_STATE_DIR": str(root / "state"),
            "STACKGATE_VENV_ROOT": str(root / "envs"),
            "STACKGATE_CACHE": str(root / "cache"),
            "UV_PYTHON_DOWNLOADS": "never",
            "NO_COLOR": "1",
        }
        url = f"http://127.0.0.1:{server.server_port}/simple"
        project = BisectProject(root, stacks, root / "state", env, url)
        project.stack("base", BASE_PACKAGES)
        py = base_python()
        project.run("builder", "build", "base", "--python", py, check=True)
        current = root / "envs" / "base" / "current"
        (stacks / "refs").mkdir()
        project.run("validators", "run", "base", "--env", str(current), "--option",
                    f"record_reference={stacks / 'refs' / 'main.json'}", check=True)  # fmt: skip
        runs = []
        for i in range(REPEATS):  # the record holds as many runs as the stacks declare
            done = project.run("validators", "run", "base", "--env", str(current), "--json")
            assert done.returncode == 0, done.stderr
            (root / f"base-run{i}.json").write_text(done.stdout)
            runs += ["--run", str(root / f"base-run{i}.json")]
        project.run("validators", "mark-good", "base", *runs, "--allow-host-mismatch", check=True)
        yield project
