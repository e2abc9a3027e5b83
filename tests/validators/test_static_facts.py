"""The seam between extracting facts and resolving them: facts read from bytes (as from a
wheel fetched over HTTP) at virtual paths resolve to the same findings as the files on disk."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.validators import elf_env
from validators.elf.elf_symbols import read_elf, read_elf_bytes
from validators.elf.fatbin import fatbin_codes_bytes
from validators.elf.object_facts import ObjectFacts, source_from_facts
from validators.static.abi_check import AbiChecker
from validators.static.environment import Environment, load_environment
from validators.static.findings import by_package

pytestmark = pytest.mark.skipif(not elf_env.have_compilers(), reason="needs gcc and g++")


def _virtual(env: Environment, disk_root: Path, virtual_root: Path) -> tuple[Environment, list]:  # type: ignore[type-arg]
    """Read every env object's bytes, re-home it under `virtual_root`, delete nothing."""
    facts = []
    for path in env.shared_objects():
        rel = path.relative_to(disk_root)
        data, at = path.read_bytes(), virtual_root / rel  # as lockcheck reads a wheel member
        facts.append(ObjectFacts(read_elf_bytes(data, at), tuple(fatbin_codes_bytes(data, at))))
    site = virtual_root / env.site_packages.relative_to(disk_root)
    owners = {virtual_root / p.relative_to(disk_root): d for p, d in env.owners.items()}
    virtual = Environment(
        root=virtual_root,
        site_packages=site,
        interpreter=env.interpreter,
        distributions=env.distributions,
        owners=owners,
        objects=tuple(f.path for f in facts),
    )
    return virtual, facts


def test_facts_from_bytes_resolve_like_the_files(tmp_path: Path) -> None:
    site = elf_env.new_env(tmp_path / "env")
    _, ext = elf_env.versioned_pair(site, tmp_path / "build", old_provider=True)
    disk_env = load_environment(tmp_path / "env")
    on_disk = AbiChecker(disk_env).check([ext])

    virtual_root = Path("/nonexistent-wheel-root") / "env"
    virtual, facts = _virtual(disk_env, (tmp_path / "env").resolve(), virtual_root)
    source = source_from_facts(facts, roots=(virtual_root,))
    checker = AbiChecker(virtual, source=source)
    virtual_ext = virtual_root / ext.resolve().relative_to((tmp_path / "env").resolve())
    from_facts = checker.check([virtual_ext])

    assert (
        [(m.symbol, m.version) for m in from_facts.missing_symbols]
        == [(m.symbol, m.version) for m in on_disk.missing_symbols]
        == [("foo", "VERS_2")]
    )
    assert [v.version for v in from_facts.missing_versions] == ["VERS_2"]
    grouped = by_package(
        virtual, [virtual_ext], from_facts.missing_symbols, [], from_facts.missing_versions
    )
    assert list(grouped) == ["consumer 1.0"]
    assert grouped["consumer 1.0"].symbols[0].importer == virtual_ext
    # the facts are the same whichever way they were read
    disk_facts = ObjectFacts(read_elf(ext), ())
    assert disk_facts.needed == facts[[f.path.name for f in facts].index(ext.name)].needed
    assert disk_facts.python_extension and disk_facts.python_tag == (3, 12)


def test_facts_source_without_host_fallback_sees_only_the_facts(tmp_path: Path) -> None:
    site = elf_env.new_env(tmp_path / "env")
    _, ext = elf_env.versioned_pair(site, tmp_path / "build", old_provider=False)
    disk_env = load_environment(tmp_path / "env")
    virtual_root = Path("/nonexistent-wheel-root") / "env"
    virtual, facts = _virtual(disk_env, (tmp_path / "env").resolve(), virtual_root)
    # drop the provider: its soname is then missing, as it would be from an incomplete wheel set
    kept = [f for f in facts if f.path.name != "libvers.so.1"]
    source = source_from_facts(kept, roots=(virtual_root,))
    virtual_ext = virtual_root / ext.resolve().relative_to((tmp_path / "env").resolve())
    found = AbiChecker(virtual, source=source, system_dirs=()).check([virtual_ext])
    assert [m.soname for m in found.missing_sonames] == ["libvers.so.1"]
    assert shutil.which("gcc")
