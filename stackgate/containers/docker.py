"""Docker Engine through the `docker` Python SDK (Engine API over the socket; no CLI needed),
for building images and for running them with GPUs (`device_requests`, what `docker run
--gpus all` sends).

The SDK drives the classic builder (`POST /build`); it has no BuildKit session
(docker/docker-py#2230), and the classic builder stamps `created` with the wall clock and
ignores SOURCE_DATE_EPOCH, so two builds differ in their config digest. `--check-reproducible`
still builds twice and says what it found; for digest-stable images use buildah or podman.
"""

from __future__ import annotations

import io
import os
import socket
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

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
    context_tar,
    mount_target,
    parse_version,
)
from stackgate.errors import BadInput, CommandFailed, EnvironmentProblem
from stackgate.settings import switch

if TYPE_CHECKING:
    from stackgate.containers.buildah import StorageConfig

API_VERSION = "1.41"


@dataclass(frozen=True)
class DockerConfig:
    base_url: str | None = None  # None: DOCKER_HOST or the default socket (docker.from_env)
    timeout_s: int = 600  # one API call; a build streams, so this bounds silence, not the build
    # Network of the build's RUN steps ("host" reaches an index mirror on 127.0.0.1, as
    # buildah's chroot isolation does); None: the daemon's default.
    build_network: str | None = None


def docker_socket_problem(base_url: str | None = None) -> str | None:
    """Why no daemon can answer on a unix socket, checked before the SDK opens one (docker-py
    leaves the socket of a failed unix connect unclosed); None: try it."""
    url = base_url or os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    if not url.startswith("unix://"):
        return None
    path = url.removeprefix("unix://")
    if not Path(path).exists():
        return f"no socket at {path}"
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(5)
        probe.connect(path)
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    finally:
        probe.close()
    return None


def connect(config: DockerConfig) -> Any:
    """A client whose daemon answers; EnvironmentProblem (exit 3) with the SDK's reason."""
    try:
        import docker
    except ImportError as exc:  # a dependency, but say so plainly if an install lacks it
        raise EnvironmentProblem("docker: the docker Python SDK is not installed") from exc
    problem = docker_socket_problem(config.base_url)
    if problem is not None:
        raise EnvironmentProblem(f"docker: no daemon answers ({problem})")
    # A fixed API version: "auto" would ask the daemon inside the constructor and, failing,
    # leave its socket open; 1.41 is our minimum and every newer daemon still serves it.
    if config.base_url:
        client = docker.DockerClient(
            base_url=config.base_url, version=API_VERSION, timeout=config.timeout_s
        )
    else:
        client = docker.from_env(version=API_VERSION, timeout=config.timeout_s)
    try:
        client.ping()
    except Exception as exc:  # docker.errors.DockerException, requests' ConnectionError
        client.close()
        raise EnvironmentProblem(
            f"docker: no daemon answers ({type(exc).__name__}: {exc})"
        ) from exc
    return client


