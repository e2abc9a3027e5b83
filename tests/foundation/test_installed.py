"""One reader of what an env has installed and one "installed equals the lock" rule
(stackgate.installed), the same for the builder (which refuses the env) and the static group
(which reports it): PEP 440 equality, seeds (pip, setuptools, wheel) exempt only when unlocked.
Both sides are driven on one real site-packages folder of *.dist-info directories."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.venv.installed import verify_against_lock
from stackgate.errors import EnvironmentProblem
from stackgate.installed import lock_differences, read_distributions, same_version
from stackgate.layout import LockFiles
from stackgate.lock.state import LockState
from stackgate.lock.uvlock import parse_uv_lock
from validators.static.dist_check import DistFindings, check_lock
from validators.static.environment import load_environment


def _dist(site: Path, name: str, version: str | None) -> None:
    folder = site / f"{name.replace('-', '_')}-{version or 'x'}.dist-info"
    folder.mkdir(parents=True)
    lines = [f"Name: {name}"] + ([f"Version: {version}"] if version else [])
    (folder / "METADATA").write_text("Metadata-Version: 2.1\n" + "\n".join(lines) + "\n")


def _env(tmp_path: Path, dists: dict[str, str]) -> Path:
    env = tmp_path / "env"
    site = env / "lib" / "python3.12" / "site-packages"
    site.mkdir(parents=True)
    (env / "bin").mkdir()
    for name, version in dists.items():
        _dist(site, name, version)
    return env


def _lock(packages: dict[str, list[str]]) -> str:
    out = ['version = 1\nrequires-python = ">=3.12"\n']
    # the project needs every package (as uv writes it: the version where a name has several)
    edges = ", ".join(
        f'{{ name = "{name}"' + (f', version = "{v}" }}' if len(versions) > 1 else " }")
        for name, versions in packages.items()
        for v in versions
    )
    out.append('[[package]]\nname = "project"\nversion = "0"\nsource = { virtual = "." }\n'
               f"dependencies = [{edges}]\n")  # fmt: skip
    for name, versions in packages.items():
        for v in versions:
            out.append(f'[[package]]\nname = "{name}"\nversion = "{v}"\n'
                       'source = { registry = "https://pypi.org/simple" }\n')  # fmt: skip
    return "\n".join(out)


def _both_sides(tmp_path: Path, installed: dict[str, str], locked: dict[str, list[str]]):  # type: ignore[no-untyped-def]
    """(the builder's refusal details or None, the static group's findings)."""
    env = _env(tmp_path, installed)
    lock = parse_uv_lock(_lock(locked), where="uv.lock")
    state = LockState(LockFiles(tmp_path / "lock"), "m", "l", {}, lock)
    try:
        verify_against_lock(env, state)
        refused = None
    except EnvironmentProblem as exc:
        refused = exc.details
    findings = DistFindings()
    check_lock(lock, load_environment(env, with_owners=False), findings)
    return refused, findings


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        ("1.0", "1.0.0", True),  # PEP 440: the builder used to compare text and refuse this
        ("2.9.1+cu128", "2.9.1", False),  # a local tag is part of the version
        ("2.9.1+cu128", "2.9.1+CU128", True),
        ("1.0.post0", "1.0", False),
        ("not a version", "not a version", True),  # unreadable: compared as text
        ("not a version", "not-a-version", False),
    ],
)
def test_versions_are_equal_by_pep_440(a: str, b: str, equal: bool) -> None:
    assert same_version(a, b) is equal


def test_equal_versions_spelled_apart_pass_on_both_sides(tmp_path: Path) -> None:
    refused, findings = _both_sides(tmp_path, {"six": "1.16", "idna": "3.7"},
                                    {"six": ["1.16.0"], "idna": ["3.7"]})  # fmt: skip
    assert refused is None
    assert findings.lock_mismatches == [] and findings.not_in_lock == []


def test_a_different_version_fails_on_both_sides(tmp_path: Path) -> None:
    refused, findings = _both_sides(tmp_path, {"torch": "2.9.1"}, {"torch": ["2.9.1+cu128"]})
    assert refused == ["torch: locked 2.9.1+cu128, installed 2.9.1"]
    assert findings.lock_mismatches == ["torch: lock has 2.9.1+cu128, installed 2.9.1"]


def test_an_unlocked_seed_is_no_difference_a_locked_one_is_compared(tmp_path: Path) -> None:
    refused, findings = _both_sides(
        tmp_path, {"pip": "24.0", "setuptools": "69.0", "six": "1.16.0"},
        {"setuptools": ["70.0"], "six": ["1.16.0"]},
    )  # fmt: skip
    # pip is not locked: a seed, no difference. setuptools is locked at 70.0: the static group
    # used to skip it whatever the lock said.
    assert refused == ["setuptools: locked 70.0, installed 69.0"]
    assert findings.lock_mismatches == ["setuptools: lock has 70.0, installed 69.0"]
    assert findings.not_in_lock == []


def test_an_unlocked_package_fails_on_both_sides_and_a_missing_one_only_the_builder(
    tmp_path: Path,
) -> None:
    refused, findings = _both_sides(tmp_path, {"six": "1.16.0", "extra-pkg": "1.0"},
                                    {"six": ["1.16.0"], "idna": ["3.7"]})  # fmt: skip
    assert refused == ["idna: locked 3.7, installed nothing", "extra-pkg: installed but not locked"]
    assert findings.not_in_lock == ["extra-pkg 1.0"]  # a universal lock holds other platforms'


def test_a_universal_lock_with_two_versions_accepts_either(tmp_path: Path) -> None:
    diff = lock_differences({"numpy": "2.0.0"}, {"numpy": ["1.26.4", "2.0.0"]})
    assert diff.exact()
    diff = lock_differences({"numpy": "2.1.0"}, {"numpy": ["2.0.0", "1.26.4", "2.0.0"]})
    assert diff.mismatched == [("numpy", ["1.26.4", "2.0.0"], "2.1.0")]


def test_the_reader_skips_metadata_without_a_version(tmp_path: Path) -> None:
    site = tmp_path / "site"
    _dist(site, "Good_Name", "1.0")
    _dist(site, "broken", None)
    found = read_distributions(site)
    assert list(found) == ["good-name"] and found["good-name"].version == "1.0"
