"""Image engines behind one interface: Docker Engine (SDK), buildah, podman."""

from builder.image.engines.base import (
    ENGINES,
    KEEP_ENV,
    BuildSpec,
    BuiltImage,
    EngineName,
    ImageEngine,
    unique_tag,
)
from builder.image.engines.select import EngineChoice, open_engine

__all__ = [
    "ENGINES",
    "KEEP_ENV",
    "BuildSpec",
    "BuiltImage",
    "EngineChoice",
    "EngineName",
    "ImageEngine",
    "open_engine",
    "unique_tag",
]
