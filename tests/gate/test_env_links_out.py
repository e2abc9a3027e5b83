"""A symlink inside an env that leads outside it: the tree hash covers the link's target text,
not what it points at, so `site-packages/evil -> /elsewhere/evil` imports whatever /elsewhere
holds tomorrow under today's hash. mark-good (and every re-check) refuses it; the interpreter
links uv makes (bin/python -> the base interpreter) stay allowed."""

from __future__ import annotations

from pathlib import Path

from stackgate.build_record import read_build_record
from stackgate.envtree import check_tree, compute_tree, write_listing
from tests.gate.conftest import Project, fake_env_with_build_record
from tests.gate.test_cli import _write_runs


def _rehash(env: Path) -> None:
    """The build record as the builder would have written it for the env as it is now."""
    tree = compute_tree(env)
    write_listing(env, tree)
    record = read_build_record(env)
    update = {"sha256": tree.sha256, "files": tree.files, "bytes": tree.bytes}
    record.model_copy(update={"tree": record.tree.model_copy(update=update)}).write(env)


def test_a_package_folder_linked_outside_the_env_is_refused(project: Project) -> None:
    env = fake_env_with_build_record(project.root / "a", "cu128")
    elsewhere = project.root / "elsewhere" / "evil"
    elsewhere.mkdir(parents=True)
    (elsewhere / "__init__.py").write_text("print('today')\n")
    site = next(env.glob("lib/python3.*/site-packages"))
    (site / "evil").symlink_to(elsewhere)
    _rehash(env)  # the hash matches: only the link's target text is in it
    (elsewhere / "__init__.py").write_text("print('tomorrow')\n")
    check = check_tree(env, read_build_record(env).tree.sha256)
    assert check.tree.sha256 == read_build_record(env).tree.sha256
    assert not check.ok
    assert check.explain() == [
        f"leads outside the env (its content is not hashed): "
        f"{site.relative_to(env)}/evil -> {elsewhere}"
    ]
    runs = _write_runs(project, "r", "cu128", env, seed=3)
    done = project.run("validators", "mark-good", "cu128", *runs, "--allow-host-mismatch")
    assert done.returncode == 1, done.stderr
    assert "leads outside the env" in done.stderr


def test_interpreter_and_inner_links_are_fine(project: Project) -> None:
    env = fake_env_with_build_record(project.root / "a", "cu128")
    (env / "bin").mkdir()
    (env / "bin" / "python").symlink_to("/usr/bin/python3")
    (env / "bin" / "python3").symlink_to("python")
    (env / "lib64").symlink_to("lib")
    _rehash(env)
    assert check_tree(env, read_build_record(env).tree.sha256).ok
