"""Pick an engine, for a build or a run: the one asked for, or (auto) the first usable one in
stackgate.containers.base.ENGINES (Docker when a daemon answers, else buildah, else podman);
a run that needs GPUs passes over engines that cannot give them. None usable: exit 3 naming
each engine tried and why it was passed over."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

from stackgate.containers.base import ENGINES, ContainerEngine, EngineName
from stackgate.containers.buildah import Buildah, Podman, StorageConfig
from stackgate.containers.docker import DockerConfig, DockerEngine
from stackgate.errors import EnvironmentProblem

# The engine classes by name: what they can do (can_run_gpus, reproducible, minimum) is on
# the class. Adding an engine: its module, its name in base.EngineName, its class here.
ENGINE_CLASSES: dict[EngineName, type[ContainerEngine]] = {
    cls.name: cls for cls in (DockerEngine, Buildah, Podman)
}
if tuple(sorted(ENGINE_CLASSES)) != tuple(sorted(ENGINES)):  # pragma: no cover - import guard
    raise RuntimeError("stackgate.containers: ENGINE_CLASSES and base.EngineName disagree")

EngineChoice = Literal["auto"] | EngineName
ENGINE_CHOICES: tuple[EngineChoice, ...] = ("auto", *ENGINES)


def _make(name: EngineName, storage: StorageConfig, docker: DockerConfig) -> ContainerEngine:
    return ENGINE_CLASSES[name].configured(storage, docker)


@contextmanager
def open_engine(
    choice: EngineChoice = "auto",
    *,
    gpus: bool = False,
    storage: StorageConfig | None = None,
    docker: DockerConfig | None = None,
) -> Iterator[ContainerEngine]:
    """The first usable engine, entered (version checked) and cleaned up on leaving.

    gpus: the caller will run containers with the host's GPUs."""
    order: tuple[EngineName, ...] = ENGINES if choice == "auto" else (choice,)
    tried: list[str] = []
    for name in order:
        engine = _make(name, storage or StorageConfig(), docker or DockerConfig())
        if gpus and not engine.can_run_gpus:
            tried.append(f"{name} cannot give a container GPUs (no NVIDIA hook or CDI)")
            continue
        try:
            engine.__enter__()
        except EnvironmentProblem as exc:
            said = exc.message
            tried.append(said if said.startswith(f"{name}") else f"{name}: {said}")
            continue
        try:
            yield engine
        finally:
            engine.__exit__(*sys.exc_info())
        return
    if choice != "auto":
        gpu_hint = ["use docker (--gpus all) or podman with CDI (--device nvidia.com/gpu=all)"]
        raise EnvironmentProblem(
            f"engine '{choice}' is not usable: {tried[0]}",
            details=[*tried, *(gpu_hint if gpus else [])],
        )
    raise EnvironmentProblem(
        "no container engine usable",
        details=[*tried, "install buildah (apt-get install buildah) or start a Docker daemon"],
    )
