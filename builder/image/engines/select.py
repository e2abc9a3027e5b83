"""Pick an engine: the one asked for, or (auto) Docker when a daemon answers, else buildah,
else podman. None usable: exit 3 naming each engine tried and why it was passed over."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

from builder.image.engines.base import ENGINES, EngineName, ImageEngine
from builder.image.engines.buildah import Buildah, Podman, StorageConfig
from builder.image.engines.docker_sdk import DockerConfig, DockerEngine
from stackgate.errors import EnvironmentProblem

EngineChoice = Literal["auto", "docker", "buildah", "podman"]


def _make(name: EngineName, storage: StorageConfig, docker: DockerConfig) -> ImageEngine:
    match name:
        case "docker":
            return DockerEngine(docker)
        case "buildah":
            return Buildah(storage)
        case "podman":
            return Podman(storage)


@contextmanager
def open_engine(
    choice: EngineChoice = "auto",
    *,
    storage: StorageConfig | None = None,
    docker: DockerConfig | None = None,
) -> Iterator[ImageEngine]:
    """The first usable engine, entered (version checked) and cleaned up on leaving."""
    order: tuple[EngineName, ...] = ENGINES if choice == "auto" else (choice,)
    tried: list[str] = []
    for name in order:
        engine = _make(name, storage or StorageConfig(), docker or DockerConfig())
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
    raise EnvironmentProblem(
        "no container engine usable" if choice == "auto" else f"engine '{choice}' is not usable",
        details=[*tried, "install buildah (apt-get install buildah) or start a Docker daemon"],
    )
