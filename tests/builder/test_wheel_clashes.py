"""Files several distributions install are a fact, not damage; damage is refused with the
advice its cause calls for.

flashinfer-python 0.6.3 and torch-c-dlpack-ext 0.1.5 (real PyPI wheels, cached under
~/.cache/stackgate/upstream) both ship a top-level `build_backend.py` with different bytes:
installed into one real venv by real uv, in either order and in one parallel install, the env
holds one copy, the check names the clash and whose copy it is, and nothing is refused. A file
changed after install, or a damaged copy in uv's cache (a private UV_CACHE_DIR per test), is
refused, each with its own advice.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.venv.wheel_record import check_wheel_records, diagnose
from stackgate.envtree.wheel_records import judge, read_claims
from stackgate.errors import EnvironmentProblem
from tests.helpers.interpreter import PY_MINOR
from tests.helpers.upstream import PinnedWheel, fetch
from tests.helpers.uv_venv import install as _install
from tests.helpers.uv_venv import venv as _venv

pytestmark = [pytest.mark.network, pytest.mark.xdist_group("upstream-wheels")]

_XY = PY_MINOR.replace(".", "")
FLASHINFER = PinnedWheel("flashinfer-python", "flashinfer_python-0.6.3-py3-none-any.whl")
DLPACK_EXT = PinnedWheel(
    "torch-c-dlpack-ext",
    f"torch_c_dlpack_ext-0.1.5-cp{_XY}-cp{_XY}-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl",
)
FI_DIST = "flashinfer_python-0.6.3.dist-info"
DL_DIST = "torch_c_dlpack_ext-0.1.5.dist-info"


def _backend(env: Path) -> str:
    return f"lib/python{PY_MINOR}/site-packages/build_backend.py"


@pytest.mark.parametrize("order", ["flashinfer-last", "dlpack-ext-last"])
def test_two_wheels_shipping_one_file_are_a_clash_not_damage(tmp_path: Path, order: str) -> None:
    fi, dl = fetch(FLASHINFER), fetch(DLPACK_EXT)
    cache = tmp_path / "uv-cache"
    env = _venv(tmp_path, cache)
    first, last = (dl, fi) if order == "flashinfer-last" else (fi, dl)
    _install(env, cache, first)
    _install(env, cache, last)  # uv overwrites the first one's build_backend.py, as pip does
    winner = FI_DIST if order == "flashinfer-last" else DL_DIST

    records = check_wheel_records(env, uv_cache=cache)  # no refusal

    clash = next(c for c in records.clashes if c.path == _backend(env))
    assert clash.owners == [FI_DIST, DL_DIST]
    assert clash.holds == [winner]
    assert clash.same_bytes is False
    assert records.files_checked > 100  # flashinfer's hundreds of files were all hashed


def test_one_parallel_install_holds_one_owners_copy(tmp_path: Path) -> None:
    cache = tmp_path / "uv-cache"
    env = _venv(tmp_path, cache)
    _install(env, cache, fetch(FLASHINFER), fetch(DLPACK_EXT))  # uv's order: either may win

    judged = judge(read_claims(env))

    assert judged.damaged == []
    (clash,) = [c for c in judged.clashes if c.path == _backend(env)]
    assert len(clash.holds) == 1 and clash.holds[0] in (FI_DIST, DL_DIST)


def test_a_file_changed_after_install_is_refused_with_rebuild_advice(tmp_path: Path) -> None:
    cache = tmp_path / "uv-cache"
    env = _venv(tmp_path, cache)
    _install(env, cache, fetch(FLASHINFER), fetch(DLPACK_EXT))
    target = env / f"lib/python{PY_MINOR}/site-packages/flashinfer/__init__.py"
    target.write_bytes(target.read_bytes() + b"\n# edited\n")

    with pytest.raises(EnvironmentProblem) as caught:
        check_wheel_records(env, uv_cache=cache)

    message = caught.value.message
    assert "changed after uv installed them" in message and "build again" in message
    assert "uv cache clean" not in message  # the cache is intact: cleaning it would not help
    assert any("flashinfer/__init__.py" in d and FI_DIST in d for d in caught.value.details)


def test_a_damaged_cache_copy_is_refused_with_cache_clean_advice(tmp_path: Path) -> None:
    cache = tmp_path / "uv-cache"
    first = _venv(tmp_path / "a", cache)
    _install(first, cache, fetch(DLPACK_EXT))
    # damage uv's unpacked copy, then install from it into a second env
    (copy,) = [
        p
        for p in cache.glob(f"archive-v*/*/{DL_DIST}")
        if (p.parent / "build_backend.py").is_file()
    ]
    cached = copy.parent / "build_backend.py"
    cached.chmod(0o644)
    cached.write_bytes(cached.read_bytes() + b"\nDAMAGED = True\n")
    second = _venv(tmp_path / "b", cache)
    _install(second, cache, fetch(DLPACK_EXT))

    with pytest.raises(EnvironmentProblem) as caught:
        check_wheel_records(second, uv_cache=cache)

    assert "uv cache clean torch-c-dlpack-ext`" in caught.value.message  # uv as typed here
    assert "changed after" not in caught.value.message


def test_without_a_cache_copy_the_advice_names_both_causes(tmp_path: Path) -> None:
    cache = tmp_path / "uv-cache"
    env = _venv(tmp_path, cache)
    _install(env, cache, fetch(DLPACK_EXT))
    site = env / f"lib/python{PY_MINOR}/site-packages"
    (site / "build_backend.py").write_text("# replaced\n")

    judged = judge(read_claims(env))
    (found,) = diagnose(judged.damaged, tmp_path / "no-cache-here")

    assert found.cause == "unknown" and found.packages == ("torch-c-dlpack-ext",)
