"""A rebuilt env's tree hash with its generated files as the record's build wrote them.

The builder generates a few files whose bytes name host inputs or the tool's version: the
base-site `.pth` (a path on that machine), `pyvenv.cfg` (base interpreter folder and version,
uv's version), the `bin/python` link and the profile module's header (stackgate.env_generated).
They differ on a new host by design, so the built env is hashed under the record's scheme with
exactly those files regenerated from its build record, each substitution reported as a host
input: "identical" means every package file, script and profile variable is the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from stackgate.env_generated import (
    BASE_SITE_PTH,
    PROFILE_HEADERS,
    PROFILE_MODULE,
    profile_format_of,
)
from stackgate.envtree import compute_tree, content_digest, hash_entries, own_paths_of
from stackgate.envtree.digests import DigestCache
from validators.records.env_verify import recorded_scheme
from validators.records.model import BuildFacts


@dataclass(frozen=True)
class HostInput:
    """A generated file whose bytes here differ from the record's by a host input only."""

    file: str
    what: str
    recorded: str
    here: str

    def line(self) -> str:
        return f"{self.file}: {self.what} recorded {self.recorded}, here {self.here}"


@dataclass(frozen=True)
class RecordedTree:
    sha256: str
    as_built: str
    scheme: int
    inputs: list[HostInput] = field(default_factory=list)


def _text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _tools(raw: Mapping[str, Any]) -> dict[str, str]:
    tools = raw.get("tools")
    return {k: v for k, v in tools.items() if isinstance(v, str)} if isinstance(tools, dict) else {}


def _folder(path: str | None) -> str:
    """The folder of an absolute interpreter path, as uv writes pyvenv.cfg's `home`."""
    return str(PurePosixPath(path).parent) if path else ""


def _base_path(raw: Mapping[str, Any]) -> str | None:
    base = raw.get("base_site")
    path = base.get("path") if isinstance(base, dict) else None
    return path if isinstance(path, str) else None


def _profile(
    env: Path, site: str, rec: Mapping[str, Any], here: Mapping[str, Any]
) -> tuple[str, HostInput] | None:
    text = _text(env / site / f"{PROFILE_MODULE}.py")
    fmt_rec, fmt_here = profile_format_of(rec), profile_format_of(here)
    if text is None or fmt_rec == fmt_here:
        return None
    first, sep, rest = text.partition("\n")
    if first != PROFILE_HEADERS[fmt_here]:
        return None
    return PROFILE_HEADERS[fmt_rec] + sep + rest, HostInput(
        f"{site}/{PROFILE_MODULE}.py",
        "header (stackgate's profile-module format)",
        str(fmt_rec),
        str(fmt_here),
    )


def _pyvenv(
    env: Path, rec: Mapping[str, Any], here: Mapping[str, Any]
) -> tuple[str, list[HostInput]] | None:
    text = _text(env / "pyvenv.cfg")
    t_rec, t_here = _tools(rec), _tools(here)
    if text is None or not t_rec:
        return None
    wanted = {
        "home": (_folder(t_rec.get("python_path")), _folder(t_here.get("python_path"))),
        "version_info": (t_rec.get("python", ""), t_here.get("python", "")),
        "uv": (t_rec.get("uv", ""), t_here.get("uv", "")),
    }
    lines, inputs = [], []
    for line in text.split("\n"):
        key, sep, value = line.partition(" = ")
        pair = wanted.get(key) if sep else None
        if pair and pair[0] and value == pair[1] and pair[0] != value:
            inputs.append(HostInput("pyvenv.cfg", key, pair[0], value))
            line = f"{key} = {pair[0]}"
        lines.append(line)
    return ("\n".join(lines), inputs) if inputs else None


def as_recorded(env: Path, recorded: BuildFacts, built: BuildFacts) -> RecordedTree:
    """The built env's tree hash under the record's scheme, with its generated files as the
    record's build wrote them; `as_built` is the same hash of the files as they are."""
    real = env.resolve()
    scheme = recorded_scheme(recorded)
    own = own_paths_of(real)
    with DigestCache() as cache:
        tree = compute_tree(real, own_paths=own, cache=cache, scheme=scheme)
    rec, here = recorded.raw, built.raw
    sites = sorted(p.relative_to(real).as_posix() for p in real.glob("lib/python3.*/site-packages"))
    overrides: dict[str, bytes] = {}
    inputs: list[HostInput] = []
    if sites:
        site = sites[0]
        profile = _profile(real, site, rec, here)
        if profile is not None:
            overrides[profile[1].file] = content_digest(profile[0].encode(), own)
            inputs.append(profile[1])
        path_rec, path_here = _base_path(rec), _base_path(here)
        if path_rec and path_here and path_rec != path_here:
            rel = f"{site}/{BASE_SITE_PTH}"
            overrides[rel] = content_digest(f"{path_rec}\n".encode(), own)
            inputs.append(HostInput(rel, "base site path", path_rec, path_here))
    cfg = _pyvenv(real, rec, here)
    if cfg is not None:
        overrides["pyvenv.cfg"] = content_digest(cfg[0].encode(), own)
        inputs += cfg[1]
    py_rec, py_here = _tools(rec).get("python_path"), _tools(here).get("python_path")
    link = real / "bin" / "python"
    if (
        py_rec
        and py_here
        and py_rec != py_here
        and link.is_symlink()
        and str(link.readlink()) == py_here
    ):
        overrides["bin/python"] = py_rec.encode()
        inputs.append(HostInput("bin/python", "interpreter link", py_rec, py_here))
    entries = [(rel, kind, overrides.get(rel, digest)) for rel, kind, digest in tree.entries]
    return RecordedTree(hash_entries(entries), tree.sha256, scheme, inputs)