class DockerEngine(ContainerEngine):
    name: EngineName = "docker"
    minimum = (
        API_VERSION  # Engine API (Docker 20.10): device_requests (--gpus) and build args as used
    )
    version_what = "docker Engine API"
    reproducible = False
    reproducible_note = (
        "the docker SDK drives the classic builder, which stamps created times with the clock "
        "(docker/docker-py#2230); use buildah or podman for equal digests"
    )

    def __init__(self, config: DockerConfig) -> None:
        super().__init__()
        self.config = config
        self.client: Any = None

    @classmethod
    def configured(cls, storage: StorageConfig, docker: DockerConfig) -> ContainerEngine:
        return cls(docker)

    def probe_version(self) -> str:
        import json

        self.client = connect(self.config)
        return parse_version("docker", json.dumps(self.client.version()))

    def build(self, spec: BuildSpec) -> BuiltImage:
        if spec.build_mounts:
            raise BadInput(
                "the docker engine's classic builder cannot mount files into RUN steps (--ca-bundle); use buildah or podman"
            )
        started = time.monotonic()
        tar = context_tar(spec.context, spec.timestamp)
        self.track(spec.tag)
        image_id: str | None = None
        log: list[str] = []
        for chunk in self.client.api.build(
            fileobj=io.BytesIO(tar),
            custom_context=True,
            dockerfile=str(spec.containerfile.relative_to(spec.context)),
            tag=spec.tag,
            buildargs=dict(spec.build_args),
            nocache=True,
            rm=True,
            forcerm=True,
            pull=False,
            target=spec.target,
            network_mode=self.config.build_network,
            decode=True,
        ):
            if "stream" in chunk:
                log.append(str(chunk["stream"]).rstrip())
            if "error" in chunk:
                raise CommandFailed(
                    ["docker-sdk", "build", spec.tag], 1, "\n".join(log), str(chunk["error"])
                )
            aux = chunk.get("aux")
            if isinstance(aux, dict) and "ID" in aux:
                image_id = str(aux["ID"])
        image = self.client.images.get(spec.tag)
        return BuiltImage(
            engine="docker",
            ref=spec.tag,
            image_id=image_id or str(image.id),
            manifest_digest=None,  # a local image has none until it is pushed or saved
            labels=dict(image.labels or {}),
            seconds=round(time.monotonic() - started, 2),
        )

    def tag(self, image: BuiltImage, ref: str) -> None:
        repo, _, tag = ref.rpartition(":")
        self.client.images.get(image.ref).tag(repo or ref, tag or None)

    def export_oci(self, image: BuiltImage, path: Path) -> str:
        """Engine >= 25 saves an OCI layout (index.json); older engines and podman's API a
        docker archive, which skopeo converts (digests of the OCI form, as buildah's)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        saved = path.with_name(path.name + ".save.tar")
        try:
            with saved.open("wb") as handle:
                for chunk in self.client.images.get(image.ref).save(named=True):
                    handle.write(chunk)
            with tarfile.open(saved) as tar:
                is_oci = "index.json" in tar.getnames()
            if is_oci:
                saved.replace(path)
            else:
                path.unlink(missing_ok=True)
                proc.run(
                    [
                        "skopeo",
                        "copy",
                        "--quiet",
                        f"docker-archive:{saved}",
                        f"oci-archive:{path}:{image.ref.split('/', 1)[-1]}",
                    ],
                    timeout=3600,
                )
        finally:
            saved.unlink(missing_ok=True)
        return archive_manifest_digest(path)

    def remove(self, ref: str) -> None:
        self.client.images.remove(ref, force=True)

    def run(self, spec: RunSpec) -> RunResult:
        import docker
        from docker.types import DeviceRequest

        argv = [str(a) for a in spec.argv]
        container = container_name()
        requests = [DeviceRequest(count=-1, capabilities=[["gpu"]])] if spec.gpus else []
        volumes = {}
        for host, inside in spec.mounts.items():
            path, mode = mount_target(inside)
            volumes[host] = {"bind": path, "mode": mode}
        try:
            run = self.client.containers.create(
                spec.image,
                argv,
                name=container,
                environment=dict(spec.env),
                device_requests=requests,
                network_mode=spec.network,
                volumes=volumes,
            )
        except docker.errors.APIError as exc:
            raise EnvironmentProblem(f"docker could not run {spec.image}: {exc}") from exc
        try:
            run.start()
            try:
                status = run.wait(timeout=spec.timeout)
            except Exception as exc:  # requests' ReadTimeout: the command outlived the timeout
                run.kill()
                raise EnvironmentProblem(
                    f"{argv[0]} in the image timed out after {spec.timeout} s"
                ) from exc
            stdout = run.logs(stdout=True, stderr=False).decode(errors="replace")
            stderr = run.logs(stdout=False, stderr=True).decode(errors="replace")
            code = int(status.get("StatusCode", 1))
            return RunResult("docker", argv, code, stdout, stderr, container)
        except docker.errors.APIError as exc:
            raise EnvironmentProblem(f"docker could not run {spec.image}: {exc}") from exc
        finally:
            if not switch(KEEP_CONTAINERS_ENV):
                run.remove(force=True)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            super().__exit__(exc_type, exc, tb)
        finally:
            if self.client is not None:
                self.client.close()
