"""Read every past form of the manifest: each schema version's migration to the current one.

A manifest says which form it is written in (`schema_version`); a change to the form that
would make an older manifest fail to load comes with a step here that reads the older form
as the stackgate of its time did, so a record made from an old manifest can still be rebuilt
(`reproduce` reads the record's exact manifest back from git history or from the record).

Versions:
- 1: `[validation.timeouts]` could hold `model_load_s` and `hang_s`. No stackgate ever read
  them (the serving profile's `load_timeout_s` / `hang_timeout_s` decide), so reading a
  version-1 manifest drops them, each with a note; nothing it did changes.
- 2: those two keys are refused, naming where the setting lives.
"""

from __future__ import annotations

from typing import Any

MANIFEST_SCHEMA_VERSION = 2
READABLE_VERSIONS = (1, 2)

# Keys that version 1 accepted and no stackgate read; version 2 names their replacement.
NEVER_READ_TIMEOUTS = {
    "model_load_s": "load_timeout_s of the serving profile ([serving.<name>])",
    "hang_s": "hang_timeout_s of the serving profile ([serving.<name>])",
}


def migrate(raw: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """(the data in the current form, a note per change). Data of an unknown version or with
    no version is returned as it is: the model then says what is wrong with it."""
    if raw.get("schema_version") != 1:
        return raw, []
    return _from_1(raw)


def _from_1(raw: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    validation = raw.get("validation")
    timeouts = validation.get("timeouts") if isinstance(validation, dict) else None
    if not isinstance(validation, dict) or not isinstance(timeouts, dict):
        return raw, []
    dropped = [key for key in NEVER_READ_TIMEOUTS if key in timeouts]
    if not dropped:
        return raw, []
    notes = [
        f"validation.timeouts.{key} = {timeouts[key]!r} (schema_version 1): never read by "
        f"stackgate, ignored; the setting is {NEVER_READ_TIMEOUTS[key]}"
        for key in dropped
    ]
    kept = {k: v for k, v in timeouts.items() if k not in dropped}
    return {**raw, "validation": {**validation, "timeouts": kept}}, notes
