"""Paths the user names that are the wrong kind of thing: exit 2 naming them, no traceback."""

from __future__ import annotations

from tests.gate.conftest import Project


def test_store_that_is_a_folder_is_exit_2(project: Project) -> None:
    folder = project.root / "a-folder"
    folder.mkdir()
    done = project.run("validators", "records", "list", "--store", str(folder))
    assert done.returncode == 2, done.stderr
    assert f"{folder} is a folder" in done.stderr and "Traceback" not in done.stderr


def test_records_import_from_a_missing_folder_is_exit_2(project: Project) -> None:
    missing = project.root / "nope"
    done = project.run("validators", "records", "import", "--dir", str(missing))
    assert done.returncode == 2, done.stderr
    assert f"records import --dir {missing}: no such folder" in done.stderr
    assert "imported" not in done.stderr


def test_gate_keep_runs_into_a_folder_with_files_is_exit_2_before_any_run(
    project: Project,
) -> None:
    kept = project.root / "kept"
    kept.mkdir()
    (kept / "pair-01-baseline.json").write_text("{}")
    done = project.run("validators", "gate", "smoke", "--keep-runs", str(kept))
    assert done.returncode == 2, done.stderr
    assert f"--keep-runs {kept}: not empty" in done.stderr
    assert "validation run" not in done.stderr and "pair 1/" not in done.stderr
    assert [p.name for p in kept.iterdir()] == ["pair-01-baseline.json"]
