"""The manifest of a small stack served from a local wheel index, as the builder and image
tests write it: one place for its TOML, so a schema change is made once."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def local_manifest(
    *,
    name: str,
    description: str,
    python: str,
    index: str,
    packages: Mapping[str, str],
    extras: Mapping[str, Sequence[str]] | None = None,
    host: tuple[str, str, str] = ("580", "12.8", "12.0a"),
    platform: str | None = None,
    sections: str = "",
    required: Sequence[str] = ("host",),
    validation: str = "",
) -> str:
    """The TOML text. `packages`: name -> version, each from the index `local`; `extras`:
    name -> its extras; `host`: (min_driver, cuda, the one target arch); `sections`: TOML
    tables placed before [validation]; `validation`: TOML text after its `required` line.
    `python` and `index` may be format placeholders."""
    min_driver, cuda, arch = host
    lines = [
        "schema_version = 1",
        f'name = "{name}"',
        f'description = "{description}"',
        f'python = "{python}"',
        *([f'platform = "{platform}"'] if platform else []),
        "",
        "[host]",
        f'min_driver = "{min_driver}"',
        f'cuda = "{cuda}"',
        f'target_archs = ["{arch}"]',
        "",
        "[indexes.local]",
        f'url = "{index}"',
        "explicit = false",
        "",
    ]
    for package, version in packages.items():
        lines += [f"[packages.{package}]", f'version = "{version}"', 'index = "local"']
        if extras and package in extras:
            lines.append("extras = [" + ", ".join(f'"{e}"' for e in extras[package]) + "]")
        lines.append("")
    text = "\n".join(lines) + "\n" + sections
    wanted = ", ".join(f'"{r}"' for r in required)
    return f"{text}[validation]\nrequired = [{wanted}]\n{validation}"
