"""The serving engines a manifest profile may name (`engine = "..."`), one module each.

Adding an engine is one module here implementing stackgate.engines.base.ServingEngine, one
line in ENGINES, and its tests; the manifest's accepted names and JSON schema, default
ports, ready lines and the versions a benchmark records all come from this registry.
"""

from __future__ import annotations

from stackgate.engines import openai_command, sglang, vllm
from stackgate.engines.base import ServingEngine

ENGINES: dict[str, ServingEngine] = {
    e.name: e for e in (sglang.ENGINE, vllm.ENGINE, openai_command.ENGINE)
}
ENGINE_NAMES: tuple[str, ...] = tuple(ENGINES)


def engine(name: str) -> ServingEngine:
    return ENGINES[name]
