"""stackgate.lock.torch_abi, the seam `builder lock` and `validators compat --lock` share: which locks
have a torch to judge beside (the committed locks), and a lock's verdict found by its bytes.
(Found by its binary wheels: tests/builder/test_torch_abi_gate.py, on listings of real wheels.)"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from stackgate.lock.torch_abi import LockVerdict, cached_lock, lock_record_path, lookup_lock

ROOT = Path(__file__).resolve().parents[2]
LOCKS = ROOT / "stacks" / "locks"


def test_only_a_lock_with_an_http_torch_wheel_is_asked_of_the_validators(tmp_path: Path) -> None:
    assert lookup_lock(LOCKS / "cu128" / "uv.lock", tmp_path) is None  # torch 2.9.1 from PyPI
    for stack in ("h200-sglang", "h200-transformers"):  # the image's torch: nothing to judge
        lock = LOCKS / stack / "uv.lock"
        hit = lookup_lock(lock, tmp_path)
        assert hit is not None and hit.torch is None and hit.pairs == [] and hit.from_cache
        assert hit.lock_sha256 == hashlib.sha256(lock.read_bytes()).hexdigest()
    bad = tmp_path / "bad" / "uv.lock"
    bad.parent.mkdir()
    bad.write_text("version = [\n", encoding="utf-8")
    hit = lookup_lock(bad, tmp_path)  # unreadable: what the validators answer, nothing judged
    assert hit is not None and hit.pairs == [] and hit.torch is None
    assert hit.note.startswith("not checked: ") and "not valid TOML" in hit.note


def test_a_cached_verdict_answers_those_bytes_only(tmp_path: Path) -> None:
    lock = tmp_path / "uv.lock"
    shutil.copyfile(LOCKS / "cu128" / "uv.lock", lock)
    assert cached_lock(lock, tmp_path) is None
    sha = hashlib.sha256(lock.read_bytes()).hexdigest()
    verdict = LockVerdict(
        lock_sha256=sha, torch="2.9.1", pairs=[], alternatives={}, seconds=1.0, bytes_fetched=0
    )
    path = lock_record_path(tmp_path, sha)
    path.parent.mkdir(parents=True)
    path.write_text(verdict.model_dump_json(), encoding="utf-8")
    assert cached_lock(lock, tmp_path) == verdict
    assert lookup_lock(lock, tmp_path) == verdict.model_copy(update={"from_cache": True})
    lock.write_text(lock.read_text() + "\n", encoding="utf-8")  # other bytes: no verdict
    assert cached_lock(lock, tmp_path) is None
    path.write_text("{not json", encoding="utf-8")
    lock.write_bytes((LOCKS / "cu128" / "uv.lock").read_bytes())
    assert cached_lock(lock, tmp_path) is None  # a damaged record is a miss
