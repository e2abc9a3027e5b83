"""stackgate is Apache-2.0 (pyproject.toml, LICENSE); every runtime dependency, read from its
installed metadata (License-Expression, else License, else the trove classifiers), must be
under a license Apache-2.0 code may depend on: permissive or weak copyleft, never GPL or
AGPL (python-hostlist, GPL-2.0-or-later, was one until validators/fleet/slurm/hostlist.py)."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.helpers.every_command import ROOT

# SPDX ids (and the words of classifiers and free-text License fields) an Apache-2.0 project may
# depend on.
COMPATIBLE = re.compile(
    r"Apache|\bMIT\b|BSD|ISC|PSF|Python Software Foundation|Python-2\.0|MPL-2\.0|"
    r"Mozilla Public License 2\.0|HPND|Unlicense|0BSD|Zlib|CNRI-Python|Public Domain|LGPL|"
    r"GNU Lesser General Public License",
    re.IGNORECASE,
)
COPYLEFT = re.compile(r"(?<!L)GPL|(?<!Lesser )General Public License|AGPL|SSPL", re.IGNORECASE)


def _license(dist: metadata.Distribution) -> str:
    meta = dist.metadata
    expression = meta.get("License-Expression")
    if expression:
        return str(expression)
    classifiers = [c for c in meta.get_all("Classifier") or [] if c.startswith("License ::")]
    if classifiers:
        return "; ".join(classifiers)
    if meta.get("License"):
        return str(meta["License"]).splitlines()[0]
    # Metadata 2.4 without an expression: the license file it ships names it in its head.
    for name in meta.get_all("License-File") or []:
        text = dist.read_text(f"licenses/{name}") or dist.read_text(name) or ""
        if text.strip():
            return " ".join(text.split()[:8])
    return ""


def _runtime_closure() -> dict[str, metadata.Distribution]:
    """Every distribution stackgate's [project] dependencies pull in, markers evaluated."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    env = default_environment()
    todo = [Requirement(r) for r in project["dependencies"]]
    seen: dict[str, metadata.Distribution] = {}
    while todo:
        req = todo.pop()
        if req.marker is not None and not req.marker.evaluate({**env, "extra": ""}):
            continue
        name = str(canonicalize_name(req.name))
        if name in seen:
            continue
        dist = metadata.distribution(req.name)
        seen[name] = dist
        todo += [Requirement(r) for r in dist.requires or []]
    return seen


def test_the_project_declares_apache_2() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["license"] == "Apache-2.0"
    assert "Apache License" in (ROOT / "LICENSE").read_text(encoding="utf-8")[:200]


def test_every_runtime_dependency_is_apache_compatible() -> None:
    closure = _runtime_closure()
    assert "uv" in closure and len(closure) > 10, sorted(closure)
    bad = []
    for name, dist in sorted(closure.items()):
        text = _license(dist)
        if not text or (COPYLEFT.search(text) and not re.search(r"LGPL|Lesser", text)):
            bad.append(f"{name} {dist.version}: {text or 'no license in its metadata'}")
        elif not COMPATIBLE.search(text):
            bad.append(f"{name} {dist.version}: {text} (not a license known to be compatible)")
    assert not bad, "\n".join(bad)
