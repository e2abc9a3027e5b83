"""The tree of a rebuilt env compared as its record's build wrote the generated files.

Synthetic envs stand for envs of every past build-record form: tree schemes 1-3, profile
module formats 1 (before the layout change), 2 and 3 (no builder path), build records with and
without `env_profile_format`. The generated files' host inputs (base-site path, interpreter,
uv and Python versions, header) may differ; any other byte may not.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from stackgate.env_generated import (
    PROFILE_HEADERS,
    profile_format_of,
    render_profile_module,
)
from stackgate.envtree import compute_tree, own_paths_of
from validators.gate.recorded_tree import as_recorded
from validators.records.model import BuildFacts

SITE = "lib/python3.12/site-packages"
VARIABLES = {"HF_HUB_OFFLINE": "1"}


def _env(root: Path, *, fmt: int, base: str, python: str, version: str, uv: str) -> Path:
    env = root / "env"
    site = env / SITE
    site.mkdir(parents=True)
    (env / "bin").mkdir()
    (env / "bin" / "python").symlink_to(python)
    (env / "pyvenv.cfg").write_text(
        f"home = {Path(python).parent}\nimplementation = CPython\nuv = {uv}\n"
        f"version_info = {version}\ninclude-system-site-packages = false\nrelocatable = true\n"
    )
    (site / "_stackgate_env_profile.py").write_text(render_profile_module(VARIABLES, "pcie", fmt))
    (site / "_stackgate_env_profile.pth").write_text("import _stackgate_env_profile\n")
    (site / "_stackgate_base_site.pth").write_text(f"{base}\n")
    (site / "pkg").mkdir()
    (site / "pkg" / "__init__.py").write_text("VALUE = 1\n")
    return env


def _facts(
    tree: str | None, scheme: int, *, python: str, version: str, uv: str, base: str, **raw: Any
) -> BuildFacts:
    data: dict[str, Any] = {
        "tools": {"python_path": python, "python": version, "uv": uv, "stackgate": "0.1.0"},
        "base_site": {"path": base, "pth": "_stackgate_base_site.pth", "packages": {}},
        "tree": {"sha256": tree or "", "files": 0, "bytes": 0, "scheme": scheme},
        **raw,
    }
    return BuildFacts(env_tree_sha256=tree, raw=data)


RECORDED = {"python": "/usr/bin/python3.12", "version": "3.12.3", "uv": "0.13.9"}
HERE = {"python": "/opt/py/bin/python3.12", "version": "3.12.1", "uv": "0.13.9"}


@pytest.mark.parametrize("scheme", [1, 2, 3])
@pytest.mark.parametrize(
    ("fmt", "raw"),
    [
        (1, {"created_at": "2026-11-30T22:11:33+00:00"}),  # dated: before the layout change
        (2, {"created_at": "2026-12-02T03:00:00+00:00"}),  # dated: after it
        (1, {"created_at": "2026-12-03T00:00:00+00:00", "env_profile_format": 1}),  # said
        (3, {"created_at": "2026-12-05T00:00:00+00:00", "env_profile_format": 3}),
    ],
)
def test_a_rebuild_on_another_host_matches_a_record_of_every_past_form(
    tmp_path: Path, scheme: int, fmt: int, raw: dict[str, Any]
) -> None:
    assert profile_format_of(raw) == fmt
    machine = _env(tmp_path / "a", fmt=fmt, base="/opt/torch/.venv/" + SITE, **RECORDED)
    real = machine.resolve()
    recorded = compute_tree(real, own_paths=own_paths_of(real), scheme=scheme).sha256
    rec = _facts(recorded, scheme, base="/opt/torch/.venv/" + SITE, **RECORDED, **raw)
    # this host: its own base-site folder and interpreter, today's profile format
    here_env = _env(tmp_path / "b", fmt=3, base="/srv/base/" + SITE, **HERE)
    here = _facts(None, 3, base="/srv/base/" + SITE, **HERE, env_profile_format=3)
    plain = compute_tree(here_env.resolve(), scheme=scheme).sha256
    assert plain != recorded
    tree = as_recorded(here_env, rec, here)
    assert tree.sha256 == recorded
    fields = {(i.file.rsplit("/", 1)[-1], i.what.split(" (")[0]) for i in tree.inputs}
    assert ("_stackgate_base_site.pth", "base site path") in fields
    assert ("pyvenv.cfg", "home") in fields and ("pyvenv.cfg", "version_info") in fields
    assert ("python", "interpreter link") in fields
    assert (("_stackgate_env_profile.py", "header") in fields) == (fmt != 3)


@pytest.mark.parametrize(
    "change",
    [
        lambda site: (site / "pkg" / "__init__.py").write_text("VALUE = 2\n"),
        # a profile variable is what the env does, not a host input
        lambda site: (site / "_stackgate_env_profile.py").write_text(
            render_profile_module({"HF_HUB_OFFLINE": "0"}, "pcie", 3)
        ),
        lambda site: (site / "extra.pth").write_text("/tmp\n"),
    ],
)
def test_anything_but_the_host_inputs_still_differs(tmp_path: Path, change: Any) -> None:
    machine = _env(tmp_path / "a", fmt=1, base="/opt/b/" + SITE, **RECORDED)
    recorded = compute_tree(machine.resolve(), scheme=3).sha256
    rec = _facts(recorded, 3, base="/opt/b/" + SITE, **RECORDED, env_profile_format=1)
    here_env = _env(tmp_path / "b", fmt=3, base="/srv/b/" + SITE, **HERE)
    here = _facts(None, 3, base="/srv/b/" + SITE, **HERE, env_profile_format=3)
    assert as_recorded(here_env, rec, here).sha256 == recorded
    change(here_env / SITE)
    assert as_recorded(here_env, rec, here).sha256 != recorded


def test_the_profile_module_names_no_builder_path() -> None:
    text = render_profile_module(VARIABLES, None)
    assert "builder/" not in text and text.splitlines()[0] == PROFILE_HEADERS[3]


@pytest.mark.parametrize(
    ("fmt", "commit", "path"),
    [(1, "ed5ca3b", "builder/envprofile.py"), (2, "86b7db8", "builder/venv/envprofile.py")],
)
def test_the_older_headers_are_the_ones_git_history_wrote(fmt: int, commit: str, path: str) -> None:
    root = Path(__file__).resolve().parents[2]
    shown = subprocess.run(
        ["git", "-C", str(root), "show", f"{commit}:{path}"], capture_output=True, text=True
    )
    if shown.returncode != 0:
        pytest.skip(f"needs the repository's history ({commit})")
    source = shown.stdout.replace("\\'", "'")
    assert PROFILE_HEADERS[fmt] in source
