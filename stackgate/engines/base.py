"""What a serving engine is to stackgate: a Protocol every engine module implements.

An engine turns a manifest serving profile into a command line (`argv`), says which profile
mistakes it would only report after minutes of loading (`problems`), which log line means
ready, which port it takes by default, and which distributions a benchmark record should name
the versions of. Process management (start, watch, tear down) is validators.serve's, the
same for every engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # the manifest imports the registry for its engine names
    from stackgate.manifest import ServingProfile


class ServingEngine(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def default_port(self) -> int | None: ...

    @property
    def ready_pattern(self) -> str | None:
        """Regex of the log line printed once the server answers (None: health only)."""

    @property
    def packages(self) -> tuple[str, ...]:
        """Distributions whose installed versions a benchmark record keeps."""

    @property
    def needs_env(self) -> bool:
        """Whether the engine runs from the stack's environment (its interpreter)."""

    @property
    def loads_onto_gpus(self) -> bool:
        """Whether the engine loads the model onto GPUs itself, so that a launch first needs the
        model folders, `tp` GPUs and their memory free (validators.serve.preconditions)."""

    def argv(
        self, profile: ServingProfile, python: str, host: str, port: int
    ) -> tuple[list[str], list[str]]:
        """(the command line, notes on profile fields this engine cannot take)."""

    def problems(self, profile: ServingProfile, env: Mapping[str, str]) -> list[str]:
        """Profile mistakes the engine would only report after loading; [] when none."""
