"""What Slurm says now about the cluster's nodes (`sinfo`: which a fleet leaves out) and about
a fleet's array elements (`scontrol show job`, else `sacct`)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from stackgate.errors import StackgateError
from stackgate.proc import run
from validators.fleet.slurm import hostlist

_UNAVAILABLE = ("down", "drain", "fail", "maint", "inval", "future", "unknown", "power")


def parse_sinfo_nodes(
    text: str, expand: Callable[[str], list[str]] = hostlist.expand_hostlist
) -> dict[str, tuple[str, str]]:
    """{node: (state, reason)} from `sinfo -h -o %N|%T|%E` (one line per group of nodes in
    one state, `expand` turning its hostlist into names) or `sinfo -h -N -o ...` (a node a
    line)."""
    out: dict[str, tuple[str, str]] = {}
    for line in text.splitlines():
        parts = line.strip().split("|", 2)
        if len(parts) == 3 and parts[0]:
            for node in expand(parts[0]):
                out[node] = (parts[1], parts[2])
    return out


def unavailable_nodes(
    nodes: list[str], text: str, expand: Callable[[str], list[str]] = hostlist.expand_hostlist
) -> dict[str, str]:
    """Nodes of the set Slurm would not start a job on now, with Slurm's words."""
    states = parse_sinfo_nodes(text, expand)
    out: dict[str, str] = {}
    for node in nodes:
        if node not in states:
            out[node] = "not a node of this Slurm cluster (sinfo does not list it)"
            continue
        state, reason = states[node]
        if state.endswith("*") or any(word in state.lower() for word in _UNAVAILABLE):
            why = f"slurm says {state}" + (f" ({reason})" if reason and reason != "none" else "")
            out[node] = f"not submitted: {why}"
    return out


def probe_unavailable(nodes: list[str]) -> dict[str, str]:
    """The cluster's nodes by state in one `sinfo` (a line per state and reason, hostlists
    expanded by Slurm's `scontrol show hostnames`), filtered here: far faster at scale than
    `sinfo -N`, a line per node (benchmarks/fleet/results/fleet_pin.md)."""
    done = run(["sinfo", "-h", "-o", "%N|%T|%E"])
    return unavailable_nodes(
        nodes, done.stdout, lambda text: hostlist.expand([text], ask_slurm=True)
    )


_FIELD = re.compile(r"(\w+)=(\S*)")


@dataclass(frozen=True)
class ElementState:
    array: str
    task: int
    state: str
    node: str | None
    exit_code: str | None
    reason: str | None
    source: str = "scontrol"

    @property
    def job(self) -> str:
        return f"{self.array}_{self.task}"


def parse_show_job(text: str) -> list[ElementState]:
    """Elements of arrays from `scontrol show job -o <A>` (one line per job record)."""
    out: list[ElementState] = []
    for line in text.splitlines():
        fields = dict(_FIELD.findall(line))
        task = fields.get("ArrayTaskId", "")
        array = fields.get("ArrayJobId", "")
        if not task.isdigit() or not array.isdigit():
            continue  # a still-pending remainder prints as e.g. 0-3%2
        node = fields.get("NodeList")
        reason = fields.get("Reason")
        out.append(
            ElementState(
                array=array,
                task=int(task),
                state=fields.get("JobState", "UNKNOWN"),
                node=None if node in (None, "(null)", "None assigned") else node,
                exit_code=fields.get("ExitCode"),
                reason=None if reason in (None, "None") else reason,
            )
        )
    return sorted(out, key=lambda e: (e.array, e.task))


_SACCT_JOB = re.compile(r"^(\d+)_(\d+)\Z")


def parse_sacct(text: str) -> list[ElementState]:
    """Elements from `sacct -n -P -X -o JobID,State,ExitCode,NodeList,Reason -j A,...`."""
    out: list[ElementState] = []
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 5:
            continue
        match = _SACCT_JOB.match(parts[0])
        if match is None:
            continue  # a pending remainder (A_[0-3]) or a step line
        state = parts[1].split()[0] if parts[1].strip() else "UNKNOWN"  # "CANCELLED by 0"
        node, reason = parts[3], parts[4]
        out.append(
            ElementState(
                array=match[1],
                task=int(match[2]),
                state=state,
                node=None if node in ("", "None assigned", "(null)") else node,
                exit_code=parts[2] or None,
                reason=None if reason in ("", "None") else reason,
                source="sacct",
            )
        )
    return sorted(out, key=lambda e: (e.array, e.task))


def element_states(arrays: list[str]) -> list[ElementState]:
    """What Slurm says about each element: `scontrol show job` while slurmctld remembers the
    job (MinJobAge, 300 s by default, after it ended), else `sacct` where accounting exists;
    [] when neither knows (callers keep what they learned before)."""
    found: list[ElementState] = []
    forgotten: list[str] = []
    for array in arrays:
        done = run(["scontrol", "show", "job", "-o", array], check=False)
        states = parse_show_job(done.stdout) if done.returncode == 0 else []
        if states:
            found += states
        else:
            forgotten.append(array)
    if forgotten:
        fields = "JobID,State,ExitCode,NodeList,Reason"
        argv = ["sacct", "-n", "-P", "-X", "-o", fields, "-j", ",".join(forgotten)]
        try:
            done = run(argv, check=False)
        except StackgateError:  # no sacct on this machine
            return found
        if done.returncode == 0:
            found += parse_sacct(done.stdout)
    return found
