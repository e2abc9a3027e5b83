"""Change units from two locks and two manifests, and manifests written back (no uv needed)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from stackgate.lock.uvlock import parse_uv_lock
from stackgate.manifest.loading import load_stack
from validators.bisect.manifest_text import toml_text
from validators.bisect.units import change_units, merge

ROOT = Path(__file__).resolve().parents[2]


def _lock(versions: dict[str, str]) -> str:
    parts = ["version = 1", 'requires-python = "==3.12.*"']
    for name, version in versions.items():
        parts += ["", "[[package]]", f'name = "{name}"', f'version = "{version}"',
                  'source = { registry = "https://pypi.org/simple" }']  # fmt: skip
    return "\n".join(parts) + "\n"


def test_units_one_per_changed_distribution_and_manifest_value() -> None:
    base = parse_uv_lock(_lock({"torch": "2.9.1", "triton": "3.5.0", "six": "1.16"}), where="a")
    cand = parse_uv_lock(_lock({"torch": "2.10.0", "triton": "3.6.0", "new-dep": "1.0"}), where="b")
    base_raw = {"name": "a", "packages": {"torch": {"version": "2.9.1", "index": "x"}},
                "serving": {"main": {"env": {"A": "1"}, "extra_args": ["--x"]}},
                "validation": {"gate": {"tolerance": 0.1}}}  # fmt: skip
    cand_raw = {"name": "b", "packages": {"torch": {"version": "2.10.0", "index": "y"}},
                "serving": {"main": {"env": {"A": "2", "B": "1"}, "extra_args": ["--x"]}},
                "validation": {"gate": {"tolerance": 0.5}}}  # fmt: skip
    units = change_units(base, cand, base_raw, cand_raw)
    assert [u.label for u in units] == [
        "new-dep (absent) -> 1.0",
        "six 1.16 -> (absent)",
        "torch 2.9.1 -> 2.10.0",
        "triton 3.5.0 -> 3.6.0",
        "serving.main.env.A: '1' -> '2'",
        "serving.main.env.B: None -> '1'",
    ]  # the gate policy is the baseline's, never a unit; names and indexes are not changes
    assert [u.id for u in units] == [f"u{i:02d}" for i in range(1, 7)]
    merged = merge(units, {"u03", "u04"}, "torch 2.10.0 needs triton 3.6.0")
    assert [u.id for u in merged] == ["u01", "u02", "u03+u04", "u05", "u06"]
    assert merged[2].label == "torch 2.9.1 -> 2.10.0, triton 3.5.0 -> 3.6.0"
    assert merged[2].merged_because == "torch 2.10.0 needs triton 3.6.0"


@pytest.mark.parametrize("stack", ["cu130", "cu128", "h200-transformers"])
def test_a_shipped_manifest_written_back_reads_the_same(stack: str) -> None:
    raw = load_stack(ROOT / "stacks" / f"{stack}.toml").raw
    assert tomllib.loads(toml_text(raw)) == raw
