"""A uv.lock that contradicts the manifest exits 2 before anything is created (issue 10.5).

The contradicting lock is a real one: uv locks the same stack with flashinfer-python pinned to
0.6.3, and that uv.lock is put under the pyproject generated for the manifest pinning 0.6.4
(so the stale check, which reads the pyproject's manifest hash, passes)."""

from __future__ import annotations

from tests.builder.conftest import LocalStack


def test_lock_from_other_pins_is_refused_before_any_env_exists(local_stack: LocalStack) -> None:
    original = local_stack.manifest.read_text()
    other = original.replace('version = "0.6.4"', 'version = "0.6.3"').replace(
        '"flashinfer-python==0.6.4", ', '"flashinfer-python==0.6.3", '
    )
    assert other != original
    local_stack.manifest.write_text(other)
    assert local_stack.lock().returncode == 0
    lockfile = local_stack.locks / "localstack" / "uv.lock"
    forged = lockfile.read_bytes()
    local_stack.manifest.write_text(original)
    assert local_stack.lock().returncode == 0
    assert b'name = "flashinfer-python"\nversion = "0.6.4"' in lockfile.read_bytes()
    lockfile.write_bytes(forged)

    done = local_stack.build()
    assert done.returncode == 2, done.stderr
    assert "packages.flashinfer-python.version: the manifest pins 0.6.4, uv.lock has 0.6.3" in (
        done.stderr
    )
    assert "overrides.0: 'flashinfer-python==0.6.4' but uv.lock has flashinfer-python 0.6.3" in (
        done.stderr
    )
    assert not local_stack.venvs.exists() or not any(local_stack.stack_dir.glob("localstack-*"))
