"""The serving-engine registry: the manifest, the schema, ports and records derive from it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stackgate.engines import ENGINE_NAMES, ENGINES
from stackgate.errors import ManifestError
from stackgate.manifest import ServingProfile
from stackgate.manifest.loading import load_stack
from stackgate.manifest.schema import schemas
from validators.serve.adapters import DEFAULT_PORTS


def test_registry_names_are_what_manifests_and_the_schema_accept() -> None:
    assert all(name == e.name for name, e in ENGINES.items())
    assert set(ENGINE_NAMES) == {"sglang", "vllm", "openai-command"}
    schema = json.loads(schemas()["manifest.schema.json"])
    engine = schema["$defs"]["ServingProfile"]["properties"]["engine"]
    assert engine["enum"] == list(ENGINE_NAMES)
    assert DEFAULT_PORTS == {"sglang": 30000, "vllm": 8000}


def test_unknown_engine_names_the_known_ones(tmp_path: Path) -> None:
    text = (Path(__file__).resolve().parents[2] / "stacks" / "cu128.toml").read_text()
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    profile = '[serving.mini]\nengine = "tgi"\nmodel_path = "m"\n'
    (stacks / "cu128.toml").write_text(text + "\n" + profile)
    with pytest.raises(ManifestError) as caught:
        load_stack(str(stacks / "cu128.toml"))
    assert any("unknown engine 'tgi'; known: sglang, vllm, openai-command" in p
               for p in caught.value.details), caught.value.details  # fmt: skip


@pytest.mark.parametrize("name", ENGINE_NAMES)
def test_every_engine_builds_a_command_for_a_minimal_profile(name: str) -> None:
    command = ["{python}", "-m", "server", "--port", "{port}"]
    profile = ServingProfile(engine=name, model_path="m", command=command)
    argv, _notes = ENGINES[name].argv(profile, "/env/bin/python", "127.0.0.1", 1234)
    assert argv[0] == "/env/bin/python" and "1234" in argv
    assert ENGINES[name].problems(profile, {}) == []
