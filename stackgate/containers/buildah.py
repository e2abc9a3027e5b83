"""buildah (daemonless) and podman (same containers/storage, same build code) as engines,
for building images and for running them (podman with GPUs through CDI; buildah without).

Measured on a Debian 12 host (buildah 1.28.2, podman 4.3.1, root, cgroup v1 hybrid): builds
work with `--isolation chroot` (the OCI runtime path fails: crun refuses hybrid cgroups) and
the vfs storage driver; `--timestamp`
gives equal digests, SOURCE_DATE_EPOCH alone is ignored by buildah 1.28. We also drop the
`io.buildah.version` identity label so the digest does not change with the buildah version.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from stackgate import proc
from stackgate.containers.base import (
    KEEP_CONTAINERS_ENV,
    BuildSpec,
    BuiltImage,
    ContainerEngine,
    EngineName,
    RunResult,
    RunSpec,
    archive_manifest_digest,
    container_name,
    gpu_args,
    mount_and_env_flags,
    parse_version,
)
from stackgate.errors import CommandFailed, EnvironmentProblem, ToolNotFound
from stackgate.settings import switch

if TYPE_CHECKING:
    from stackgate.containers.docker import DockerConfig

Isolation = Literal["chroot", "oci", "rootless"]
BUILD_TIMEOUT_S = 6 * 3600  # a CUDA source build can take hours; a stuck one must still end


@dataclass(frozen=True)
class StorageConfig:
    """containers/storage options shared by buildah and podman (None: the engine's default)."""

    root: Path | None = None
    runroot: Path | None = None
    storage_driver: str | None = None
    isolation: Isolation = "chroot"

    def global_args(self) -> list[str]:
        args: list[str] = []
        if self.root is not None:
            args += ["--root", str(self.root)]
        if self.runroot is not None:
            args += ["--runroot", str(self.runroot)]
        if self.storage_driver:
            args += ["--storage-driver", self.storage_driver]
        return args


_PULL_FAILED = re.compile(r"initializing source docker://(\S+): pinging container registry")


def _explain(exc: CommandFailed) -> Exception:
    """A base that cannot be pulled is an environment problem with a way out, not a build error."""
    match = _PULL_FAILED.search(exc.stderr)
    if match:
        return EnvironmentProblem(
            f"cannot pull {match.group(1)} (no registry reachable?)",
            details=[
                "load it into the store first (skopeo copy / podman load from an archive), or",
                "build FROM a local image pinned by digest: --base REPO@sha256:... --uv-image ...",
                *exc.details[-3:],
            ],
        )
    return exc


class _ContainersEngine(ContainerEngine):
    """What buildah and podman share: the CLI shape and the JSON they answer with."""

    program: str

    def __init__(self, config: StorageConfig) -> None:
        super().__init__()
        self.config = config

    @classmethod
    def configured(cls, storage: StorageConfig, docker: DockerConfig) -> ContainerEngine:
        return cls(storage)

    def _cli(self, *args: str | Path) -> list[str | Path]:
        return [self.program, *self.config.global_args(), *args]

    def _build_argv(self, spec: BuildSpec) -> list[str | Path]:
        argv: list[str | Path] = [
            "build",
            "--isolation",
            self.config.isolation,
            "--no-cache",
            "--pull=false",  # only when missing: bases are pinned by digest
            "--identity-label=false",
            "--timestamp",
            str(spec.timestamp),
            "-f",
            spec.containerfile,
            "-t",
            spec.tag,
        ]
        for key, value in sorted(spec.build_args.items()):
            argv += ["--build-arg", f"{key}={value}"]
        for host, inside in sorted(spec.build_mounts.items()):
            argv += ["--volume", f"{host}:{inside}:ro"]
        if spec.target:
            argv += ["--target", spec.target]
        return self._cli(*argv, spec.context)

    def build(self, spec: BuildSpec) -> BuiltImage:
        started = time.monotonic()
        self.track(spec.tag)
        try:
            proc.run(self._build_argv(spec), timeout=BUILD_TIMEOUT_S)
        except CommandFailed as exc:
            raise _explain(exc) from exc
        image = self.inspect(spec.tag)
        return BuiltImage(
            engine=self.name,
            ref=spec.tag,
            image_id=image.image_id,
            manifest_digest=image.manifest_digest,
            labels=image.labels,
            seconds=round(time.monotonic() - started, 2),
        )

    def inspect(self, ref: str) -> BuiltImage:
        raise NotImplementedError

    def tag(self, image: BuiltImage, ref: str) -> None:
        proc.run(self._cli("tag", image.ref, ref))

    def export_oci(self, image: BuiltImage, path: Path) -> str:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)
        name = image.ref.split("/", 1)[-1]
        proc.run(
            self._cli("push", "--quiet", image.ref, f"oci-archive:{path}:{name}"), timeout=3600
        )
        return archive_manifest_digest(path)

    def remove(self, ref: str) -> None:
        proc.run(self._cli("rmi", ref), check=False)

    def _run_cli(self, cli: list[str | Path], spec: RunSpec, container: str) -> RunResult:
        argv = [str(a) for a in spec.argv]
        try:
            done = proc.run(cli, timeout=spec.timeout, check=False)
        except ToolNotFound:
            raise
        except EnvironmentProblem as exc:  # proc.run's timeout
            proc.run(self._cli("rm", "-f", container), check=False)
            raise EnvironmentProblem(
                f"{argv[0]} in the image timed out after {spec.timeout} s"
            ) from exc
        return RunResult(self.name, argv, done.returncode, done.stdout, done.stderr, container)


