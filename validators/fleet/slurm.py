"""Slurm: job arrays (one element per node) and an `afterany` collector, from fleet/slurm/.

Submission, in order (every step a real Slurm command; `plan_commands` lists them for --dry-run):

1. `sbatch --parsable --hold validate.sbatch` -> the array job ids A1, A2... (held: nothing
   starts yet); with pinning, arrays of at most LIBSLURM_ARRAY_SIZE (100) elements when pinned
   through libslurm, PIN_ARRAY_SIZE (25) through scontrol (`pin_way`, `array_size`)
2. with pinning, `update JobId=A_i NodeList=<node i>` for every element: one update RPC each
   through libslurm (validators/fleet/slurm_pin.py: a helper compiled against the host's Slurm
   headers), else as lines to a few `scontrol` processes on their stdin (two RPCs each); then
   read back with one `squeue` (`_verify_pins`):
   a job array has one node request for all its elements, so Slurm alone may run two
   elements on one node and none on another; updating a pending element splits it off with
   its own node.
   The price: when Slurm cannot start one element of an array, its schedulers skip the rest of
   that array in the same pass (an optimization, src/slurmctld/job_scheduler.c
   `fill_array_reasons`), so an element pinned to a busy node holds back the ones behind it.
   Nodes Slurm already calls unavailable (down, drained, draining, failing, not responding)
   are therefore left out at submit time (`unavailable_nodes`) and reported MISSING with
   Slurm's reason; `--no-pin` trades the pinning for no waiting.
3. `sbatch --parsable --dependency=afterany:A1:A2... collect.sbatch` -> the collector C
4. `scontrol release A1,A2...`

Before step 1, `check_room` refuses a fleet that Slurm's MaxJobCount cannot hold (sbatch would
otherwise sleep and retry forever). A failure after step 1 cancels every array, so no held
array is left behind.
"""

from __future__ import annotations

import logging
import re
import shlex
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import jinja2

from stackgate.errors import CommandFailed, EnvironmentProblem, StackgateError
from stackgate.proc import run
from validators.fleet import slurm_pin
from validators.fleet.spec import FleetSpec, PinWith

log = logging.getLogger(__name__)

ARRAY_SCRIPT = "validate.sbatch"
COLLECT_SCRIPT = "collect.sbatch"
ARRAY_ID = "<ARRAY_JOB_ID>"


def templates_dir() -> Path:
    """fleet/slurm in the checkout this package runs from (data, like stacks/ and images/)."""
    return Path(__file__).resolve().parents[2] / "fleet" / "slurm"


