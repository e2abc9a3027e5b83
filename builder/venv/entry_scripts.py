"""The script uv generates for one distribution's console or GUI entry point, made from the one
it generated for another distribution's entry point of the same name.

uv writes `bin/<name>` for every `[console_scripts]` / `[gui_scripts]` entry: a header that
depends on the venv (a shebang, or a `/bin/sh` trampoline in a relocatable venv), then
`from <module> import <attr>` and `sys.exit(<attr.path>())`. The bytes exist only in the env
(no wheel holds them), so when two wheels define one command and uv wrote the other owner's
script last, the chosen owner's is rebuilt here by swapping those two lines; the caller uses it
only when its sha256 is the one the chosen owner's RECORD lists (uv's template changing makes
no wrong file, only no file).
"""

from __future__ import annotations

import configparser
import re
from pathlib import Path

_IMPORT = re.compile(rb"^from [\w.]+ import \w+\n", re.MULTILINE)
_CALL = re.compile(rb"sys\.exit\([\w.]+\(\)\)")
_SPEC = re.compile(r"^\s*([\w.]+)\s*:\s*([\w.]+)\s*(\[.*\])?\s*$")


def entry_point(dist_info: Path, name: str) -> str | None:
    """`module:attr` of the console or GUI script `name` in a dist-info's entry_points.txt."""
    parser = configparser.ConfigParser(interpolation=None, delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # names keep their case
    try:
        parser.read_string((dist_info / "entry_points.txt").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, configparser.Error):
        return None
    for section in ("console_scripts", "gui_scripts"):
        if parser.has_option(section, name):
            return parser.get(section, name)
    return None


def script_for(generated: bytes, spec: str) -> bytes | None:
    """uv's script for entry point `spec` with the header of `generated` (uv's script for
    another entry point in the same env); None when either is not of that shape."""
    found = _SPEC.match(spec)
    if found is None:
        return None
    module, attrs = found.group(1), found.group(2)
    head = attrs.split(".")[0]
    swapped, imports = _IMPORT.subn(
        lambda _m: f"from {module} import {head}\n".encode(), generated, count=1
    )
    swapped, calls = _CALL.subn(lambda _m: f"sys.exit({attrs}())".encode(), swapped, count=1)
    return swapped if imports == calls == 1 else None
