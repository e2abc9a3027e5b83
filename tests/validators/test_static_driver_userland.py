"""A crash at load under the stub driver is confirmed with a real driver userland before it is a
FAIL (issue 25 item 3). The userland is Debian bookworm non-free's libcuda1 535.261.03 that
`.ci/bootstrap` unpacks into ~/.cache/stackgate/driver-userland (never into an env).

onnxruntime-gpu 1.22's CUDA provider segfaults with the generated stub because the stub's
functions return 100 and fill in nothing. These plugins (gcc-built) do what such code does:
call cuDriverGetVersion(&v) at load and use v. The real libcuda.so.1 writes the version
(it needs no GPU for that), the stub does not.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.validators import elf_env
from tests.validators.static_run import static_results
from validators.static.driver_userland import ENV_VAR, find_userland

pytestmark = pytest.mark.skipif(not elf_env.have_compilers(), reason="needs gcc and g++")

USES_VERSION_C = """
#include <signal.h>
extern int cuDriverGetVersion(int *v);
__attribute__((constructor)) static void init(void) {
  int v = -1;
  cuDriverGetVersion(&v);
  if (v <= 0) raise(SIGSEGV);  /* what using an unset value amounts to */
}
int drv_fn(void) { return 0; }
"""
ALWAYS_CRASHES_C = """
#include <signal.h>
extern int cuDriverGetVersion(int *v);
__attribute__((constructor)) static void init(void) { int v; cuDriverGetVersion(&v); raise(SIGSEGV); }
"""


def _env(tmp_path: Path, source: str) -> Path:
    """A package whose plugin links libcuda.so.1 (linked at build time against a stand-in
    that is not in the env: at check time the driver is absent, as on any CPU host)."""
    build = tmp_path / "build"
    elf_env.gcc(
        build / "libcuda.so.1",
        "int cuDriverGetVersion(int *v) { *v = 1; return 0; }\n",
        "-Wl,-soname,libcuda.so.1",
    )
    site = elf_env.new_env(tmp_path / "env")
    plugin = elf_env.gcc(
        site / "ortish" / "capi" / "libortish_providers_cuda.so",
        source,
        f"-L{build}",
        "-l:libcuda.so.1",
    )
    elf_env.add_package(site, "ortish", [plugin])
    return tmp_path / "env"


@pytest.fixture
def userland() -> Path:
    found = find_userland()
    if found is None:
        pytest.skip("no driver userland: .ci/bootstrap unpacks Debian's libcuda1")
    return found.folder


def test_a_crash_only_the_stub_causes_is_not_a_failure(tmp_path: Path, userland: Path) -> None:
    r = static_results(_env(tmp_path, USES_VERSION_C), deep=True)["static.abi.ortish"]
    assert r.status == "PASS", r.reason
    (load,) = [x for x in r.evidence["loads"] if x["step"].endswith("providers_cuda.so")]
    assert load["outcome"] == "ok"
    assert load["error"].startswith("loads with a real driver userland (libcuda.so.1 535.")
    assert load["error"].endswith("crashed only under the stub driver (SIGSEGV)")


def test_a_crash_the_real_userland_also_sees_is_a_failure(tmp_path: Path, userland: Path) -> None:
    r = static_results(_env(tmp_path, ALWAYS_CRASHES_C), deep=True)["static.abi.ortish"]
    assert r.status == "FAIL", r.reason
    assert r.reason.startswith("crashes at load (SIGSEGV): ortish/capi/libortish_providers")
    assert "also with a real driver userland" in r.evidence["loads"][-1]["error"]


def test_without_a_userland_a_stub_crash_is_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "no-userland"
    empty.mkdir()
    monkeypatch.setenv(ENV_VAR, str(empty))
    r = static_results(_env(tmp_path, USES_VERSION_C), deep=True)["static.abi.ortish"]
    assert r.status == "PASS", r.reason
    assert r.evidence["severity"] == "WARN"
    assert r.reason.startswith(
        "WARN: crashes at load, not confirmed: ortish/capi/libortish_providers_cuda.so: SIGSEGV "
        "(under the stub driver, and no real driver userland here to confirm it"
    )
