"""stackgate.compat, the seam `builder lock` and `validators compat --lock` share: which locks
have a torch to judge beside (the committed locks), and a lock's verdict found by its bytes."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from stackgate.compat import LockCompat, cached_lock, lock_has_torch, lock_record_path

ROOT = Path(__file__).resolve().parents[2]
LOCKS = ROOT / "stacks" / "locks"


def test_only_a_lock_with_an_http_torch_wheel_is_asked_of_the_validators() -> None:
    assert lock_has_torch(LOCKS / "cu128" / "uv.lock")  # torch 2.9.1 from PyPI
    assert not lock_has_torch(LOCKS / "h200-sglang" / "uv.lock")  # the image's torch
    assert not lock_has_torch(LOCKS / "h200-transformers" / "uv.lock")


def test_a_cached_verdict_answers_those_bytes_only(tmp_path: Path) -> None:
    lock = tmp_path / "uv.lock"
    shutil.copyfile(LOCKS / "cu128" / "uv.lock", lock)
    assert cached_lock(lock, tmp_path) is None
    sha = hashlib.sha256(lock.read_bytes()).hexdigest()
    verdict = LockCompat(
        lock_sha256=sha, torch="2.9.1", pairs=[], alternatives={}, seconds=1.0, bytes_fetched=0
    )
    path = lock_record_path(tmp_path, sha)
    path.parent.mkdir(parents=True)
    path.write_text(verdict.model_dump_json(), encoding="utf-8")
    assert cached_lock(lock, tmp_path) == verdict
    lock.write_text(lock.read_text() + "\n", encoding="utf-8")  # other bytes: no verdict
    assert cached_lock(lock, tmp_path) is None
    path.write_text("{not json", encoding="utf-8")
    lock.write_bytes((LOCKS / "cu128" / "uv.lock").read_bytes())
    assert cached_lock(lock, tmp_path) is None  # a damaged record is a miss