def render(spec: FleetSpec) -> dict[str, str]:
    """The two batch scripts, by file name."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(templates_dir()),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,  # shell scripts, quoted by the `q` filter where a value is a word
    )
    env.filters["q"] = lambda value: shlex.quote(str(value))
    return {
        name: env.get_template(f"{name}.j2").render(spec=spec)
        for name in (ARRAY_SCRIPT, COLLECT_SCRIPT)
    }


DEFAULT_MAX_ARRAY_SIZE = 1001  # Slurm's default MaxArraySize: indices 0..1000
DEFAULT_MAX_JOB_COUNT = 10_000  # Slurm's default MaxJobCount: job records slurmctld holds
# `scontrol update JobId=A_i` first loads array A's job records (REQUEST_JOB_INFO_SINGLE in
# slurmctld's debug log: every element already split off), so one update costs more the larger
# the array: 9.8 ms per update in arrays of 1,000 and 4.2 ms in arrays of 100 on one-host Slurm
# 22.05, one scontrol; 8.3 ms and 2.0 ms with 4 scontrols at once
# (benchmarks/fleet/results/fleet_pin.md). A whole 10,000-node submit costs 54-62 s of CPU in all
# with arrays of 100 (slurmctld ~30 s of it) and 41-42 s with arrays of 25 (slurmctld 22-24 s,
# the client 13-14 s); `scontrol show job` once per array afterwards (elements.learn) costs
# 3.8 s instead of 1.6 s for the 400 arrays. Fleets pinned through scontrol are therefore arrays
# of at most 25.
PIN_ARRAY_SIZE = 25
PIN_WORKERS = 8  # scontrol processes at once, each reading its share of the updates on stdin
# Through libslurm (one update RPC per element, no array load) the number of arrays is what
# costs: a whole 10,000-node submit took 22.7 s in arrays of 25, 6.7 s in arrays of 100 and
# 5.4 s in arrays of 1,000 (scontrol: 39.2 s and 43.1 s for 25 and 100), one run each, same
# cluster (benchmarks/fleet/results/fleet_pin.md). 100, not 1,000: an element pinned to a busy
# node holds back the rest of its array (the module docstring), so smaller arrays limit that.
LIBSLURM_ARRAY_SIZE = 100
# libslurm helper processes at once: 2,000 pins took 1.6 s with one and 1.2 s with 4
HELPER_WORKERS = 4
PinnedWith = Literal["libslurm", "scontrol", "none"]
SBATCH_TIMEOUT_S = 120.0  # sbatch sleeps and retries forever while slurmctld says "not now"


@dataclass(frozen=True)
class Chunk:
    """One array of the fleet: elements 0..count-1 are targets offset..offset+count-1."""

    offset: int
    count: int


def chunks(targets: int, max_array_size: int) -> list[Chunk]:
    """Slurm refuses an array index >= MaxArraySize: a fleet larger than that is several
    arrays (each element finds its node index as offset + SLURM_ARRAY_TASK_ID)."""
    size = max(1, max_array_size)
    return [Chunk(o, min(size, targets - o)) for o in range(0, targets, size)]


@dataclass(frozen=True)
class Limits:
    """The slurm.conf limits a fleet runs into."""

    max_array_size: int = DEFAULT_MAX_ARRAY_SIZE
    max_job_count: int = DEFAULT_MAX_JOB_COUNT


def parse_limits(config: str) -> Limits:
    """MaxArraySize and MaxJobCount from `scontrol show config` (Slurm's defaults if absent)."""

    def value(name: str, default: int) -> int:
        match = re.search(rf"^{name}\s*=\s*(\d+)", config, re.MULTILINE)
        return int(match[1]) if match else default

    return Limits(
        value("MaxArraySize", DEFAULT_MAX_ARRAY_SIZE), value("MaxJobCount", DEFAULT_MAX_JOB_COUNT)
    )


def limits() -> Limits:
    done = run(["scontrol", "show", "config"], check=False)
    return parse_limits(done.stdout) if done.returncode == 0 else Limits()


def max_array_size() -> int:
    return limits().max_array_size


@dataclass(frozen=True)
class PinWay:
    """How a submit pins its elements: decided before its arrays are sized (the size that
    costs least differs: LIBSLURM_ARRAY_SIZE, PIN_ARRAY_SIZE), the helper built once for it."""

    way: PinnedWith
    helper: Path | None = None

    @property
    def array_size(self) -> int:
        return LIBSLURM_ARRAY_SIZE if self.way == "libslurm" else PIN_ARRAY_SIZE


@contextmanager
def pin_way(
    pin: bool, how: PinWith, cc: str | None = None, *, build: bool = True
) -> Iterator[PinWay]:
    """The way a fleet pins (`spec.slurm.pin`, `.pin_with`): none without pinning; scontrol
    when asked; else libslurm, its helper built into a private temporary folder that lasts as
    long as the caller needs it, or scontrol with a warning where it cannot be built (an
    error with --pin-with libslurm). `build=False` (a dry run) compiles nothing: the way is
    the one the helper's compiler and header, looked at, would give; no helper is made."""
    if not pin or how == "scontrol":
        yield PinWay("scontrol" if pin else "none")
        return
    if not build:
        yield PinWay("libslurm" if slurm_pin.can_build(cc) else "scontrol")
        return
    with tempfile.TemporaryDirectory(prefix="stackgate-pin-") as work:
        try:
            helper: Path | None = slurm_pin.build_helper(Path(work), cc)
        except slurm_pin.PinHelperUnavailable as exc:
            if how == "libslurm":
                raise EnvironmentProblem(
                    f"--pin-with libslurm: the pin helper cannot be built here: {exc}",
                    details=["--pin-with scontrol pins through scontrol instead"],
                ) from None
            log.warning("pinning through scontrol: the libslurm helper cannot be built: %s", exc)
            helper = None
        yield PinWay("libslurm", helper) if helper is not None else PinWay("scontrol")


def array_size(spec: FleetSpec, max_array: int, way: PinWay) -> int:
    """Elements per array: MaxArraySize, or the pin way's size when pinning."""
    size = max(1, max_array)
    return min(size, way.array_size) if spec.slurm.pin else size


def job_records() -> int:
    """What slurmctld counts against MaxJobCount now: every job, every element of an array
    (a pending array counts as its number of elements), finished ones not yet purged."""
    done = run(["squeue", "-h", "-r", "-t", "all", "-o", "%i"])
    return sum(1 for line in done.stdout.splitlines() if line.strip())


def check_room(targets: int, limit: Limits, held: int) -> None:
    """Refuse a fleet that MaxJobCount cannot hold. slurmctld takes a submit only while the
    jobs it counts, the new ones included, stay below MaxJobCount (an array counts as its
    elements: MaxJobCount=5 took an array of 4 and refused one of 5), and answers one over
    the limit with EAGAIN: sbatch then sleeps and retries for ever. A fleet is one job per
    node and the collector."""
    need = targets + 1
    room = limit.max_job_count - 1 - held
    if need > room:
        raise EnvironmentProblem(
            f"Slurm's MaxJobCount ({limit.max_job_count}) leaves room for {max(room, 0)} "
            f"job(s); this fleet needs {need} ({targets} node(s), one job each, and the collector)",
            details=[
                f"slurmctld counts {held} job(s) now (squeue -r -t all: every array element, "
                "finished ones not yet purged)",
                f"set MaxJobCount >= {need + held + 1} in slurm.conf and restart slurmctld, "
                "or submit fewer nodes at once",
            ],
        )


def array_id(i: int) -> str:
    return ARRAY_ID if i == 0 else f"<ARRAY_JOB_ID_{i}>"


def throttle_lag(spec: FleetSpec, size: int) -> int:
    """With --throttle K, array i waits for array i - lag to end (`afterany`): at most lag
    arrays run at once, each `%K`, so at most K elements of the fleet (lag = K // size)."""
    throttle = spec.slurm.throttle
    return max(1, throttle // max(1, size)) if throttle else 0


def _after(ids: list[str], i: int, lag: int) -> str | None:
    return ids[i - lag] if lag and i >= lag else None


def _array_command(spec: FleetSpec, script: Path, chunk: Chunk, after: str | None) -> list[str]:
    throttle = f"%{spec.slurm.throttle}" if spec.slurm.throttle else ""
    chain = [f"--dependency=afterany:{after}"] if after else []
    return [
        "sbatch",
        "--parsable",
        "--hold",
        *chain,
        f"--array=0-{chunk.count - 1}{throttle}",
        # On the command line, one argv word: a path with a space needs no quoting here.
        f"--output={spec.folder / 'logs' / 'validate-%A_%a.out'}",
        f"--export=ALL,STACKGATE_FLEET_OFFSET={chunk.offset}",
        str(script),
    ]


def plan_commands(
    spec: FleetSpec,
    scripts_dir: Path,
    arrays: list[str] | None = None,
    max_array: int = DEFAULT_MAX_ARRAY_SIZE,
    way: PinWay = PinWay("libslurm"),
) -> list[list[str]]:
    """Every command submit runs, in order (array ids are known only after their sbatch); a pin
    is listed as the `scontrol update` it is (through libslurm: that command's one RPC)."""
    size = array_size(spec, max_array, way)
    parts = chunks(len(spec.targets), size)
    ids = arrays or [array_id(i) for i in range(len(parts))]
    lag = throttle_lag(spec, size)
    commands = [
        _array_command(spec, scripts_dir / ARRAY_SCRIPT, c, _after(ids, i, lag))
        for i, c in enumerate(parts)
    ]
    commands += pin_commands(spec, ids, size)
    commands.append(
        [
            "sbatch",
            "--parsable",
            f"--dependency=afterany:{':'.join(ids)}",
            f"--output={spec.folder / 'logs' / 'collect-%j.out'}",
            str(scripts_dir / COLLECT_SCRIPT),
        ]
    )
    commands.append(["scontrol", "release", ",".join(ids)])
    return commands


def pin_commands(spec: FleetSpec, ids: list[str], size: int) -> list[list[str]]:
    """One `scontrol update` per element (`_pin_all` feeds them to scontrol on stdin)."""
    if not spec.slurm.pin:
        return []
    return [
        ["scontrol", "update", f"JobId={ids[i // size]}_{i % size}", f"NodeList={node}"]
        for i, node in enumerate(spec.targets)
    ]


def _released(stderr: str) -> bool:
    """`scontrol release` exits 1 when one element already ended (cancelled while held),
    printing `1_0-1: No error` / `1_2: Job has already finished`; the others were released."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    return bool(lines) and all(
        line.endswith(("No error", "Job has already finished")) for line in lines
    )


def _job_id(stdout: str) -> str:
    """`sbatch --parsable` prints `id` or `id;cluster`."""
    first = stdout.strip().split(";")[0]
    if not first.isdigit():
        raise EnvironmentProblem(f"sbatch printed no job id: {stdout.strip()!r}")
    return first


@dataclass(frozen=True)
class Submitted:
    arrays: list[str]
    offsets: list[int]
    collector_job: str
    commands: list[list[str]]
    max_array_size: int
    pinned_with: PinnedWith = "none"


def _pin_all(commands: list[list[str]], way: PinWay) -> None:
    """Every pin (`scontrol update JobId=A_i NodeList=node` in the plan) the way decided, then
    `_verify_pins` reads back what Slurm holds."""
    if not commands:
        return
    if way.helper is None:
        _pin_with_scontrol(commands)
        return
    pairs = [(a[2].removeprefix("JobId="), a[3].removeprefix("NodeList=")) for a in commands]
    _verify_pins(commands, slurm_pin.pin(way.helper, pairs, HELPER_WORKERS))


def _pin_with_scontrol(commands: list[list[str]]) -> None:
    """Every `scontrol update`, as lines on the stdin of PIN_WORKERS scontrol processes (one
    process start per share, not per element), then `_verify_pins` reads back what Slurm
    holds: scontrol reading commands exits 1 when one failed without saying which."""
    lines = [shlex.join(argv[1:]) for argv in commands]  # "update JobId=A_i NodeList=node"
    ended = slurm_pin.fed(["scontrol"], lines, PIN_WORKERS)
    errors = [e for _, done in ended if done.returncode and (e := done.stderr.strip())]
    _verify_pins(commands, errors)


def parse_requested(text: str) -> dict[str, str]:
    """{`A_i`: requested nodes} from `squeue -h -r -o %i|%n` (an element not pinned: '')."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        job, _, nodes = line.strip().partition("|")
        if job:
            out[job] = nodes
    return out


def _verify_pins(commands: list[list[str]], errors: list[str]) -> None:
    """Every element's requested node is the one it was pinned to, as squeue reads it back."""
    wanted = {
        argv[2].removeprefix("JobId="): argv[3].removeprefix("NodeList=") for argv in commands
    }
    arrays = sorted({job.split("_")[0] for job in wanted})
    done = run(["squeue", "-h", "-r", "-t", "all", "-j", ",".join(arrays), "-o", "%i|%n"])
    held = parse_requested(done.stdout)
    wrong = [f"{job}: wanted {node}, Slurm holds {held.get(job) or 'no node'}"
             for job, node in wanted.items() if held.get(job) != node]  # fmt: skip
    if wrong:
        raise EnvironmentProblem(
            f"Slurm did not pin {len(wrong)} of {len(wanted)} element(s) to their node",
            details=[*wrong[:20], *(e for text in errors[:3] for e in text.splitlines()[-3:])],
        )


def submit(
    spec: FleetSpec, scripts_dir: Path, *, before_release: Callable[[Submitted], None]
) -> Submitted:
    """Run the plan for real; the scripts must already be in scripts_dir. Held arrays, pins,
    the collector, then `before_release` (the caller makes the job folder final), then
    release. Any failure before the release cancels every job submitted: all or nothing."""
    limit = limits()
    check_room(len(spec.targets), limit, job_records())
    with pin_way(spec.slurm.pin, spec.slurm.pin_with, spec.slurm.cc) as way:
        return _submit(spec, scripts_dir, limit, way, before_release)


def _submit(
    spec: FleetSpec,
    scripts_dir: Path,
    limit: Limits,
    way: PinWay,
    before_release: Callable[[Submitted], None],
) -> Submitted:
    size = array_size(spec, limit.max_array_size, way)
    parts = chunks(len(spec.targets), size)
    lag = throttle_lag(spec, size)
    arrays: list[str] = []
    done: list[list[str]] = []
    try:
        for i, chunk in enumerate(parts):
            argv = _array_command(spec, scripts_dir / ARRAY_SCRIPT, chunk, _after(arrays, i, lag))
            arrays.append(_job_id(run(argv, timeout=SBATCH_TIMEOUT_S).stdout))
            done.append(argv)
        planned = plan_commands(spec, scripts_dir, arrays, limit.max_array_size, way)
        *rest, release = planned[len(parts) :]
        pins, collect = rest[:-1], rest[-1]
        _pin_all(pins, way)
        done += pins
        collector = _job_id(run(collect, timeout=SBATCH_TIMEOUT_S).stdout)
        done.append(collect)
        offsets = [c.offset for c in parts]
        submitted = Submitted(arrays, offsets, collector, done, limit.max_array_size, way.way)
        before_release(submitted)
    except (StackgateError, OSError):
        if arrays:
            run(["scancel", *arrays], check=False)
        raise
    result = run(release, check=False)
    if result.returncode != 0 and not _released(result.stderr):
        run(["scancel", *arrays], check=False)
        raise CommandFailed(release, result.returncode, result.stdout, result.stderr)
    return Submitted(arrays, offsets, collector, [*done, release], limit.max_array_size, way.way)


_UNAVAILABLE = ("down", "drain", "fail", "maint", "inval", "future", "unknown", "power")


def _one(name: str) -> list[str]:
    return [name]


def parse_sinfo_nodes(
    text: str, expand: Callable[[str], list[str]] = _one
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
    nodes: list[str], text: str, expand: Callable[[str], list[str]] = _one
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


def hostnames(hostlist: str) -> list[str]:
    """Slurm's hostlist (`gpu[001-120,130],n5`) as names, by Slurm's own expansion."""
    if "[" not in hostlist and "," not in hostlist:
        return [hostlist]
    return run(["scontrol", "show", "hostnames", hostlist]).stdout.split()


def probe_unavailable(nodes: list[str]) -> dict[str, str]:
    """The cluster's nodes by state in one `sinfo` (a line per state and reason, hostlists
    expanded by `scontrol show hostnames`), filtered here. `sinfo -N` (a line per node) took
    24.6 s at 10,000 nodes and `sinfo -N -n <every name>` 32.8 s; this form 0.5 s
    (benchmarks/fleet/results/fleet_pin.md)."""
    done = run(["sinfo", "-h", "-o", "%N|%T|%E"])
    return unavailable_nodes(nodes, done.stdout, hostnames)


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
