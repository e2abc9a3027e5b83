"""Run a command inside a built stack image, with the GPUs, for validators (`--image REF`).

Layout of a stack image (made by `python -m builder image STACK`; the builder and the
validators both read it from here):

    /opt/stackgate/env      the stack's environment (venv; its bin/ is first on PATH)
    /opt/stackgate/tool     the stackgate tool's own venv: /opt/stackgate/tool/bin/python -m validators ...
    /opt/stackgate/python   the CPython both venvs use (when uv installed it)
    /opt/stackgate/stack    a stacks folder (STACKGATE_STACKS_DIR points at it, so stack names
                            resolve as on the host): <stack>.toml, its patches, rules.toml,
                            schema/, locks/<stack>/{pyproject.toml,uv.lock} the env was synced from

GPU access differs per engine:
- docker (Engine API through the docker SDK): `device_requests=[DeviceRequest(count=-1,
  capabilities=[["gpu"]])]`, which is what `docker run --gpus all` sends;
- podman: CDI, `--device nvidia.com/gpu=all` (needs `nvidia-ctk cdi generate` on the host);
- buildah: runs without GPUs only (it has no hook that injects the driver), for CPU checks.

Tokens and other secrets are passed at run time through `env`, never baked into images.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from stackgate.errors import CheckFailed, EnvironmentProblem, ToolNotFound

log = logging.getLogger("stackgate.container_run")

IMAGE_ROOT = "/opt/stackgate"
IMAGE_ENV = f"{IMAGE_ROOT}/env"
IMAGE_TOOL = f"{IMAGE_ROOT}/tool"
IMAGE_PYTHON_DIR = f"{IMAGE_ROOT}/python"
IMAGE_STACK_DIR = f"{IMAGE_ROOT}/stack"


def image_lock_dir(stack: str) -> str:
    """The generated uv project and uv.lock inside an image of `stack`."""
    return f"{IMAGE_STACK_DIR}/locks/{stack}"


# argv prefixes for the two interpreters inside an image
ENV_PYTHON = f"{IMAGE_ENV}/bin/python"
TOOL_PYTHON = f"{IMAGE_TOOL}/bin/python"

RunEngine = Literal["auto", "docker", "podman", "buildah"]
Network = Literal["host", "none"]
# Keep the container after the command (debugging): STACKGATE_KEEP_CONTAINERS=1
KEEP_ENV = "STACKGATE_KEEP_CONTAINERS"
CDI_ALL_GPUS = "nvidia.com/gpu=all"


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


def gpu_args(engine: Literal["podman", "docker"]) -> list[str]:
    """CLI flags giving a container every GPU (docker CLI form kept for people's copy-paste)."""
    return ["--gpus", "all"] if engine == "docker" else ["--device", CDI_ALL_GPUS]


def _keep() -> bool:
    return os.environ.get(KEEP_ENV, "") not in ("", "0")


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


def _docker_client() -> Any:
    problem = docker_socket_problem()
    if problem is not None:
        log.debug("docker: no daemon answers: %s", problem)
        return None
    import docker  # the docker SDK: Engine API over the socket, no CLI needed

    # A fixed API version: "auto" asks the daemon in the constructor and leaks the socket when
    # none answers; 1.41 (Docker 20.10) has device_requests.
    client = docker.from_env(version="1.41")
    try:
        client.ping()
    except Exception as exc:  # DockerException, or a socket that does not answer
        client.close()
        log.debug("docker: no daemon answers: %s", exc)
        return None
    return client


def _pick(engine: RunEngine) -> tuple[str, Any]:
    if engine in ("auto", "docker"):
        client = _docker_client()
        if client is not None:
            return "docker", client
        if engine == "docker":
            raise EnvironmentProblem("docker: no daemon answers (docker.from_env() failed)")
    for name in ("podman", "buildah") if engine == "auto" else (engine,):
        if shutil.which(name):
            return name, None
        if engine != "auto":
            raise ToolNotFound(name)
    raise EnvironmentProblem(
        "no container engine to run the image",
        details=["docker: no daemon answers", "podman: not on PATH", "buildah: not on PATH"],
    )


def run_in_image(
    image: str,
    argv: Sequence[str],
    *,
    engine: RunEngine = "auto",
    gpus: bool = True,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    network: Network = "host",
    mounts: Mapping[str, str] | None = None,
    engine_args: Sequence[str] = (),
) -> RunResult:
    """Run argv in a fresh container of `image`, removed afterwards; never raises on exit code.

    `mounts` maps host paths to container paths (read-only), e.g. model weights or an output
    folder the caller reads later (mounted read-write when the container path ends in `:rw`).
    `engine_args` go to the podman/buildah CLI before the image (e.g. `--root` for a store).
    Raises EnvironmentProblem (exit 3) when the engine is missing or cannot give GPUs.
    """
    name, client = _pick(engine)
    container = f"stackgate-run-{uuid.uuid4().hex[:12]}"
    args = [str(a) for a in argv]
    environment = dict(env or {})
    if name == "docker":
        return _run_docker(
            client, image, args, container, gpus, environment, timeout, network, mounts
        )
    if name == "podman":
        cli = ["podman", *engine_args, "run", "--name", container, f"--network={network}"]
        cli += [] if _keep() else ["--rm"]
        cli += gpu_args("podman") if gpus else []
        cli += _volume_flags(mounts)
        for key, value in environment.items():
            cli += ["--env", f"{key}={value}"]
        return _run_cli("podman", [*cli, image, *args], args, container, timeout)
    if gpus:
        raise EnvironmentProblem(
            "buildah cannot give a container GPUs (no NVIDIA hook/CDI in `buildah run`)",
            details=["use docker (--gpus all) or podman with CDI (--device nvidia.com/gpu=all)"],
        )
    return _run_buildah(image, args, container, environment, timeout, network, mounts, engine_args)


def _volume_flags(mounts: Mapping[str, str] | None) -> list[str]:
    flags: list[str] = []
    for host, inside in (mounts or {}).items():
        mode = "rw" if inside.endswith(":rw") else "ro"
        flags += ["--volume", f"{host}:{inside.removesuffix(':rw')}:{mode}"]
    return flags


def _run_cli(
    engine: str, cli: list[str], argv: list[str], container: str, timeout: float | None
) -> RunResult:
    program = shutil.which(cli[0])
    if program is None:
        raise ToolNotFound(cli[0])
    log.debug("+ %s", " ".join(cli))
    try:
        done = subprocess.run(
            [program, *cli[1:]], capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        if engine == "podman":
            subprocess.run([program, "rm", "-f", container], capture_output=True, check=False)
        raise EnvironmentProblem(f"{argv[0]} in the image timed out after {timeout} s") from exc
    return RunResult(engine, argv, done.returncode, done.stdout, done.stderr, container)


def _run_buildah(
    image: str,
    argv: list[str],
    container: str,
    env: dict[str, str],
    timeout: float | None,
    network: Network,
    mounts: Mapping[str, str] | None,
    engine_args: Sequence[str],
) -> RunResult:
    if network != "host":
        # Chroot isolation (the one that works without a runtime here) shares the host network.
        raise EnvironmentProblem(
            "buildah runs with --isolation chroot, which allows only network='host'"
        )
    base = ["buildah", *engine_args]
    made = _run_cli(
        "buildah",
        [*base, "from", "--pull-never", "--name", container, image],
        argv,
        container,
        timeout,
    )
    if made.returncode != 0:
        raise EnvironmentProblem(
            f"buildah from {image} failed", details=made.stderr.strip().splitlines()[-10:]
        )
    try:
        cli = [*base, "run", "--isolation", "chroot"]
        for host, inside in (mounts or {}).items():
            mode = "rw" if inside.endswith(":rw") else "ro"
            cli += ["--volume", f"{host}:{inside.removesuffix(':rw')}:{mode}"]
        for key, value in env.items():
            cli += ["--env", f"{key}={value}"]
        return _run_cli("buildah", [*cli, container, "--", *argv], argv, container, timeout)
    finally:
        if not _keep():
            _run_cli("buildah", [*base, "rm", container], argv, container, 60)


def _run_docker(
    client: Any,
    image: str,
    argv: list[str],
    container: str,
    gpus: bool,
    env: dict[str, str],
    timeout: float | None,
    network: Network,
    mounts: Mapping[str, str] | None,
) -> RunResult:
    import docker
    from docker.types import DeviceRequest

    requests = [DeviceRequest(count=-1, capabilities=[["gpu"]])] if gpus else []
    volumes = {
        host: {"bind": inside.removesuffix(":rw"), "mode": "rw" if inside.endswith(":rw") else "ro"}
        for host, inside in (mounts or {}).items()
    }
    run = client.containers.create(
        image,
        argv,
        name=container,
        environment=env,
        device_requests=requests,
        network_mode=network,
        volumes=volumes,
    )
    try:
        run.start()
        try:
            status = run.wait(timeout=timeout)
        except Exception as exc:  # requests' ReadTimeout: the command outlived the timeout
            run.kill()
            raise EnvironmentProblem(f"{argv[0]} in the image timed out after {timeout} s") from exc
        stdout = run.logs(stdout=True, stderr=False).decode(errors="replace")
        stderr = run.logs(stdout=False, stderr=True).decode(errors="replace")
        return RunResult(
            "docker", argv, int(status.get("StatusCode", 1)), stdout, stderr, container
        )
    except docker.errors.APIError as exc:
        raise EnvironmentProblem(f"docker could not run {image}: {exc}") from exc
    finally:
        if not _keep():
            run.remove(force=True)
