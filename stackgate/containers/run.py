"""Run a command inside a built stack image (validators `--image`), through the same engines
that build images (stackgate.containers.select).

Layout of a stack image (made by `python -m builder image STACK`; the builder and the
validators both read it from here):

    /opt/stackgate/env      the stack's environment (venv; its bin/ is first on PATH)
    /opt/stackgate/tool     the stackgate tool's own venv: /opt/stackgate/tool/bin/python -m validators ...
    /opt/stackgate/python   the CPython both venvs use (when uv installed it)
    /opt/stackgate/stack    a stacks folder (STACKGATE_STACKS_DIR points at it, so stack names
                            resolve as on the host): <stack>.toml, its patches, rules.toml,
                            schema/, locks/<stack>/{pyproject.toml,uv.lock} the env was synced from

GPU access differs per engine: docker sends `device_requests` (what `docker run --gpus all`
sends); podman uses CDI, `--device nvidia.com/gpu=all` (needs `nvidia-ctk cdi generate`);
buildah runs without GPUs only (it has no hook that injects the driver), for CPU checks.

Tokens and other secrets are passed at run time through `env`, never baked into images.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from stackgate.containers.base import Network, RunResult, RunSpec
from stackgate.containers.buildah import StorageConfig
from stackgate.containers.select import EngineChoice, open_engine

IMAGE_ROOT = "/opt/stackgate"
IMAGE_ENV = f"{IMAGE_ROOT}/env"
IMAGE_TOOL = f"{IMAGE_ROOT}/tool"
IMAGE_PYTHON_DIR = f"{IMAGE_ROOT}/python"
IMAGE_STACK_DIR = f"{IMAGE_ROOT}/stack"

# argv prefixes for the two interpreters inside an image
ENV_PYTHON = f"{IMAGE_ENV}/bin/python"
TOOL_PYTHON = f"{IMAGE_TOOL}/bin/python"


def run_in_image(
    image: str,
    argv: Sequence[str],
    *,
    engine: EngineChoice = "auto",
    gpus: bool = True,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    network: Network = "host",
    mounts: Mapping[str, str] | None = None,
    storage: StorageConfig | None = None,
) -> RunResult:
    """Run argv in a fresh container of `image`, removed afterwards; never raises on exit code.

    `mounts` maps host paths to container paths (read-only), e.g. model weights or an output
    folder the caller reads later (mounted read-write when the container path ends in `:rw`).
    `storage`: the containers/storage of buildah and podman (e.g. a test's own --root).
    Raises EnvironmentProblem (exit 3) when no engine can run it (with GPUs, when asked).
    """
    spec = RunSpec(
        image=image,
        argv=[str(a) for a in argv],
        gpus=gpus,
        env=dict(env or {}),
        timeout=timeout,
        network=network,
        mounts=dict(mounts or {}),
    )
    with open_engine(engine, gpus=gpus, storage=storage) as chosen:
        return chosen.run(spec)
