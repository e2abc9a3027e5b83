"""Check ids are a registry (validators.checks): tests, fixtures and recorded reports may name
only ids a validator can emit, and validators cannot emit others."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from stackgate.validator_groups import ORDER
from validators.checks import EXACT, FAMILIES, group_of, is_known
from validators.results import make_result

ROOT = Path(__file__).resolve().parents[2]
# A quoted dotted name under a group prefix, e.g. "runtime.flashinfer_jit".
_QUOTED = re.compile(r"""["']((?:host|static|runtime|serve-bench)\.[A-Za-z0-9_.+-]+)["']""")
_FILE_NAMES = (".json", ".jsonl", ".txt", ".log", ".toml", ".py", ".md", ".html", ".so")
# Every kind of file a fixture or a recorded report lives in, under tests/ and the benchmark
# scripts and results (benchmarks/*.py build gate fixtures through tests/gate/synth.py too).
_SCANNED = ("*.py", "*.json", "*.jsonl", "*.toml", "*.xml", "*.html", "*.md")


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
    with pytest.raises(ValueError, match=r"not in validators\.checks"):
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
    from stackgate.loading import load_stack
    from stackgate.paths import stack_names

    for name in stack_names():
        accepted = load_stack(name).manifest.validation.accepted_findings
        assert [c for c in accepted if not is_known(c)] == [], name
