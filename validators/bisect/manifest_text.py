"""A manifest dict written back as TOML (tables as [a.b] headers, everything else inline)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stackgate.toml_write import toml_key, toml_value


def toml_text(data: Mapping[str, Any]) -> str:
    lines: list[str] = []

    def table(path: list[str], body: Mapping[str, Any]) -> None:
        if path:
            lines.extend(["", "[" + ".".join(toml_key(p) for p in path) + "]"])
        for key, value in body.items():
            if not isinstance(value, Mapping):
                lines.append(f"{toml_key(key)} = {toml_value(value)}")
        for key, value in body.items():
            if isinstance(value, Mapping):
                table([*path, key], value)

    table([], data)
    return "\n".join(lines).lstrip("\n") + "\n"
