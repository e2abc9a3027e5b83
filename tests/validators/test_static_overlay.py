"""A file one distribution overwrote in another's tree: a break, or a variant laid over the
exact base it was made for (nvidia-cutlass-dsl-libs-cu13 4.5.2 over -libs-base 4.5.2, which
it requires `==4.5.2`; found in a healthy sglang==0.5.15 env, whose cutlass modules load)."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path

import pytest

from tests.validators import elf_env
from tests.validators.static_run import static_results

pytestmark = pytest.mark.skipif(not elf_env.have_compilers(), reason="needs gcc and g++")


def _record_hash(path: Path) -> str:
    digest = hashlib.sha256(path.read_bytes()).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).decode().rstrip("=")


def _overlaid(tmp_path: Path, winner_requires: str) -> Path:
    """libs-base and libs-cu13 both install dsl/_ir.cpython-312...so; cu13's copy is on disk."""
    base_build = elf_env.gcc(tmp_path / "build" / "base.so", "int PyInit__ir(void){return 12;}\n")
    site = elf_env.new_env(tmp_path / "env")
    on_disk = elf_env.gcc(
        site / "dsl" / "_ir.cpython-312-x86_64-linux-gnu.so", "int PyInit__ir(void){return 13;}\n"
    )
    rel = on_disk.relative_to(site)
    for name, digest, requires in (
        ("libs-base", _record_hash(base_build), ""),
        ("libs-cu13", _record_hash(on_disk), winner_requires),
    ):
        info = site / f"{name.replace('-', '_')}-4.5.2.dist-info"
        info.mkdir()
        meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: 4.5.2\n"
        if requires:
            meta += f"Requires-Dist: {requires}\n"
        (info / "METADATA").write_text(meta)
        (info / "RECORD").write_text(f"{rel},{digest},1\n")
    return tmp_path / "env"


def test_variant_pinned_to_the_exact_base_it_overwrites_is_info(tmp_path: Path) -> None:
    r = static_results(_overlaid(tmp_path, "libs-base==4.5.2"), confirm=False)
    files = r["static.abi.libs_base.files"]
    assert files.status == "PASS", files.reason
    assert files.evidence["severity"] == "INFO"
    assert "libs-cu13 4.5.2's copy (libs-cu13 requires libs-base==4.5.2)" in files.reason


@pytest.mark.parametrize(
    "requires",
    ["", "libs-base>=4.0", "libs-base==4.5.1", 'libs-base==4.5.2; extra == "cu13"'],
    ids=["no-requirement", "range", "other-version", "only-as-an-extra"],
)
def test_overwrite_without_an_exact_pin_stays_a_failure(tmp_path: Path, requires: str) -> None:
    r = static_results(_overlaid(tmp_path, requires), confirm=False)
    assert r["static.abi.libs_base.files"].status == "FAIL"
