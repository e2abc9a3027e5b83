"""Demangle C++ symbol names with binutils' c++filt, in one batch (one process for all names)."""

from __future__ import annotations

from collections.abc import Iterable

from stackgate import proc
from stackgate.errors import StackgateError


def demangle(names: Iterable[str]) -> dict[str, str]:
    """Mangled -> readable; names c++filt is missing for map to themselves."""
    unique = sorted(set(names))
    if not unique or proc.find("c++filt") is None:
        return {n: n for n in unique}
    try:
        done = proc.run(["c++filt"], input_text="\n".join(unique) + "\n", timeout=30)
    except StackgateError:
        return {n: n for n in unique}
    lines = done.stdout.splitlines()
    if len(lines) != len(unique):
        return {n: n for n in unique}
    return dict(zip(unique, lines, strict=True))


def available() -> bool:
    return proc.find("c++filt") is not None
