"""Manifest -> a generated uv project (pyproject.toml) that `uv lock` resolves.

The project pins every package of the manifest, maps each package that names an explicit index
to that index through [tool.uv.sources] (so torch can only come from the cu130 index and the
resolver can never swap in a CPU or cu12 build: uv #16802, sglang #18404), puts the manifest's
overrides into override-dependencies (upstream exact pins such as SGLang's
`flashinfer_python==0.6.3` lose to them), restricts resolution to the target platform with
`environments`, and fixes requires-python to the manifest's minor version.

`[tool.stackgate]` carries the hash of the manifest fields the lock depends on; a lock whose
recorded hash differs from the manifest's current one is stale.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stackgate.credentials import credential_env, has_credentials, redact, strip_credentials
from stackgate.errors import BadInput
from stackgate.lock.state import LOCK_FIELDS, manifest_hash
from stackgate.manifest import Manifest, Package
from stackgate.toml_write import toml_value

_PLATFORM_MARKERS = {
    "linux-x86_64": "sys_platform == 'linux' and platform_machine == 'x86_64'",
    "linux-aarch64": "sys_platform == 'linux' and platform_machine == 'aarch64'",
}


def parse_index_map(items: list[str], manifest: Manifest) -> dict[str, str]:
    """['NAME=URL', ...] -> {name: url without credentials}. NAME is an index of the manifest,
    or a package with a git source (then URL is a mirror of that repository, e.g. a local bare
    clone). Credentials in an index URL are for `index_map_credentials`, never for files."""
    mapping: dict[str, str] = {}
    for item in items:
        name, sep, url = item.partition("=")
        shown = redact(item)
        if not sep or not name or not url:
            raise BadInput(f"--index-map '{shown}': write NAME=URL")
        git_packages = sorted(n for n, p in manifest.packages.items() if p.git is not None)
        if name not in manifest.indexes and name not in git_packages:
            known = ", ".join([*sorted(manifest.indexes), *git_packages]) or "none"
            raise BadInput(
                f"--index-map '{shown}': the manifest has no index or git package '{name}' "
                f"({known})"
            )
        if not url.startswith(("http://", "https://", "file://")):
            if Path(url).is_dir():  # a plain folder is a file:// index
                url = Path(url).resolve().as_uri()
            else:
                raise BadInput(f"--index-map '{shown}': URL must be http(s):// or file://")
        if has_credentials(strip_credentials(url)[0]):
            raise BadInput(
                f"--index-map '{shown}': a token in the query string would be written into "
                "the lock; give it to uv as UV_INDEX_<NAME>_USERNAME/PASSWORD or netrc"
            )
        if has_credentials(url) and name not in manifest.indexes:
            raise BadInput(
                f"--index-map '{shown}': credentials in a git URL would be written into the "
                "lock; give them to git (a credential helper or ~/.netrc)"
            )
        mapping[name] = strip_credentials(url)[0]
    return mapping


def index_map_credentials(items: list[str]) -> dict[str, str]:
    """UV_INDEX_<NAME>_USERNAME/PASSWORD for every `--index-map NAME=URL` with user info: the
    commands put them into the environment of the uv processes, where uv looks for them."""
    out: dict[str, str] = {}
    for item in items:
        name, _sep, url = item.partition("=")
        if url.startswith(("http://", "https://")):
            out.update(credential_env(name, url))
    return out


@dataclass(frozen=True)
class IndexSpec:
    name: str
    url: str
    explicit: bool
    default: bool


def index_specs(manifest: Manifest, index_map: Mapping[str, str]) -> list[IndexSpec]:
    """The manifest's indexes with remapped URLs. Explicit ones first, then the open ones;
    the last open index is uv's default (lowest priority), which is where PyPI belongs."""
    explicit = [n for n, i in manifest.indexes.items() if i.explicit]
    open_ = [n for n, i in manifest.indexes.items() if not i.explicit]
    specs: list[IndexSpec] = []
    for name in explicit + open_:
        specs.append(
            IndexSpec(
                name=name,
                url=index_map.get(name, manifest.indexes[name].url),
                explicit=manifest.indexes[name].explicit,
                default=bool(open_) and name == open_[-1],
            )
        )
    return specs


def _requirement(name: str, pin: Package) -> str:
    extras = f"[{','.join(pin.extras)}]" if pin.extras else ""
    if pin.version is not None:
        return f"{name}{extras}=={pin.version}"
    return f"{name}{extras}"


def _source(name: str, pin: Package, mapping: Mapping[str, str]) -> dict[str, Any] | None:
    if pin.git is not None:
        source: dict[str, Any] = {"git": mapping.get(name, pin.git), "rev": pin.ref}
        if pin.subdirectory:
            source["subdirectory"] = pin.subdirectory
        return source
    if pin.index is not None:
        return {"index": pin.index}
    return None


def _lines(key: str, items: list[str]) -> list[str]:
    if not items:
        return [f"{key} = []"]
    return [f"{key} = [", *(f"    {toml_value(i)}," for i in items), "]"]


def render_pyproject(
    manifest: Manifest, manifest_path: str, *, index_map: Mapping[str, str] | None = None
) -> str:
    """The generated project's pyproject.toml text (deterministic for one manifest + map)."""
    mapping = dict(index_map or {})
    deps = [_requirement(name, pin) for name, pin in sorted(manifest.packages.items())]
    out = [
        f"# DO NOT EDIT: generated from {manifest_path} by `python -m builder lock "
        f"{manifest.name}`.",
        # Written into committed files: the same text on every machine (not a typed hint).
        f"# Regenerate with: nox -s lock-{manifest.name}  (or: python -m builder lock "
        f"{manifest.name})",
        "[project]",
        f'name = "stackgate-stack-{manifest.name}"',
        'version = "0"',
        f'requires-python = "=={manifest.python}.*"',
        *_lines("dependencies", deps),
        "",
        "[tool.uv]",
        "package = false",
        *_lines("environments", [_PLATFORM_MARKERS[manifest.platform]]),
        *_lines("override-dependencies", list(manifest.overrides)),
        "",
    ]
    for spec in index_specs(manifest, mapping):
        out += [
            "[[tool.uv.index]]",
            f"name = {toml_value(spec.name)}",
            f"url = {toml_value(spec.url)}",
        ]
        if spec.explicit:
            out.append("explicit = true")
        if spec.default:
            out.append("default = true")
        out.append("")
    sources = {
        name: src
        for name, pin in sorted(manifest.packages.items())
        if (src := _source(name, pin, mapping))
    }
    if sources:
        out.append("[tool.uv.sources]")
        out += [f"{toml_value(name)} = {toml_value(src)}" for name, src in sources.items()]
        out.append("")
    out += [
        "[tool.stackgate]",
        f"stack = {toml_value(manifest.name)}",
        f"manifest = {toml_value(manifest_path)}",
        f"manifest_hash = {toml_value(manifest_hash(manifest))}",
        *_lines("manifest_fields", list(LOCK_FIELDS)),
        f"index_map = {toml_value(mapping) if mapping else '{}'}",
        "",
    ]
    return "\n".join(out)
