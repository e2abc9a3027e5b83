"""`verify`'s list of differing paths names the first ten and says how many more there are: a
reader who saw ten named paths took them for all (two run-time compiled kernel modules went
unnoticed that way). Real files, a real listing, the real re-hash."""

from __future__ import annotations

from pathlib import Path

from stackgate.envtree import check_tree, compute_tree, write_listing


def _env(tmp_path: Path) -> tuple[Path, Path]:
    env = tmp_path / "env"
    site = env / "lib" / "python3.12" / "site-packages"
    site.mkdir(parents=True)
    (site / "mod.py").write_text("X = 1\n")
    (env / "stackgate").mkdir()
    (env / "stackgate" / "build-record.json").write_text("{}")
    return env, site


def test_more_than_ten_differences_say_how_many_were_left_out(tmp_path: Path) -> None:
    env, site = _env(tmp_path)
    before = compute_tree(env)
    write_listing(env, before)
    for i in range(13):
        (site / f"added_{i:02d}.so").write_bytes(b"x")
    (site / "mod.py").write_text("X = 2\n")
    check = check_tree(env, before.sha256)
    assert not check.ok
    assert check.differing[:10] == [
        *(f"added: lib/python3.12/site-packages/added_{i:02d}.so" for i in range(10))
    ]
    assert check.differing[10:] == ["... and 4 more differing paths (only the first 10 are named)"]
    assert check.explain() == check.differing


def test_ten_or_fewer_differences_are_all_named_with_no_extra_line(tmp_path: Path) -> None:
    env, site = _env(tmp_path)
    before = compute_tree(env)
    write_listing(env, before)
    for i in range(10):
        (site / f"added_{i:02d}.so").write_bytes(b"x")
    check = check_tree(env, before.sha256)
    assert len(check.differing) == 10
    assert all(line.startswith("added: ") for line in check.differing)
