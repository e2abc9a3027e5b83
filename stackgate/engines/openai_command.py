"""Any OpenAI-compatible server started by the profile's own `command` (transformers serve,
a synthetic test server, ...): placeholders {host} {port} {model_path} {python} {bin}
{served_model_name} are filled in."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from stackgate.engines.base import EngineProfile

_PLACEHOLDER = re.compile(r"\{(host|port|model_path|python|bin|served_model_name)\}")


@dataclass(frozen=True)
class OpenAICommand:
    name: str = "openai-command"
    default_port: int | None = None
    ready_pattern: str | None = None
    packages: tuple[str, ...] = ("transformers", "torch")
    needs_env: bool = False
    loads_onto_gpus: bool = False  # the user's own server: what it loads is its own business

    def argv(
        self, profile: EngineProfile, python: str, host: str, port: int
    ) -> tuple[list[str], list[str]]:
        values = {
            "host": host,
            "port": str(port),
            "model_path": profile.model_path,
            "python": python,
            "bin": str(Path(python).parent),
            "served_model_name": profile.served_model_name or profile.model_path,
        }
        argv = [_PLACEHOLDER.sub(lambda m: values[m.group(1)], a) for a in profile.command]
        return argv + list(profile.extra_args), []

    def problems(self, profile: EngineProfile, env: Mapping[str, str]) -> list[str]:
        if not profile.command:
            return ["engine 'openai-command' needs `command` (the argv that starts the server)"]
        return []


ENGINE = OpenAICommand()
