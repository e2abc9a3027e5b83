"""The stack manifest model (schema_version 2; 1 is read through stackgate.manifest.migrate):
strict, frozen pydantic v2 models.

A manifest is TOML in stacks/. Loading (TOML parsing, collecting every error with its file
and dotted path, cross references) lives in `stackgate.manifest.loading`; this module only
says what a valid manifest is, built from the value types of `stackgate.manifest.values`.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from packaging.utils import canonicalize_name
from packaging.version import Version
from pydantic import ConfigDict, Field, model_validator

from stackgate.manifest.migrate import NEVER_READ_TIMEOUTS
from stackgate.manifest.values import (
    ArchStr,
    EngineName,
    EnvVars,
    GitUrlStr,
    NameStr,
    PythonStr,
    RelPathStr,
    RequirementStr,
    Sha256Str,
    VersionStr,
)
from stackgate.model import StrictModel
from stackgate.topology import Topology
from stackgate.validator_groups import ORDER, ValidatorGroup

Platform = Literal["linux-x86_64", "linux-aarch64"]


class Strict(StrictModel):
    """Base of every manifest model: unknown keys are errors (StrictModel), values never
    coerced."""

    model_config = ConfigDict(strict=True, allow_inf_nan=False)


class Host(Strict):
    """What the host must provide; host-dependent rules compare against these."""

    min_driver: VersionStr = Field(description="Lowest NVIDIA driver the stack supports.")
    known_good_driver: VersionStr | None = Field(
        default=None, description="Driver the stack was proven on (informational)."
    )
    cuda: VersionStr = Field(description="CUDA toolkit version the stack is built for.")
    target_archs: list[ArchStr] = Field(
        min_length=1, description="GPU archs the stack must run on, e.g. ['12.0a']."
    )
    min_nvcc_for_jit: VersionStr | None = Field(
        default=None, description="Lowest nvcc that can JIT kernels for target_archs."
    )


class Index(Strict):
    url: str = Field(description="PEP 503 simple index URL (or a file:// folder).")
    explicit: bool = Field(
        default=True,
        description="Explicit indexes serve only the packages pinned to them.",
    )

    @model_validator(mode="after")
    def _url_scheme(self) -> Index:
        if not re.match(r"^(https?|file)://", self.url):
            raise ValueError(f"url '{self.url}' must start with https://, http:// or file://")
        return self


class Patch(Strict):
    path: RelPathStr = Field(description="Patch file, relative to the manifest's folder.")
    sha256: Sha256Str


class Package(Strict):
    """One pinned distribution: an exact version from an index, or a git ref with patches."""

    version: VersionStr | None = Field(
        default=None, description="Exact version, with local tag where the index has one."
    )
    index: NameStr | None = Field(default=None, description="Name of an index in [indexes].")
    git: GitUrlStr | None = Field(default=None, description="Git URL for a source build.")
    ref: str | None = Field(default=None, description="Tag or commit for `git`.")
    subdirectory: RelPathStr | None = Field(
        default=None, description="Folder of the package inside the git repository."
    )
    patches: list[Patch] = Field(default_factory=list)
    extras: list[NameStr] = Field(default_factory=list)
    cuda: VersionStr | None = Field(
        default=None,
        description="CUDA the wheel was built with, where its version has no +cuXYZ tag.",
    )
    optional: bool = False

    @model_validator(mode="after")
    def _one_source(self) -> Package:
        if self.git is None and self.version is None:
            raise ValueError("give either version or git (+ ref)")
        if self.git is not None and self.ref is None:
            raise ValueError("git needs a ref (tag or commit)")
        if self.git is None and (self.ref or self.patches or self.subdirectory):
            raise ValueError("ref, subdirectory and patches need git")
        return self

    @property
    def cuda_major(self) -> int | None:
        """CUDA major of the build: from a +cuXYZ local tag, else the `cuda` field."""
        if self.version is not None:
            local = Version(self.version).local or ""
            match = re.fullmatch(r"cu(\d{2,3})", local)
            if match:
                return int(match.group(1)[:-1])
        if self.cuda is not None:
            return Version(self.cuda).major
        return None


class BuildSettings(Strict):
    """How source-built packages compile; the job planner sizes parallelism from these."""

    cuda_archs: list[ArchStr] = Field(default_factory=list)
    memory_per_job_gb: float = Field(default=4.0, gt=0)
    nvcc_threads: int = Field(default=1, ge=1, le=64)
    max_jobs: int | None = Field(default=None, ge=1)
    memory_margin_gb: float = Field(default=2.0, ge=0)


class EnvironmentSettings(Strict):
    """Variables every process gets, plus per-topology profiles (tuning is topology's)."""

    common: EnvVars = Field(default_factory=dict)
    topology: dict[Topology, EnvVars] = Field(default_factory=dict)


class Speculative(Strict):
    algorithm: Literal["EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"]
    draft_model_path: str | None = None
    num_steps: int | None = Field(default=None, ge=1)
    eagle_topk: int | None = Field(default=None, ge=1)
    num_draft_tokens: int | None = Field(default=None, ge=1)


# Bounds on a benchmark's size: past them the client would build prompt arrays of tens of GB,
# open more sockets than a process may, or wait for days; `check` refuses them (exit 2) instead
# of serve-bench crashing mid-run. Far above any real benchmark (C=250 is the default's top).
MAX_CONCURRENCY = 4096
MAX_LEVEL_PROMPT_TOKENS = 64 << 20  # requests x input_len in one level (64 Mi token ids)


class BenchSettings(Strict):
    """How serve-bench loads a server: fixed-length seeded random prompts, a concurrency sweep."""

    input_len: int = Field(default=1024, ge=1, le=1 << 20, description="Prompt length in tokens.")
    output_len: int = Field(
        default=256, ge=2, le=1 << 20, description="Tokens generated per request."
    )
    concurrencies: list[Annotated[int, Field(ge=1, le=MAX_CONCURRENCY)]] = Field(
        default_factory=lambda: [1, 4, 16, 64, 250],
        min_length=1,
        max_length=64,
        description="Concurrency levels of the sweep (streams in flight).",
    )
    rounds: int = Field(
        default=2,
        ge=1,
        le=1000,
        description="Requests per level = max(8, rounds x concurrency).",
    )
    single_stream_requests: int = Field(default=8, ge=1, le=10_000)
    seed: int = Field(default=1, ge=0, le=(1 << 63) - 1, description="Seed of the random prompts.")
    prompt_format: Literal["token-ids", "text"] = Field(
        default="token-ids",
        description="token-ids: random ids sent as the prompt; text: random words "
        "(for servers that only take text; prompt length then read from usage).",
    )
    token_id_range: list[Annotated[int, Field(ge=0, le=1 << 31)]] = Field(
        default_factory=lambda: [100, 30000],
        min_length=2,
        max_length=2,
        description="Random prompt ids are drawn from [low, high).",
    )
    ignore_eos: bool = Field(
        default=True, description="Send ignore_eos so every request generates output_len tokens."
    )
    request_timeout_s: float = Field(default=600, gt=0, le=86_400)

    @model_validator(mode="after")
    def _sane(self) -> BenchSettings:
        low, high = self.token_id_range
        if not 0 <= low < high:
            raise ValueError("token_id_range must be [low, high) with 0 <= low < high")
        if any(c < 1 for c in self.concurrencies):
            raise ValueError("concurrencies must be >= 1")
        widest = max(max(8, self.rounds * max(self.concurrencies)), self.single_stream_requests)
        if widest * self.input_len > MAX_LEVEL_PROMPT_TOKENS:
            raise ValueError(
                f"a level of {widest} requests x input_len {self.input_len} is "
                f"{widest * self.input_len:,} prompt tokens, more than {MAX_LEVEL_PROMPT_TOKENS:,}"
                " (lower rounds, the largest concurrency or input_len)"
            )
        return self


class ServingProfile(Strict):
    engine: EngineName = "sglang"
    model_path: str
    served_model_name: str | None = None
    tp: int = Field(default=1, ge=1)
    attention_backend: str | None = None
    cuda_graph_max_bs: int | None = Field(default=None, ge=1)
    trust_remote_code: bool = False
    tool_call_parser: str | None = None
    reasoning_parser: str | None = None
    speculative: Speculative | None = None
    extra_args: list[str] = Field(default_factory=list)
    env: EnvVars = Field(default_factory=dict)
    command: list[str] = Field(
        default_factory=list, description="For engine 'openai-command': the argv to start."
    )
    load_timeout_s: float = Field(default=1800, gt=0)
    hang_timeout_s: float = Field(default=600, gt=0)
    port: int | None = Field(
        default=None,
        ge=1,
        le=65535,
        description="Fixed port (fail if taken); unset: the engine's default, else a free one.",
    )
    ready_log_pattern: str | None = Field(
        default=None,
        description="Regex of the log line that means ready (engine default when unset).",
    )
    health_path: str = Field(default="/health", description="GET path answering 200 when ready.")
    stop_grace_s: float = Field(default=30.0, gt=0, description="SIGTERM to SIGKILL wait.")
    bench: BenchSettings = Field(default_factory=BenchSettings)
    correctness_reference: str | None = Field(
        default=None,
        description="Greedy outputs recorded on the known-good stack (JSON, relative to the "
        "manifest's folder).",
    )


class Thresholds(Strict):
    single_stream_decode_tok_s: float | None = Field(default=None, gt=0)
    allreduce_p50_us_max: float | None = Field(default=None, gt=0)
    correctness_exact_match_min: float = Field(default=0.9, ge=0, le=1)
    correctness_token_agreement_min: float = Field(default=0.95, ge=0, le=1)


class Timeouts(Strict):
    check_s: float = Field(default=120, gt=0, description="Seconds per runtime probe.")

    @model_validator(mode="before")
    @classmethod
    def _moved(cls, data: object) -> object:
        if isinstance(data, dict):
            # schema_version 1 manifests have had these dropped by stackgate.manifest.migrate
            moved = [f"{k} is now {v}" for k, v in NEVER_READ_TIMEOUTS.items() if k in data]
            if moved:
                raise ValueError("; ".join(moved))
        return data


class GateSettings(Strict):
    """This stack's gate policy (`validators gate` against it); unset fields keep the tool's
    defaults (validators/gate/policy.py), and a command-line flag beats both."""

    tolerance: float | None = Field(
        default=None,
        ge=0,
        lt=1,
        description="Regression margin for the main-class gated metrics (fraction; default 0.005).",
    )
    tail_tolerance: float | None = Field(
        default=None,
        ge=0,
        lt=1,
        description="Margin for the tail-class gated metrics (default 0.08).",
    )
    repeats: int | None = Field(
        default=None,
        ge=2,
        le=100,
        description="Runs on each side: the runs the gate makes and the minimum it accepts "
        "(default 8).",
    )
    interleave: bool = Field(
        default=False,
        description="Only interleaved gates (--interleave-with BASELINE_ENV): a gate that "
        "compares with the record's numbers alone is refused (exit 2). For hosts whose level "
        "moves between phases (shared or lent machines).",
    )


def _all_groups() -> list[ValidatorGroup]:
    return list(ORDER)


class Validation(Strict):
    required: list[ValidatorGroup] = Field(default_factory=_all_groups)
    serve_profile: str | None = None
    thresholds: Thresholds = Field(default_factory=Thresholds)
    timeouts: Timeouts = Field(default_factory=Timeouts)
    gate: GateSettings = Field(default_factory=GateSettings)
    accepted_findings: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "Check id (e.g. 'static.abi.torchao') -> why its FAIL is accepted for this stack. "
            "The check still runs; its FAIL is reported as SKIP with this reason and the finding "
            "(a WARN: stays a PASS and says it is accepted)."
        ),
    )
    refused_findings: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "Check id (e.g. 'static.dists.clashes') -> why its WARN fails this stack. The WARN "
            "is reported as FAIL with this reason and the finding."
        ),
    )