class Buildah(_ContainersEngine):
    name: EngineName = "buildah"
    program = "buildah"
    minimum = "1.28"  # the version measured here; --timestamp and chroot builds as used
    can_run_gpus = False  # `buildah run` has no NVIDIA hook or CDI: CPU checks only

    def run(self, spec: RunSpec) -> RunResult:
        if spec.gpus:
            raise EnvironmentProblem(
                "buildah cannot give a container GPUs (no NVIDIA hook/CDI in `buildah run`)",
                details=[
                    "use docker (--gpus all) or podman with CDI (--device nvidia.com/gpu=all)"
                ],
            )
        if spec.network != "host":
            # Chroot isolation (the one that works without a runtime here) shares the host network.
            raise EnvironmentProblem(
                "buildah runs with --isolation chroot, which allows only network='host'"
            )
        container = container_name()
        made = proc.run(
            self._cli("from", "--pull-never", "--name", container, spec.image),
            timeout=spec.timeout,
            check=False,
        )
        if made.returncode != 0:
            raise EnvironmentProblem(
                f"buildah from {spec.image} failed", details=made.stderr.strip().splitlines()[-10:]
            )
        try:
            cli: list[str | Path] = ["run", "--isolation", "chroot", *mount_and_env_flags(spec)]
            return self._run_cli(self._cli(*cli, container, "--", *spec.argv), spec, container)
        finally:
            if not switch(KEEP_CONTAINERS_ENV):
                proc.run(self._cli("rm", container), check=False, timeout=60)

    def probe_version(self) -> str:
        return parse_version("buildah", proc.run([self.program, "version", "--json"]).stdout)

    def inspect(self, ref: str) -> BuiltImage:
        out = proc.run(self._cli("inspect", "--type", "image", ref)).stdout
        data = json.loads(out)
        config = data.get("OCIv1", {}).get("config", {})
        return BuiltImage(
            engine="buildah",
            ref=ref,
            image_id=f"sha256:{data['FromImageID']}",
            manifest_digest=data.get("FromImageDigest") or None,
            labels=dict(config.get("Labels") or {}),
        )


class Podman(_ContainersEngine):
    name: EngineName = "podman"
    program = "podman"
    minimum = "4.3"  # measured: 4.3.1 builds with --timestamp reproducibly

    def run(self, spec: RunSpec) -> RunResult:
        container = container_name()
        cli: list[str | Path] = ["run", "--name", container, f"--network={spec.network}"]
        cli += [] if switch(KEEP_CONTAINERS_ENV) else ["--rm"]
        cli += gpu_args("podman") if spec.gpus else []  # CDI: nvidia-ctk cdi generate
        cli += mount_and_env_flags(spec)
        return self._run_cli(self._cli(*cli, spec.image, *spec.argv), spec, container)

    def probe_version(self) -> str:
        return parse_version(
            "podman", proc.run([self.program, "version", "--format", "json"]).stdout
        )

    def inspect(self, ref: str) -> BuiltImage:
        data = json.loads(proc.run(self._cli("image", "inspect", "--format", "json", ref)).stdout)[
            0
        ]
        image_id = str(data["Id"])
        return BuiltImage(
            engine="podman",
            ref=ref,
            image_id=image_id if image_id.startswith("sha256:") else f"sha256:{image_id}",
            manifest_digest=data.get("Digest"),
            labels=dict(data.get("Labels") or {}),
        )
