"""What a serving engine is to stackgate: a Protocol every engine module implements.

An engine turns a manifest serving profile into a command line (`argv`), says which profile
mistakes it would only report after minutes of loading (`problems`), which log line means
ready, which port it takes by default, and which distributions a benchmark record should name
the versions of. Process management (start, watch, tear down) is validators.serve's, the
same for every engine.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol


class EngineSpeculative(Protocol):
    @property
    def algorithm(self) -> str: ...

    draft_model_path: str | None
    num_steps: int | None
    eagle_topk: int | None
    num_draft_tokens: int | None


class EngineProfile(Protocol):
    """The serving-profile fields an engine reads (stackgate.manifest.ServingProfile has them):
    the manifest imports this registry for its engine names, so engines name no manifest model."""

    model_path: str
    served_model_name: str | None
    tp: int
    attention_backend: str | None
    cuda_graph_max_bs: int | None
    trust_remote_code: bool
    tool_call_parser: str | None
    reasoning_parser: str | None
    extra_args: list[str]
    command: list[str]

    @property
    def speculative(self) -> EngineSpeculative | None: ...


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
        self, profile: EngineProfile, python: str, host: str, port: int
    ) -> tuple[list[str], list[str]]:
        """(the command line, notes on profile fields this engine cannot take)."""

    def problems(self, profile: EngineProfile, env: Mapping[str, str]) -> list[str]:
        """Profile mistakes the engine would only report after loading; [] when none."""