class Manifest(Strict):
    schema_version: Literal[1, 2] = Field(
        description="The manifest's form: 2 is current; 1 is read through "
        "stackgate.manifest.migrate."
    )
    name: NameStr
    description: str
    python: PythonStr
    platform: Platform = "linux-x86_64"
    host: Host
    indexes: dict[NameStr, Index] = Field(default_factory=dict)
    packages: dict[NameStr, Package]
    overrides: list[RequirementStr] = Field(
        default_factory=list,
        description="Requirements that beat upstream exact pins (uv override-dependencies).",
    )
    build: BuildSettings = Field(default_factory=BuildSettings)
    environment: EnvironmentSettings = Field(default_factory=EnvironmentSettings)
    serving: dict[NameStr, ServingProfile] = Field(default_factory=dict)
    validation: Validation = Field(default_factory=Validation)

    def package(self, name: str) -> Package | None:
        """The pin for a distribution name, matched canonically (flashinfer_python == -python)."""
        wanted = canonicalize_name(name)
        for key, pin in self.packages.items():
            if canonicalize_name(key) == wanted:
                return pin
        return None

    def env_for(self, topology: Topology | None) -> dict[str, str]:
        """Common variables plus the topology's profile (the profile wins)."""
        merged = dict(self.environment.common)
        if topology is not None:
            merged.update(self.environment.topology.get(topology, {}))
        return merged
