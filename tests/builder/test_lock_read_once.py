"""The lock checked against the manifest, the lock hashed into the build record and the lock
uv installs must be one lock. The builder read uv.lock three times (parse, hash, and uv's own
read at `uv sync`); a lock rewritten in between (a concurrent `uv lock`) gave an env recorded
under one lock hash and installed from another. Parse and hash now share one read, and the
build fails (exit 3, nothing selected) when uv.lock changed while uv installed it.

The rewrite happens inside a real `uv sync`: STACKGATE_UV points at a wrapper that touches
uv.lock (a comment line: same packages, other bytes) and then runs the real uv."""

from __future__ import annotations

from pathlib import Path

from tests.builder.conftest import LocalStack, uv_wrapper


def test_a_lock_rewritten_during_the_install_fails_the_build(
    local_stack: LocalStack, tmp_path: Path
) -> None:
    assert local_stack.lock().returncode == 0
    wrapper = uv_wrapper(
        tmp_path / "uv-touching-the-lock",
        'printf "\\n# rewritten during the install\\n" >> uv.lock',
    )
    done = local_stack.build(env={"STACKGATE_UV": str(wrapper)})
    assert done.returncode == 3, done.stderr
    assert "uv.lock changed while it was being installed" in done.stderr
    assert not (local_stack.stack_dir / "current").exists()
