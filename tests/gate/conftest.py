"""Fixtures for records/gate/reproduce: an isolated project (stacks dir, state dir, records
dir) and a tiny real stack served from a local index of wheels made on the spot."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.helpers.build_records import write_hashed_sample_env
from tests.helpers.project_env import isolated_env
from tests.helpers.tiny_stack import tiny_index, tiny_manifest

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Project:
    """A stand-in checkout: its own stacks/, state dir and records/, via the env overrides."""

    root: Path
    stacks: Path
    state: Path
    env: dict[str, str]

    def run(self, *argv: str, check: bool = False) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, "-m", *argv],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"{argv} exit {done.returncode}\n{done.stdout}\n{done.stderr}")
        return done


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    for name in ("cu128.toml", "rules.toml"):
        (stacks / name).write_bytes((ROOT / "stacks" / name).read_bytes())
    env = isolated_env(tmp_path, stacks)
    yield Project(root=tmp_path, stacks=stacks, state=tmp_path / "state", env=env)


def write_tiny_stack(
    project: Project, name: str = "tiny", required: tuple[str, ...] = ("static",)
) -> Path:
    url = tiny_index(project.root)
    path = project.stacks / f"{name}.toml"
    description = "a tiny real stack: two wheels from a local index"
    path.write_text(tiny_manifest(name, url, description=description, required=required))
    return path


def fake_env_with_build_record(folder: Path, stack: str, tree: str = "ab" * 32) -> Path:
    """An env built by stand-in: one installed file whose content comes from `tree` (two
    values, two tree hashes), its listing, and a build record with its real tree hash."""
    return write_hashed_sample_env(folder, stack, seed=tree)
