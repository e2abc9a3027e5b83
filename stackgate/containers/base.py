"""What every container engine offers, for building images (builder) and running them
(validators --image), and the pieces they share (version probe, cleanup).

An engine is a frozen config plus a context manager: entering probes the version ("need >= X,
found Y", exit 3); builds get unique names (`localhost/stackgate-<stack>:build-<uuid>`) and
everything made is removed on exit, in `finally`, unless STACKGATE_KEEP_BUILDS=1 or the
caller kept it (`keep(ref)`, e.g. the user's `--tag`). Runs get a unique container name and
the container is removed afterwards unless STACKGATE_KEEP_CONTAINERS=1.
"""

from __future__ import annotations

import io
import json
import logging
import os
import tarfile
import uuid
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Literal, Self, get_args

from packaging.version import InvalidVersion, Version

from stackgate.errors import CheckFailed, EnvironmentProblem
from stackgate.settings import switch

if TYPE_CHECKING:  # the engines' own configs; their modules import this one
    from stackgate.containers.buildah import StorageConfig
    from stackgate.containers.docker import DockerConfig

log = logging.getLogger("stackgate.containers")

# The engines' names, in the one auto-selection order, for builds and runs: a Docker daemon
# when one answers, else buildah (daemonless, measured here), else podman. A run that needs
# GPUs passes over an engine that cannot give them (buildah), so it gets podman with CDI.
# The classes are registered in select.ENGINE_CLASSES (checked against this list on import).
EngineName = Literal["docker", "buildah", "podman"]
ENGINES: tuple[EngineName, ...] = get_args(EngineName)
KEEP_ENV = "STACKGATE_KEEP_BUILDS"
# Keep the container after a run (debugging): STACKGATE_KEEP_CONTAINERS=1
KEEP_CONTAINERS_ENV = "STACKGATE_KEEP_CONTAINERS"
CDI_ALL_GPUS = "nvidia.com/gpu=all"
Network = Literal["host", "none"]


def container_name() -> str:
    return f"stackgate-run-{uuid.uuid4().hex[:12]}"


def gpu_args(engine: Literal["podman", "docker"]) -> list[str]:
    """CLI flags giving a container every GPU (docker CLI form kept for people's copy-paste)."""
    return ["--gpus", "all"] if engine == "docker" else ["--device", CDI_ALL_GPUS]


def mount_target(inside: str) -> tuple[str, Literal["ro", "rw"]]:
    """A container path of RunSpec.mounts and its mode: read-only unless it ends in ':rw'."""
    return inside.removesuffix(":rw"), "rw" if inside.endswith(":rw") else "ro"


def volume_flags(mounts: Mapping[str, str] | None) -> list[str]:
    """host -> container path mounts as --volume flags (modes as mount_target reads them)."""
    flags: list[str] = []
    for host, inside in (mounts or {}).items():
        path, mode = mount_target(inside)
        flags += ["--volume", f"{host}:{path}:{mode}"]
    return flags


@dataclass(frozen=True)
class RunSpec:
    """One command run in a fresh container of `image`."""

    image: str
    argv: Sequence[str]
    gpus: bool = True
    env: Mapping[str, str] = field(default_factory=dict)
    timeout: float | None = None
    network: Network = "host"
    mounts: Mapping[str, str] = field(default_factory=dict)


def mount_and_env_flags(spec: RunSpec) -> list[str]:
    """The --volume and --env flags of a run, as buildah run and podman run both take them."""
    flags = volume_flags(spec.mounts)
    for key, value in spec.env.items():
        flags += ["--env", f"{key}={value}"]
    return flags


@dataclass(frozen=True)
class RunResult:
    engine: str
    argv: list[str]  # the command run inside the image
    returncode: int
    stdout: str
    stderr: str
    container: str  # the unique name it ran under

    def check(self) -> RunResult:
        if self.returncode != 0:
            tail = (self.stderr or self.stdout).strip().splitlines()[-20:]
            raise CheckFailed(
                f"{self.argv[0]} exited with {self.returncode} inside the image ({self.engine})",
                details=tail,
            )
        return self


