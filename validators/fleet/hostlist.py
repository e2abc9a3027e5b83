"""`--nodes` in Slurm's hostlist form (`a,b`, `gpu[01-03,07]`, `gpu[01-02]-ib[1-2]`) as names.

Two maintained expanders, no hand-written one: python-hostlist (NSC's, GPL-2.0-or-later) reads
every item, so a malformed one (`gpu[3-1]`, `gpu[1-3`, `a[]`) is refused the same way with or
without Slurm; where the scheduler is Slurm and `scontrol` reaches a configuration, Slurm's own
`scontrol show hostnames` then gives the names, so what is submitted is what Slurm will call
the nodes. The two agree on every pattern tests/fleet/test_hostlist.py runs on a real
`scontrol` except a suffix after a range (`x[001-003]y`): Slurm refuses it, python-hostlist
expands it; where Slurm is asked, it is refused. `scontrol` exits 0 on a hostlist it refuses,
with nothing on stdout and `Invalid hostlist` on stderr; it exits 1 where it finds no
configuration (a dry run on a machine outside the cluster): python-hostlist's answer stands.
Slurm is asked only about items with a range: `a,b` is the same to both, and an item with a
space (`a,b c`, which Slurm would split) keeps python-hostlist's `b c`, refused by the spec.
"""

from __future__ import annotations

import subprocess

import hostlist

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
        names: list[str] = hostlist.expand_hostlist(item, allow_duplicates=True)
    except hostlist.BadHostlist as exc:
        raise BadInput(f"--nodes {item!r}: not a hostlist ({exc})") from None
    return [n.strip() for n in names if n.strip()]


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
