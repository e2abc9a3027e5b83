"""Requirements are judged with their environment markers evaluated for the env's own Python
(issue 25 item 5): vLLM 0.11.0's `numba==0.60.0; python_version == "3.9"` line was reported as
"requires numba==0.60.0" in a Python 3.12 env, and opencv's `numpy<2.0; python_version < "3.9"`
as "requires numpy<2.0". Tiny real ELF envs (gcc), real confirming loads."""

from __future__ import annotations

import platform
from pathlib import Path

import pytest

from tests.validators import elf_env
from tests.validators.static_run import static_results
from validators.static.environment import load_environment

pytestmark = pytest.mark.skipif(not elf_env.have_compilers(), reason="needs gcc and g++")

EXT_C = "int PyInit__C(void) { return 0; }\n"


def _env(tmp_path: Path, requires: tuple[str, ...], cfg: str | None = None) -> Path:
    """`vllmish` (an extension module) requiring `numbaish`, installed at 0.61.2 with a
    library of its own (so the requirement is on a linked package, as numba's is)."""
    root = tmp_path / "env"
    site = elf_env.new_env(root)
    lib = elf_env.gcc(site / "numbaish" / "libnumbaish.so", "int nb(void){return 1;}\n")
    (site / "numbaish" / "__init__.py").write_text("", encoding="utf-8")
    elf_env.add_dist(site, "numbaish", "0.61.2", [lib])
    ext = elf_env.gcc(site / "vllmish" / "_C.cpython-312-x86_64-linux-gnu.so", EXT_C)
    elf_env.add_package(site, "vllmish", [ext], requires=requires)
    if cfg is not None:
        (root / "pyvenv.cfg").write_text(cfg, encoding="utf-8")
    return root


def test_a_requirement_for_another_python_is_not_reported(tmp_path: Path) -> None:
    env = _env(
        tmp_path,
        ('numbaish==0.60.0; python_version == "3.9"', 'numbaish>=0.61; python_version >= "3.10"'),
    )
    results = static_results(env)
    abi = results["static.abi.vllmish"]
    assert abi.status == "PASS", abi.reason
    assert "0.60.0" not in abi.reason
    reqs = results["static.dists.requirements"]
    assert reqs.status == "PASS", reqs.reason


def test_the_same_requirement_without_the_marker_is_reported(tmp_path: Path) -> None:
    """The control: the line that applies is still read (an unmet pin on a linked package
    makes the confirming load run; the module loads, so INFO with the pin named)."""
    env = _env(tmp_path, ('numbaish==0.60.0; python_version >= "3.10"',))
    results = static_results(env)
    abi = results["static.abi.vllmish"]
    assert abi.evidence["severity"] == "INFO", abi.reason
    assert "requires numbaish==0.60.0, numbaish 0.61.2 installed (its modules load)" in abi.reason
    reqs = results["static.dists.requirements"]
    assert reqs.status == "FAIL"
    assert "vllmish 1.0 requires numbaish==0.60.0" in reqs.reason


def test_full_python_version_comes_from_pyvenv_cfg(tmp_path: Path) -> None:
    """`python_full_version` markers need the patch level: uv writes it as version_info."""
    cfg = "home = /usr/bin\nimplementation = CPython\nversion_info = 3.12.3\n"
    env = _env(tmp_path, ('numbaish==0.60.0; python_full_version < "3.12.2"',), cfg)
    assert load_environment(env).marker_env()["python_full_version"] == "3.12.3"
    assert static_results(env)["static.dists.requirements"].status == "PASS"
    cfg = cfg.replace("3.12.3", "3.12.1")
    (env / "pyvenv.cfg").write_text(cfg, encoding="utf-8")
    assert static_results(env)["static.dists.requirements"].status == "FAIL"


_HOST = platform.machine()
_OTHER = "aarch64" if _HOST != "aarch64" else "x86_64"


@pytest.mark.parametrize(
    ("marker", "applies"),
    [
        # the env runs on this host: its machine and OS are this host's
        (f'platform_machine == "{_OTHER}"', False),
        (f'platform_machine == "{_HOST}"', True),
        ('sys_platform == "darwin"', False),
        (f'sys_platform == "linux" and platform_machine != "{_OTHER}"', True),
        ('platform_system == "Windows"', False),
        # an extra's requirement applies only to who asks for the extra (pip check agrees)
        ('extra == "cuda"', False),
        ('python_version >= "3.10" and extra == "cuda"', False),
        # the env's Python (3.12), not this tool's interpreter
        ('implementation_version < "3.12"', False),
        ('implementation_version >= "3.12" and implementation_name == "cpython"', True),
        ('python_version == "3.11"', False),
    ],
)
def test_markers_of_other_kinds_are_evaluated_for_the_env(
    tmp_path: Path, marker: str, applies: bool
) -> None:
    """Variants of the vLLM numba line: machine, OS, extras, implementation version."""
    env = _env(tmp_path, (f"numbaish==0.60.0; {marker}",))
    reqs = static_results(env)["static.dists.requirements"]
    assert reqs.status == ("FAIL" if applies else "PASS"), reqs.reason
