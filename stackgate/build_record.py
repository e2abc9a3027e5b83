"""The build record: what the builder writes into every environment and the validators read.

`<env>/stackgate/build-record.json` (RECORD_RELPATH). The builder writes it through
`BuildRecord.write`; validators (records, preflight, gate) read it through
`read_build_record`; tests build it through the same model. Field names are a contract with
records already on disk: add fields, never rename them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError

from stackgate.errors import BadInput, EnvironmentProblem
from stackgate.files import read_json_file
from stackgate.model import StrictModel, parsed, validation_problems
from stackgate.resource_limits import GIB, HostResources
from stackgate.topology import Topology

RECORD_DIRNAME = "stackgate"
RECORD_FILENAME = "build-record.json"
RECORD_RELPATH = Path(RECORD_DIRNAME) / RECORD_FILENAME
RECORD_SCHEMA_VERSION: Literal[1] = 1
MAX_BUILD_RECORD_BYTES = 16 << 20

# Where the topology that picked the env profile came from: --topology, or the host snapshot's
# GPU inventory (NVML, or nvidia-smi when NVML cannot load), or nowhere (no profile).
TopologySource = Literal["flag", "nvml", "nvidia-smi", "none"]
LimitedBy = Literal["cpu", "memory", "max_jobs"]


class JobPlan(StrictModel):
    """The planned parallelism with every input that produced it and why."""

    jobs: int = Field(ge=1, description="Parallel compile processes (ninja/make -j, MAX_JOBS).")
    nvcc_threads: int = Field(ge=1, description="nvcc --threads inside each compile job.")
    limited_by: LimitedBy
    usable_cpus: int
    usable_memory_bytes: int
    memory_margin_bytes: int
    memory_budget_bytes: int = Field(description="Usable memory minus the margin.")
    memory_per_job_bytes: int = Field(description="Planned peak RSS of one compile job.")
    memory_per_job_source: Literal["manifest", "measured"]
    swap_bytes: int
    resources: HostResources
    reasons: list[str]

    def env(self) -> dict[str, str]:
        """The variables every build system we drive reads its parallelism from."""
        jobs = str(self.jobs)
        threads = str(self.nvcc_threads)
        return {
            "MAX_JOBS": jobs,
            "CMAKE_BUILD_PARALLEL_LEVEL": jobs,
            "MAKEFLAGS": f"-j{jobs}",
            # Read by build scripts that pass it to ninja (sgl-kernel's CI); ninja itself
            # takes only -j, see ninja_args().
            "NINJAFLAGS": f"-j{jobs}",
            "NVCC_THREADS": threads,
            "SGL_KERNEL_COMPILE_THREADS": threads,
            "FLASHINFER_NVCC_THREADS": threads,
            "UV_CONCURRENT_BUILDS": "1",
        }

    def summary(self) -> str:
        return (
            f"{self.jobs} job(s) x {self.nvcc_threads} nvcc thread(s), limited by "
            f"{self.limited_by} ({self.usable_cpus} CPUs, "
            f"{self.memory_budget_bytes / GIB:.1f} GiB budget / "
            f"{self.memory_per_job_bytes / GIB:.2f} GiB per job, {self.memory_per_job_source})"
        )


class BuildHost(StrictModel):
    """The machine a build ran on (the build record's `host` block)."""

    hostname: str
    kernel: str
    machine: str
    os_release: str = Field(description="PRETTY_NAME from /etc/os-release, or 'unknown'.")
    usable_cpus: int
    mem_total_bytes: int
    swap_bytes: int
    cgroup_version: str


class ToolVersions(StrictModel):
    stackgate: str
    uv: str
    python: str = Field(description="Full version of the env's interpreter.")
    python_path: str = Field(description="The base interpreter the env was made from.")
    git: str | None = None


class PatchRecord(StrictModel):
    package: str
    path: str
    sha256: str


class TreeHash(StrictModel):
    sha256: str
    files: int
    bytes: int
    scheme: int = Field(
        default=1, description="stackgate.envtree hash scheme (records without it: 1)."
    )


class BaseSite(StrictModel):
    """Another Python's site-packages an env is layered over (`builder build --base-site`)."""

    path: str = Field(description="The site-packages folder appended to sys.path.")
    pth: str = Field(description="The .pth file in the env's site-packages that appends it.")
    packages: dict[str, str] = Field(
        description="Distributions found there (canonical name -> version): NOT built from "
        "the lock, NOT in `packages`, not hashed into the tree."
    )
    records_sha256: dict[str, str] = Field(
        default_factory=dict,
        description="canonical name -> sha256 of its dist-info RECORD (the file hashes the "
        "distribution installed): the folder's identity a new host's base site is checked "
        "against (build records before it: versions only).",
    )


class FileClash(StrictModel):
    """One path that two or more installed distributions' RECORDs list
    (stackgate.envtree.wheel_records)."""

    path: str = Field(description="Relative to the env's root.")
    owners: list[str] = Field(description="The dist-info folders whose RECORD lists it.")
    holds: list[str] = Field(
        description="The owners whose RECORD sha256 the env's copy matches: whose copy it "
        "holds (empty when no owner lists a hash)."
    )
    same_bytes: bool = Field(description="Every owner's RECORD lists the same sha256.")
    chosen: str | None = Field(
        default=None,
        description="The owner whose copy the env must hold (stackgate.envtree.wheel_records."
        "chosen_owner: of the owners listing a sha256, the last in the lock's order by project "
        "name); the builder puts its copy in place, so `holds` names it unless that copy could "
        "not be found. None: no owner lists a hash, or a record from before the rule.",
    )


class WheelRecords(StrictModel):
    """The installed files checked against their wheels' RECORDs at build time."""

    files_checked: int = Field(ge=0, description="Files hashed against at least one RECORD.")
    clashes: list[FileClash] = Field(
        default_factory=list, description="Paths two or more distributions install."
    )


KernelEngine = Literal["flashinfer", "sglang"]


class KernelFile(StrictModel):
    """One file a build-time kernel put into the env."""

    path: str = Field(description="Relative to the env's root.")
    sha256: str
    bytes: int = Field(ge=0)


class BuiltKernel(StrictModel):
    """One just-in-time kernel of a kernels request, as the build left it."""

    engine: KernelEngine
    call: str = Field(description="The engine function that makes it (`module:function`).")
    args: list[Any] = Field(default_factory=list)
    kwargs: dict[str, Any] = Field(default_factory=dict)
    arch: str
    ok: bool = Field(description="False: not in the env; the first server compiles it.")
    how: str = Field(
        description="compiled | present (already in the env) | copied (--kernels-from) | failed"
    )
    name: str | None = Field(default=None, description="The engine's module name.")
    seconds: float = 0.0
    files: list[KernelFile] = Field(default_factory=list)
    error: str | None = Field(default=None, description="Why it is not in the env (tail).")


class KernelsRecord(StrictModel):
    """Kernels compiled at build time into the env (`builder build --kernels`), so a server
    on a GPU host loads them instead of compiling them on first use."""

    request_sha256: str = Field(description="sha256 of the requests' canonical JSON.")
    requests: list[str] = Field(description="The request files as given.")
    engines: dict[str, str] = Field(description="The engine distributions' versions in the env.")
    toolchain: dict[str, str] = Field(
        description="nvcc version, CUDA home, the libcuda link stub used, headers taken from "
        "the env's CUDA wheels; empty when every kernel was copied."
    )
    source: str | None = Field(
        default=None, description="--kernels-from: the env whose build-time kernels were copied."
    )
    kernels: list[BuiltKernel]
    seconds: float

    def missing(self) -> list[BuiltKernel]:
        return [k for k in self.kernels if not k.ok]


PycMode = Literal["checked-hash"]


class BytecodeRecord(StrictModel):
    """Byte-code compiled at build time into the env's site-packages (builder.venv.bytecode).
    The `.pyc` files live in `__pycache__` folders, which the tree hash leaves out
    (stackgate.envtree): what runs is checked through the hashed `.py` sources instead."""

    mode: PycMode = Field(
        description="PEP 552 invalidation mode: the interpreter checks each .pyc against the "
        "sha of its .py at every import, and recompiles when they differ."
    )
    jobs: int = Field(ge=1, description="Compile workers (the build's job plan).")
    pyc_files: int = Field(ge=0, description="`.pyc` files under site-packages after the step.")
    pyc_bytes: int = Field(ge=0)
    reused: int = Field(
        default=0,
        ge=0,
        description="`.pyc` files taken from the store of earlier builds (builder.venv.pyc_store) "
        "instead of compiled: the same source, interpreter and mode.",
    )
    failed: int = Field(
        ge=0, description="`.py` files the env's interpreter cannot compile (nor import)."
    )
    failed_examples: list[str] = Field(
        default_factory=list, description="The first few of them, relative to site-packages."
    )
    seconds: float


class BuildRecord(StrictModel):
    """What was built, from what, where, with which tools, how long it took, and what is in it."""

    schema_version: Literal[1] = RECORD_SCHEMA_VERSION
    stack: str
    manifest_path: str
    manifest_hash: str = Field(
        description="sha256 of the manifest fields the lock depends on (not of the file's "
        "bytes: that is a validation record's manifest_sha256)."
    )
    lock_hash: str = Field(description="sha256 of uv.lock's bytes.")
    env_name: str = Field(description="<stack>-<lockhash[:12]>")
    env_path: str = Field(description="Final path of the environment (after the rename).")
    created_at: str = Field(description="UTC ISO-8601 time the build finished.")
    offline: bool = False
    wheelhouse: str | None = None
    host: BuildHost
    tools: ToolVersions
    timings_s: dict[str, float] = Field(description="Seconds per build step, in order.")
    topology: Topology | None = Field(description="Topology whose env profile was applied.")
    topology_source: TopologySource
    env_profile: dict[str, str] = Field(description="Variables every process of the env gets.")
    env_profile_format: int | None = Field(
        default=None,
        description="How the profile module was written (stackgate.env_generated; records "
        "without it: dated).",
    )
    job_plan: JobPlan
    peak_rss_bytes: int | None = Field(
        default=None, description="Peak RSS of the whole build process tree (watchdog)."
    )
    peak_rss_per_job_bytes: int | None = Field(
        default=None, description="Largest RSS of a single compile process (watchdog)."
    )
    watchdog_pauses: int = 0
    patches: list[PatchRecord] = Field(default_factory=list)
    packages: dict[str, str] = Field(description="Installed distribution -> version.")
    base_site: BaseSite | None = Field(
        default=None,
        description="Set when the env is layered over another Python's site-packages "
        "(`builder build --base-site`): what comes from there was not built here.",
    )
    tree: TreeHash
    wheel_records: WheelRecords | None = Field(
        default=None,
        description="The RECORD check's outcome: files checked and every path several "
        "distributions install (records without it: built before it was kept).",
    )
    kernels: KernelsRecord | None = Field(
        default=None,
        description="Build-time kernels (`builder build --kernels`): in the env, so in its "
        "tree hash; None when none were asked for.",
    )
    bytecode: BytecodeRecord | None = Field(
        default=None,
        description="Byte-code compiled at build time (not in the tree hash); None: none was "
        "compiled (records of builds before the step existed, or a build without it).",
    )

    def write(self, env: Path) -> Path:
        target = env / RECORD_RELPATH
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(".json.tmp")
        tmp.write_text(self.model_dump_json(indent=2) + "\n", encoding="utf-8")
        tmp.replace(target)
        return target


class BuildOutput(StrictModel):
    """`builder build --json` on success (builder/commands/build.py writes it; reproduce reads
    it with model_validate). A refusal prints stackgate.cli_output.ErrorOutput instead."""

    ok: Literal[True] = True
    stack: str
    env: str
    reused: bool
    removed_partials: list[str] = Field(default_factory=list)
    log: str
    record: BuildRecord

    @classmethod
    def from_child(cls, stdout: str) -> BuildOutput:
        """What a `builder build --json` child that exited 0 printed; EnvironmentProblem when
        it is not a build result (reproduce and bisect read it so; a fleet node's step reads it
        with its own parse, which makes a bad answer that node's FAIL, not an error)."""
        try:
            return cls.model_validate_json(stdout)
        except ValidationError as exc:
            raise EnvironmentProblem(
                "`builder build --json` exited 0 without a valid build result",
                details=validation_problems(exc)[:10],
            ) from None


def build_record_path(env: Path) -> Path:
    return env / RECORD_RELPATH


def read_build_record(env: Path) -> BuildRecord:
    """The env's build record; BadInput naming the file when it is missing or invalid."""
    path = build_record_path(env)
    if not path.exists():
        raise BadInput(
            f"{env}: no build record at {path}; was this environment built by `stackgate build`?"
        )
    # Bounded, regular file only, duplicate keys refused (stackgate.files).
    data = read_json_file(path, MAX_BUILD_RECORD_BYTES)
    return parsed(BuildRecord, data, f"{path}: invalid build record")
