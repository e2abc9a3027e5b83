from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def stack_dir(tmp_path: Path) -> Path:
    """A copy of stacks/ (manifests, rules, patches) that a test may break."""
    target = tmp_path / "stacks"
    shutil.copytree(ROOT / "stacks", target, ignore=shutil.ignore_patterns("locks", "schema"))
    return target


@pytest.fixture
def write_variant(stack_dir: Path) -> Callable[[str, str, str], Path]:
    """Write `stacks/<name>.toml` = cu130.toml with `old` replaced by `new` (must occur)."""

    def write(name: str, old: str, new: str) -> Path:
        text = (stack_dir / "cu130.toml").read_text()
        assert old in text, f"test setup: {old!r} not in cu130.toml"
        text = text.replace(old, new, 1).replace('name = "cu130"', f'name = "{name}"', 1)
        path = stack_dir / f"{name}.toml"
        path.write_text(text)
        return path

    return write
