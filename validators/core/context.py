"""What every validator group gets: the stack, the environment to judge, and run options."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from stackgate.manifest.loading import LoadedStack
from stackgate.topology import Topology
from validators.core.options import GroupOptions
from validators.core.results import Result


@dataclass(frozen=True)
class RunContext:
    stack: LoadedStack
    env_path: Path | None = None
    topology: Topology | None = None
    keep_going: bool = False
    serve_profile: str | None = None
    out_dir: Path | None = None
    options: GroupOptions = field(default_factory=GroupOptions)

    @property
    def python(self) -> Path | None:
        """The environment's interpreter, or None when no env was given."""
        return None if self.env_path is None else self.env_path / "bin" / "python"


# A validator group: takes the context, returns its results (never raises for a check failing).
GroupRunner = Callable[[RunContext], list[Result]]
