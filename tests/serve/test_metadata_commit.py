"""A serve run's metadata names stackgate's commit AND whether the files that ran differ from
it: a copied checkout whose .git lagged behind its files (the lent GPU machine's copy) recorded
the old commit for other code. Real git repositories in tmp folders."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from validators.serve.metadata import _stackgate_commit


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=repo, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip()


def test_a_clean_tree_an_edited_one_and_no_git(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "checkout"
    (repo / "stacks").mkdir(parents=True)
    (repo / "stacks" / "rules.toml").write_text("# rules\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "one")
    head = _git(repo, "rev-parse", "HEAD")
    monkeypatch.setenv("STACKGATE_ROOT", str(repo))
    assert _stackgate_commit() == (head, False)

    (repo / "untracked.txt").write_text("not part of any commit\n")
    assert _stackgate_commit() == (head, False)  # untracked files are not the code that ran

    (repo / "stacks" / "rules.toml").write_text("# rules, edited after the commit\n")
    assert _stackgate_commit() == (head, True)

    bare = tmp_path / "copy-without-git"
    bare.mkdir()
    monkeypatch.setenv("STACKGATE_ROOT", str(bare))
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    assert _stackgate_commit() == ("", None)
