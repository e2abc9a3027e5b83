"""More variants of issue 10.5 (a lock that contradicts the manifest): a lock holding the
pinned version AND another one of the same package (uv forks a resolution by markers, so a
forged entry for another marker set installs the other version on hosts that match it). Every
locked version of a pinned package must be the pin. Real manifest (the smoke stack: pins without overrides) and a real lock text."""

from __future__ import annotations

from pathlib import Path

from stackgate.lock.pins import contradictions
from stackgate.lock.uvlock import parse_uv_lock
from stackgate.manifest.loading import load_stack

ROOT = Path(__file__).resolve().parents[2]


def _lock(*entries: tuple[str, str]) -> str:
    blocks = [
        f'[[package]]\nname = "{name}"\nversion = "{version}"\n'
        f'source = {{ registry = "https://pypi.org/simple" }}\n'
        for name, version in entries
    ]
    return 'version = 1\nrequires-python = ">=3.12"\n\n' + "\n".join(blocks)


def test_a_second_locked_version_of_a_pinned_package_is_a_contradiction() -> None:
    manifest = load_stack(ROOT / "tests" / "builder" / "data" / "smoke.toml").manifest
    pins = {name: pkg.version or "1.0" for name, pkg in manifest.packages.items()}
    honest = _lock(*pins.items())
    assert contradictions(manifest, parse_uv_lock(honest, where="uv.lock")) == []
    overridden = " ".join(manifest.overrides)
    name = next(n for n, p in manifest.packages.items() if p.version and n not in overridden)
    forged = _lock(*pins.items(), (name, "0.0.1"))
    found = contradictions(manifest, parse_uv_lock(forged, where="uv.lock"))
    assert any(f"packages.{name}.version" in line and "0.0.1" in line for line in found), found
