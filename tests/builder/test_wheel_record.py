"""The builder never trusts uv's cache (issue 24 item 3): installed files are copies, never
hardlinks into the cache, and every file is checked against the sha256 its wheel's RECORD
lists, so a damaged cache refuses the build (exit 3) instead of being hashed as the truth.

Real uv, real wheels from local indexes, a private uv cache per test (UV_CACHE_DIR), damaged
the way an in-place edit of a hardlinked env file used to damage it."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.builder.conftest import LocalStack


def test_env_files_are_copies_and_a_damaged_cache_refuses_the_build(local_stack: LocalStack) -> None:
    cache = local_stack.root / "uv-cache"
    env = {"UV_CACHE_DIR": str(cache)}
    assert local_stack.lock(env=env).returncode == 0
    done = local_stack.build("--json", env=env)
    assert done.returncode == 0, done.stderr
    built = Path(json.loads(done.stdout)["env"])
    site = next(built.glob("lib/python*/site-packages"))
    listed = [
        site / line.split(",")[0]
        for record in sorted(site.glob("*.dist-info/RECORD"))
        for line in record.read_text().splitlines()
        if line.split(",")[0].endswith(".py") and ",sha256=" in line
    ]
    assert listed and all(p.stat().st_nlink == 1 for p in listed)  # copies, not links

    # Damage the cache: the unpacked copy of an installed module (same name, same content).
    target = listed[0]
    rel = target.relative_to(site)
    cached = [p for p in cache.rglob(rel.name) if p.is_file() and p.read_bytes() == target.read_bytes()]
    assert cached, f"{rel} not found in {cache}"
    for path in cached:
        os.chmod(path, 0o644)
        path.write_bytes(path.read_bytes() + b"\nDAMAGED = True\n")
    again = local_stack.cli(*local_stack.build_args("--json", venvs=local_stack.root / "envs2"), env=env)
    assert again.returncode == 3, again.stderr
    assert "RECORD" in again.stderr and str(rel) in again.stderr, again.stderr
    assert not any((local_stack.root / "envs2").rglob("build-record.json"))  # nothing half-built