def _walk(root: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        base = Path(dirpath)
        for name in sorted(dirnames + filenames):
            yield base / name


def context_tar(root: Path, mtime: int) -> bytes:
    """A build context as an uncompressed tar: sorted entries, fixed owner and mtime."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in _walk(root):
            info = tar.gettarinfo(str(path), arcname=str(path.relative_to(root)))
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = mtime
            if info.isfile():
                with path.open("rb") as handle:
                    tar.addfile(info, handle)
            else:
                tar.addfile(info)
    return buffer.getvalue()


def unique_tag(stack: str) -> str:
    return f"localhost/stackgate-{stack}:build-{uuid.uuid4().hex[:12]}"


def parse_version(engine: EngineName, text: str) -> str:
    """The version out of an engine's JSON version output (pure; tested on real outputs).

    buildah: `buildah version --json` -> {"version": ...}
    podman:  `podman version --format json` -> {"Client": {"Version": ...}, "Server"?: ...}
    docker:  Engine API /version (`client.version()`) -> {"Version": ..., "ApiVersion": ...};
             the API version is what the SDK depends on (a podman service says Version 4.3.1)
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        raise EnvironmentProblem(f"{engine}: version output is not JSON: {text[:200]!r}") from None
    value: object
    match engine:
        case "buildah":
            value = data.get("version")
        case "podman":
            side = data.get("Server") or data.get("Client") or {}
            value = side.get("Version")
        case "docker":
            value = data.get("ApiVersion")
    if not isinstance(value, str):
        raise EnvironmentProblem(f"{engine}: no version in its version output")
    return value


def require_version(engine: str, found: str, minimum: str, why: str = "") -> None:
    try:
        ok = Version(found.split("-")[0].split("+")[0]) >= Version(minimum)
    except InvalidVersion:
        raise EnvironmentProblem(f"{engine}: cannot read version '{found}'") from None
    if not ok:
        raise EnvironmentProblem(
            f"{engine}: need >= {minimum}, found {found}" + (f" ({why})" if why else "")
        )


@dataclass(frozen=True)
class BuildSpec:
    """One build: the context folder, its Containerfile, the tag, args and fixed timestamp."""

    context: Path
    containerfile: Path
    tag: str
    build_args: Mapping[str, str]
    timestamp: int
    target: str | None = None
    # Read-only files/folders visible to RUN steps only, never committed (host -> container).
    build_mounts: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class BuiltImage:
    engine: EngineName
    ref: str
    image_id: str  # config digest, sha256:<hex>: the same wherever the image is copied
    manifest_digest: str | None  # of the stored manifest (transport dependent)
    labels: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


def archive_manifest_digest(path: Path) -> str:
    """The manifest digest inside an OCI archive (index.json), without skopeo."""
    with tarfile.open(path) as tar:
        member = tar.extractfile("index.json")
        if member is None:
            raise EnvironmentProblem(f"{path}: no index.json; not an OCI archive")
        index = json.load(member)
    return str(index["manifests"][0]["digest"])


class ContainerEngine(ABC):
    """Base of the three engines: builds and runs; tracks what it made and removes it on exit."""

    name: EngineName
    minimum: str
    can_run_gpus: bool = True  # whether `run` can give the container the host's GPUs
    version_what: str = ""  # what the version is of, in messages (default: the engine name)
    # Whether a fixed --timestamp / SOURCE_DATE_EPOCH makes two builds give one digest.
    reproducible: bool = True
    reproducible_note: str = ""

    def __init__(self) -> None:
        self.version = "unknown"
        self._made: list[str] = []

    @classmethod
    @abstractmethod
    def configured(cls, storage: StorageConfig, docker: DockerConfig) -> ContainerEngine:
        """The engine made from the configs the caller has (each engine takes its own)."""

    def __enter__(self) -> Self:
        self.version = self.probe_version()
        require_version(self.version_what or self.name, self.version, self.minimum)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if switch(KEEP_ENV):
            if self._made:
                log.warning("%s=1: keeping %s", KEEP_ENV, ", ".join(self._made))
            return
        for ref in reversed(self._made):
            try:
                self.remove(ref)
            except Exception as err:  # cleanup must not hide the build's own error
                log.warning("could not remove %s: %s", ref, err)
        self._made.clear()

    def track(self, ref: str) -> None:
        self._made.append(ref)

    def keep(self, ref: str) -> None:
        """The caller wants `ref` to outlive this engine (the user's --tag)."""
        if ref in self._made:
            self._made.remove(ref)

    @abstractmethod
    def probe_version(self) -> str: ...

    @abstractmethod
    def build(self, spec: BuildSpec) -> BuiltImage:
        """Build spec into the engine's store under spec.tag (tracked for removal)."""

    @abstractmethod
    def tag(self, image: BuiltImage, ref: str) -> None: ...

    @abstractmethod
    def export_oci(self, image: BuiltImage, path: Path) -> str:
        """Write an OCI archive; return the manifest digest it holds."""

    @abstractmethod
    def remove(self, ref: str) -> None: ...

    @abstractmethod
    def run(self, spec: RunSpec) -> RunResult:
        """Run spec.argv in a fresh container (removed afterwards); never raises on its exit
        code. EnvironmentProblem (exit 3) when the engine cannot run it (GPUs, timeout)."""
