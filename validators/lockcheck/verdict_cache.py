"""The pre-install verdict of a lock whose facts are all cached, kept across runs.

Without it a warm `static --lock` spends seconds of CPU loading every object's facts, building
the virtual env and resolving every import to reach the verdict of the previous run. The
verdict is a function of this tool's code (resolution_cache.code_digest, over lockcheck/ too),
the inputs (the lock's wheels, targets, stack, `only`, the interpreter), the facts cache entries
read for those wheels, the torch shim index (stable_abi.py) and the host disk's answers
(resolution_cache.Answers).

The key names each wheel's cached listing (proven and origin keys) by identity, unread; the
entry holds the identities of the cache files the scan may read each member's facts from. A run
is memoised only when every wheel came from the cache (a replay must not say "fetched"), and a
later run takes it only when the key and every recorded answer are the same. The stored key is
recomputed after the run (the run may add to the shim index).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from stackgate.lock.wheel_listing import origin_key
from stackgate.lock.wheels import LockedWheel
from validators.core.results import Result
from validators.elf.facts_cache import FactsCache
from validators.elf.file_facts_cache import file_identity
from validators.lockcheck.stable_abi import index_path
from validators.static.resolution_cache import Answers, code_digest

_HERE = Path(__file__).resolve().parent  # this reader's code is in the key too


class _LockEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    answers: Answers  # the host's, and (files) the facts cache's entries for these wheels
    results: list[Result]


def verdict_key(cache: FactsCache, wheels: list[LockedWheel], inputs_text: str) -> str | None:
    """None when a wheel's listing is not cached (the scan would fetch: nothing to reuse).
    The listings are named by identity, not read: the facts files they lead to are the
    entry's to check (`facts_files`)."""
    h = hashlib.sha256(f"lock\0{code_digest(_HERE)}\0{inputs_text}".encode())
    index = index_path(cache)
    h.update(f"\0{index}={file_identity(index)}".encode())
    for wheel in wheels:
        h.update(f"\0{wheel.filename} {wheel.sha256} {wheel.url} {wheel.size}".encode())
        listed = False
        for key in (wheel.sha256, origin_key(wheel.sha256, wheel.url)):
            path = cache.path("wheels", key)
            ident = file_identity(path)
            listed = listed or ident is not None
            h.update(f"\0{path}={ident}".encode())
        if not listed:
            return None
    return h.hexdigest()


def facts_files(cache: FactsCache, wheels: list[LockedWheel]) -> dict[str, str | None]:
    """Every cache file the scan may read a member's facts from (under its proven key and its
    origin key), with its identity now; read from the listings (a run that stores a memo)."""
    out: dict[str, str | None] = {}
    for wheel in wheels:
        listing = cache.listing(wheel.sha256, wheel.url)
        if listing is None:
            continue
        for member, record_sha in sorted({**listing.objects, **listing.cubins}.items()):
            keys = [record_sha] if record_sha else []
            keys.append(origin_key(wheel.sha256, wheel.url, member))
            for key in keys:
                path = cache.path("objects", key)
                out[str(path)] = file_identity(path)
    return out


def _entry_path(cache: FactsCache, key: str) -> Path:
    return cache.root / "memo" / key[:2] / f"{key}.json.gz"


def cached_results(cache: FactsCache, key: str) -> tuple[list[Result] | None, str | None]:
    """(the kept results if every host answer still holds, what changed if one does not)."""
    text = cache.load_text(_entry_path(cache, key))
    if text is None:
        return None, None
    try:
        entry = _LockEntry.model_validate_json(text)
    except ValidationError:
        return None, None
    changed = entry.answers.first_change()
    if changed is not None:
        return None, changed
    return [_mark(r, "hit") for r in entry.results], None


def store_results(
    cache: FactsCache,
    key: str,
    wheels: list[LockedWheel],
    answers: Answers,
    results: list[Result],
    changed: str | None,
) -> list[Result]:
    """Keep `results`; returns them marked as stored (and why a kept verdict was not reused).
    The facts cache files of the wheels' members join the host's answers."""
    stored = [_mark(r, "stored") for r in results]
    answers = answers.model_copy(update={"files": {**answers.files, **facts_files(cache, wheels)}})
    entry = _LockEntry(answers=answers, results=stored)
    try:
        cache.store_text(_entry_path(cache, key), entry.model_dump_json())
    except OSError:
        return results  # a memo that cannot be written is only slower
    return [_mark(r, "stored", changed) for r in results]


def _mark(result: Result, how: str, changed: str | None = None) -> Result:
    if result.check != "static.abi.summary":
        return result
    evidence = {**result.evidence, "resolution_memo": how}
    if changed:
        evidence["resolution_memo_changed"] = changed
    return result.model_copy(update={"evidence": evidence})
