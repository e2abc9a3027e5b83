"""Check ids are a registry (validators.core.checks): tests, fixtures and recorded reports may name
only ids a validator can emit, and validators cannot emit others."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from stackgate.validator_groups import ORDER
from tests.helpers.check_ids import group_of
from validators.core.checks import (
    EXACT,
    FAMILIES,
    GROUP_CHECKS,
    HOST_RULE,
    STATIC_ABI,
    available_check,
    crashed_check,
    family_id,
    is_known,
)
from validators.core.results import make_result

ROOT = Path(__file__).resolve().parents[2]
# A quoted dotted name under a group prefix, e.g. "runtime.flashinfer_jit".
_QUOTED = re.compile(r"""["']((?:host|static|runtime|serve-bench)\.[A-Za-z0-9_.+-]+)["']""")
_FILE_NAMES = (".json", ".jsonl", ".txt", ".log", ".toml", ".py", ".md", ".html", ".so")
# Every kind of file a fixture or a recorded report lives in, under tests/ and the benchmark
# scripts and results (benchmarks/*.py build gate fixtures through tests/helpers/synth_reports.py too).
# Prose (Markdown) is not scanned: the ids the validators emit are Literal types per group
# (validators.core.checks), which mypy checks at every make_result.
_SCANNED = ("*.py", "*.json", "*.jsonl", "*.toml", "*.xml", "*.html")


def _named_ids() -> dict[str, list[str]]:
    """id -> files naming it, over the tests and the recorded reports they read."""
    found: dict[str, list[str]] = {}
    files = [p for top in ("tests", "benchmarks") for pattern in _SCANNED
             for p in ROOT.joinpath(top).rglob(pattern) if p.is_file()]  # fmt: skip
    for path in files:
        if path.resolve() == Path(__file__).resolve():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for match in _QUOTED.finditer(text):
            name = match.group(1)
            if not name.endswith(_FILE_NAMES):
                found.setdefault(name, []).append(str(path.relative_to(ROOT)))
    return found


def test_every_id_a_test_or_fixture_names_can_be_emitted() -> None:
    named = _named_ids()
    assert "runtime.flashinfer_jit" in named  # the scan sees the gate tests
    prefixes = {family.prefix for family in FAMILIES}  # f"static.abi.{key}" quotes the prefix
    unknown = {
        name: where[:3]
        for name, where in named.items()
        if not is_known(name) and name not in prefixes
    }
    assert unknown == {}


def test_the_ids_that_drifted_are_not_known() -> None:
    for wrong in ("runtime.flashinfer.jit", "static.dists.match_lock", "host.gpu.present"):
        assert not is_known(wrong)
    with pytest.raises(ValueError, match=r"not in validators\.core\.checks"):
        make_result("runtime.flashinfer.jit", "PASS", "ok", group="runtime")


def test_every_id_belongs_to_a_registered_group() -> None:
    assert set(EXACT.values()) == set(ORDER)
    for check, group in EXACT.items():
        assert check.startswith(f"{group}.")
        assert group_of(check) == group
    for family in FAMILIES:
        assert family.prefix.startswith(f"{family.group}.")
    assert group_of("host.rule.host-driver-too-old-for-cuda-13") == "host"
    assert not is_known("host.rule.")


def test_shipped_stacks_accept_only_ids_a_validator_emits() -> None:
    from stackgate.manifest.loading import load_stack
    from stackgate.paths import stack_names

    for name in stack_names():
        accepted = load_stack(name).manifest.validation.accepted_findings
        assert [c for c in accepted if not is_known(c)] == [], name


def test_each_group_has_its_own_ids_and_families_take_only_names() -> None:
    """The per-group Literal types are the registry: each group's ids sit under its prefix, the
    pipeline's own ids exist for every group, and a family member is made from a name only."""
    assert sorted(GROUP_CHECKS) == sorted(ORDER)
    for group, checks in GROUP_CHECKS.items():
        assert checks and all(c.startswith(f"{group}.") for c in checks)
        assert len(set(checks)) == len(checks)
        assert group_of(available_check(group)) == group == group_of(crashed_check(group))
    assert family_id(HOST_RULE, "host-driver-too-old") == "host.rule.host-driver-too-old"
    assert is_known(family_id(STATIC_ABI, "torch.files"))
    for bad in ("", "a b", "../x", "x/y"):
        with pytest.raises(ValueError, match="cannot name a member"):
            family_id(STATIC_ABI, bad)
