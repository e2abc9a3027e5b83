"""Every manifest this repository has ever committed still loads (stackgate.manifest.migrate).

A record names the exact manifest it was made from; reproduce reads that version back from git
history, so an old form that no longer loaded would make its records impossible to rebuild.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from stackgate.errors import ManifestError
from stackgate.manifest.loading import load_stack
from tests.helpers.as_typed import last_line, typed_shell

ROOT = Path(__file__).resolve().parents[2]


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True
    ).stdout


def _committed_manifests() -> dict[tuple[str, str], bytes]:
    """(commit, path) -> bytes of every distinct committed stacks/*.toml but the rules."""
    seen: dict[bytes, tuple[str, str]] = {}
    for commit in _git("log", "--all", "--format=%H", "--", "stacks/*.toml").split():
        for path in _git("ls-tree", "--name-only", commit, "stacks/").split():
            if not path.endswith(".toml") or path == "stacks/rules.toml":
                continue
            data = subprocess.run(
                ["git", "-C", str(ROOT), "show", f"{commit}:{path}"],
                check=True,
                capture_output=True,
            ).stdout
            seen.setdefault(data, (commit, path))
    return {where: data for data, where in seen.items()}


def _stacks_copy(tmp_path: Path) -> Path:
    stacks = tmp_path / "stacks"
    shutil.copytree(ROOT / "stacks", stacks, ignore=shutil.ignore_patterns("locks"))
    return stacks


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs the repository's git history")
def test_every_committed_manifest_loads(tmp_path: Path) -> None:
    versions = _committed_manifests()
    # the manifests of both committed records and the form the timeouts rename broke
    assert len(versions) >= 20, len(versions)
    stacks = _stacks_copy(tmp_path)
    failed: list[str] = []
    migrated = 0
    for (commit, path), data in versions.items():
        target = stacks / Path(path).name
        target.write_bytes(data)
        try:
            loaded = load_stack(target)
        except ManifestError as exc:
            failed.append(f"{commit[:12]}:{path}: {exc.details[:2]}")
            continue
        migrated += bool(loaded.notes)
    assert not failed, failed
    assert migrated >= 5  # the schema-1 manifests that carried validation.timeouts.model_load_s


def test_schema_1_timeouts_are_dropped_with_a_note(tmp_path: Path) -> None:
    stacks = _stacks_copy(tmp_path)
    path = stacks / "h200-transformers.toml"
    text = path.read_text().replace(
        "check_s = 120", "check_s = 120\nmodel_load_s = 300\nhang_s = 180"
    )
    path.write_text(text)
    loaded = load_stack(path)
    assert loaded.manifest.schema_version == 1
    assert [n.split(" = ")[0] for n in loaded.notes] == [
        "validation.timeouts.model_load_s",
        "validation.timeouts.hang_s",
    ]
    assert "never read" in loaded.notes[0]


def test_schema_2_refuses_the_old_keys_and_3_is_unknown(tmp_path: Path) -> None:
    stacks = _stacks_copy(tmp_path)
    path = stacks / "h200-transformers.toml"
    base = path.read_text()
    path.write_text(
        base.replace("schema_version = 1", "schema_version = 2").replace(
            "check_s = 120", "check_s = 120\nmodel_load_s = 300"
        )
    )
    with pytest.raises(ManifestError) as err:
        load_stack(path)
    assert any("model_load_s is now load_timeout_s" in d for d in err.value.details)
    path.write_text(base.replace("schema_version = 1", "schema_version = 3"))
    with pytest.raises(ManifestError) as err:
        load_stack(path)
    assert any("schema_version" in d for d in err.value.details)


def test_the_migration_example_of_docs_manifest_says_what_it_shows(tmp_path: Path) -> None:
    """docs/manifest.md's console block runs as typed: the notes and the verdict, exit 0."""
    (command, *shown) = [
        line.removeprefix("$ ")
        for line in command_lines_of(ROOT / "docs" / "manifest.md", "migration-example")
    ]
    done = typed_shell(tmp_path / "uv-run-venv").run(command)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr.strip().splitlines() == shown
    assert last_line(done).startswith("OK docs/examples/h200-transformers.toml")


def command_lines_of(doc: Path, marker: str) -> list[str]:
    """The lines of the ```console block after `<!-- marker`: the `$ ` command and its output."""
    block = doc.read_text().split(f"<!-- {marker}", 1)[1].split("```console\n", 1)[1]
    return block.split("```", 1)[0].strip().splitlines()
