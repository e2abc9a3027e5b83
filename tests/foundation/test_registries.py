"""Registries hold their capabilities (issue 28 §3): the commands ask a validator group's entry
whether it needs an env, the host's GPUs or a serving profile, and a serving engine whether it
loads a model onto GPUs; no command keeps a set of names of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from stackgate.engines import ENGINES
from stackgate.errors import BadInput, ManifestError
from stackgate.manifest import ServingProfile
from stackgate.manifest.loading import load_stack
from stackgate.validator_groups import GROUPS, ORDER, need_env, need_gpus, specs
from validators.commands.run import default_env
from validators.serve import preconditions

ROOT = Path(__file__).resolve().parents[2]


def test_specs_follow_run_order_and_ignore_unknown_names() -> None:
    assert [g.name for g in specs(reversed(ORDER))] == list(ORDER)
    assert specs(["nope"]) == []
    assert need_env(["host"]) == [] and need_gpus(["static"]) is False
    assert need_gpus(["static", "host"]) is True


@pytest.mark.parametrize("group", ORDER)
def test_a_run_without_an_env_is_refused_exactly_for_groups_that_judge_one(
    group: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STACKGATE_VENV_ROOT", str(tmp_path / "venvs"))
    (spec,) = specs([group])
    if spec.needs_env:
        with pytest.raises(BadInput, match="no --env given and no built environment"):
            default_env("cu128", [group])
        with pytest.raises(BadInput):  # one such group among others is enough
            default_env("cu128", ["host", group])
    else:
        assert default_env("cu128", [group]) is None


def _stack_requiring(tmp_path: Path, required: list[str]) -> Path:
    text = (ROOT / "stacks" / "cu128.toml").read_text()
    lines = [line for line in text.splitlines() if not line.startswith(("required", "serve_profile"))]
    assert "[validation]" in lines
    at = lines.index("[validation]") + 1
    lines.insert(at, f"required = {required!r}".replace("'", '"'))
    stacks = tmp_path / "stacks"
    stacks.mkdir(exist_ok=True)
    path = stacks / "cu128.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("group", [g.name for g in GROUPS])
def test_a_group_needing_a_serving_profile_makes_the_manifest_name_one(
    group: str, tmp_path: Path
) -> None:
    path = _stack_requiring(tmp_path, ["host", group])
    (spec,) = specs([group])
    if spec.needs_serve_profile:
        with pytest.raises(ManifestError) as caught:
            load_stack(str(path))
        wanted = f"validation.serve_profile: required when '{group}' is in validation.required"
        assert any(wanted in p for p in caught.value.details), caught.value.details
    else:
        assert load_stack(str(path)).manifest.validation.required == ["host", group]


@pytest.mark.parametrize("name", list(ENGINES))
def test_preconditions_hold_a_launch_only_of_engines_that_load_onto_gpus(
    name: str, tmp_path: Path
) -> None:
    """A model folder that does not exist: an engine loading onto GPUs is held back (a SKIP on
    a host without GPUs, a FAIL on one with them); the user's own server is launched as is."""
    command = ["{python}", "-m", "server", "--port", "{port}"]
    profile = ServingProfile(engine=name, model_path="./no-such-model", command=command)
    unmet = preconditions.check(profile, tmp_path)
    if ENGINES[name].loads_onto_gpus:
        assert unmet is not None and unmet.status in ("SKIP", "FAIL")
        assert "no-such-model" in unmet.reason
    else:
        assert unmet is None


def test_the_where_to_change_what_table_is_generated_from_the_registries() -> None:
    from validators.reporting.registries import PAGE, page, table

    text = PAGE.read_text(encoding="utf-8")
    assert text == page(text), "run: python -m validators.reporting.registries --write"
    rows = table()
    for group in ORDER:  # what the registries hold today is in the table, read from them
        assert f"`{group}`" in rows
    for name, engine in ENGINES.items():
        assert f"`{name}`" in rows and engine.name == name
