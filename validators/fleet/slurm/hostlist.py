"""`--nodes` in Slurm's hostlist form (`a,b`, `gpu[01-03,07]`, `gpu[01-02]-ib[1-2]`) as names.

Our own small expander (a few dozen lines; the GPL-2.0-or-later python-hostlist cannot be a
runtime dependency of an Apache-2.0 tool) reads every item, so a malformed
one (`gpu[3-1]`, `gpu[1-3`, `a[]`) is refused the same way with or without Slurm; where the
scheduler is Slurm and `scontrol` reaches a configuration, Slurm's own `scontrol show
hostnames` then gives the names (the authority), so what is submitted is what Slurm will call
the nodes. The two agree on every pattern tests/fleet/test_hostlist.py runs on a real
`scontrol` except a suffix after a range (`x[001-003]y`): Slurm refuses it, the expander
expands it; where Slurm is asked, it is refused. `scontrol` exits 0 on a hostlist it refuses,
with nothing on stdout and `Invalid hostlist` on stderr; it exits 1 where it finds no
configuration (a dry run on a machine outside the cluster): the expander's answer stands.
Slurm is asked only about items with a range: `a,b` is the same to both, and an item with a
space (`a,b c`, which Slurm would split) keeps the expander's `b c`, refused by the spec.
"""

from __future__ import annotations

import itertools
import subprocess

from stackgate import proc
from stackgate.errors import BadInput

_SCONTROL_TIMEOUT_S = 60


def expand(items: list[str], *, ask_slurm: bool) -> list[str]:
    """Node names of every `--nodes` item, in order; BadInput naming the item if malformed."""
    scontrol = proc.find("scontrol") if ask_slurm else None
    out: list[str] = []
    for item in items:
        names = _by_library(item)
        if scontrol is not None and "[" in item and not any(c.isspace() for c in item):
            names = _by_slurm(scontrol, item) or names
        out.extend(names)
    return out


def _by_library(item: str) -> list[str]:
    try:
        names = expand_hostlist(item)
    except ValueError as exc:
        raise BadInput(f"--nodes {item!r}: not a hostlist ({exc})") from None
    return [n.strip() for n in names if n.strip()]


def expand_hostlist(text: str) -> list[str]:
    """`a,gpu[01-03,07]x[1-2]` as names, in order, duplicates kept; ValueError if malformed.
    Top-level commas split names; each `[...]` holds numbers and ranges `lo-hi` (hi >= lo,
    zero-padded to lo's width), and a name with several is their product, left to right."""
    out: list[str] = []
    for name in _split_top(text):
        if name:
            out.extend(_expand_name(name))
    return out


def _split_top(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "[":
            if depth:
                raise ValueError("nested '['")
            depth = 1
        elif char == "]":
            if not depth:
                raise ValueError("']' without '['")
            depth = 0
        elif char == "," and not depth:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise ValueError("'[' without ']'")
    parts.append(text[start:])
    return parts


def _expand_name(name: str) -> list[str]:
    pieces: list[list[str]] = []
    rest = name
    while "[" in rest:
        head, _, tail = rest.partition("[")
        body, _, rest = tail.partition("]")
        pieces += [[head], _numbers(body)]
    pieces.append([rest])
    return ["".join(combo) for combo in itertools.product(*pieces)]


def _numbers(body: str) -> list[str]:
    if not body:
        raise ValueError("empty '[]'")
    out: list[str] = []
    for part in body.split(","):
        low, dash, high = part.partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            raise ValueError(f"{part!r} is not a number or a range")
        if not dash:
            out.append(low)
            continue
        if int(high) < int(low):
            raise ValueError(f"range {part!r} runs backwards")
        out += [str(n).zfill(len(low)) for n in range(int(low), int(high) + 1)]
    return out


def _by_slurm(scontrol: str, item: str) -> list[str] | None:
    """Slurm's names for the item, None where scontrol cannot run (no configuration)."""
    try:
        done = subprocess.run(
            [scontrol, "show", "hostnames", item],
            capture_output=True,
            text=True,
            timeout=_SCONTROL_TIMEOUT_S,
            check=False,
            env=proc.child_env(),
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    names = done.stdout.split()
    if not names or "Invalid hostlist" in done.stderr:
        said = " ".join(done.stderr.split()) or "no names"
        raise BadInput(f"--nodes {item!r}: Slurm refuses this hostlist ({said})")
    return names
