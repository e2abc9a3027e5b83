"""What a record was made from, laid out on this host for `reproduce`: its exact manifest,
lock and reference outputs as a stacks folder, and the base site this host supplies for it.

A record pins its manifest and lock by sha256; they are taken from the working tree, else
from git history, else (the manifest) from the record's own copy of its tables. Host inputs
(a base site) are never taken from the record's paths: the user names this host's, and it is
checked against what the record says the machine's held.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from stackgate import proc
from stackgate.base_site_identity import compare_site, site_identity
from stackgate.build_record import BaseSite
from stackgate.errors import BadInput, StackgateError
from stackgate.paths import project_root, stacks_dir
from stackgate.toml_write import toml_key, toml_value
from validators.records.model import Record


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _git_versions(relpath: str) -> Iterator[tuple[str, bytes]]:
    """(commit, content) of every committed version of a file, newest first; none without git."""
    root = project_root()
    try:
        log = proc.run(["git", "-C", root, "log", "--format=%H", "--", relpath], timeout=60)
    except StackgateError:
        return
    for commit in log.stdout.split():
        try:
            shown = proc.run(["git", "-C", root, "show", f"{commit}:{relpath}"], timeout=60)
        except StackgateError:
            continue
        yield commit, shown.stdout.encode("utf-8")


def _git_show(commit: str, path: Path) -> bytes | None:
    try:
        rel = path.resolve().relative_to(project_root()).as_posix()
        shown = proc.run(["git", "-C", project_root(), "show", f"{commit}:{rel}"], timeout=60)
    except (ValueError, StackgateError):
        return None
    return shown.stdout.encode("utf-8")


def _find_version(path: Path, wanted: str | None) -> tuple[bytes | None, str]:
    """Bytes of `path` whose sha256 is `wanted`: the working tree's, else from git history."""
    if path.is_file() and (wanted is None or _sha256(path.read_bytes()) == wanted):
        return path.read_bytes(), "working tree"
    if wanted is None:
        return None, "missing"
    try:
        rel = path.resolve().relative_to(project_root()).as_posix()
    except ValueError:
        return None, "not in this checkout"
    for commit, data in _git_versions(rel):
        if _sha256(data) == wanted:
            return data, f"git {commit[:12]}"
    return None, "not found in the working tree or git history"


_HISTORY_HINT = (
    "check out the commit that has it, or fetch full history (`git fetch --unshallow`) so it "
    "can be found there"
)


@dataclass(frozen=True)
class Sources:
    """The record's manifest, lock and reference outputs, laid out as a stacks folder."""

    stacks: Path
    locks: Path
    notes: list[str]
    manifest_from: str = "working tree"

    def shown(self, text: str, record: Record) -> str:
        """`text` with this folder's path replaced by what it holds, in the record's terms."""
        where = f"the record's stacks/ ({self.manifest_from})"
        return text.replace(
            f"{self.stacks}/{record.stack}.toml",
            f"stacks/{record.stack}.toml ({self.manifest_from})",
        ).replace(str(self.stacks), where)


def _manifest_from_record(record: Record) -> bytes | None:
    """The record's own copy of its manifest's tables, as TOML: for a checkout without the
    history that holds the file (a `git archive` export). Not the file's bytes (comments are
    gone), so the lock-inputs hash, not the file hash, says it is the same manifest."""
    if not record.manifest:
        return None
    text = "".join(f"{toml_key(k)} = {toml_value(v)}\n" for k, v in record.manifest.items())
    return text.encode("utf-8")


def materialize_sources(record: Record, workdir: Path) -> Sources:
    """A stacks folder under `workdir` holding exactly what the record was made from.

    The manifest and lock are the files whose sha256 the record pins (the working tree's,
    else git history's; the manifest, else, from the record's own copy of its tables); the
    rest of stacks/ (patches, rules; the loader checks patch sha256s against the manifest) is
    copied from the working tree, and every correctness reference the record holds is written
    from the record, so a reference edited or removed since cannot change the verdict.
    """
    stacks = stacks_dir()
    manifest_path = stacks / f"{record.stack}.toml"
    lock_dir = stacks / "locks" / record.stack
    manifest, m_from = _find_version(manifest_path, record.manifest_sha256)
    notes: list[str] = []
    if manifest is None:
        manifest = _manifest_from_record(record)
        if manifest is None:
            raise StackgateError(
                f"record {record.label}: the manifest the record was made from "
                f"(stacks/{record.stack}.toml, sha256 {str(record.manifest_sha256)[:12]}) is "
                f"{m_from}, and the record holds no copy of it",
                error_id="record-source-missing",
                hint=_HISTORY_HINT,
            )
        m_from = "the record's copy of its tables"
    lock, l_from = _find_version(lock_dir / "uv.lock", record.build.lock_sha256)
    if lock is None:
        raise StackgateError(
            f"record {record.label}: the lock the record was built from (stacks/locks/{record.stack}/"
            f"uv.lock, sha256 {str(record.build.lock_sha256)[:12]}) is {l_from}",
            error_id="record-source-missing",
            hint=_HISTORY_HINT,
        )
    if m_from != "working tree" or l_from != "working tree":
        notes = [f"manifest from {m_from}", f"lock from {l_from}"]
    out_stacks = workdir / "stacks"
    _copy_tree(stacks, out_stacks, skip=("locks",))
    out_locks = out_stacks / "locks" / record.stack
    out_locks.mkdir(parents=True, exist_ok=True)
    (out_stacks / f"{record.stack}.toml").write_bytes(manifest)
    (out_locks / "uv.lock").write_bytes(lock)
    # The generated pyproject beside the lock carries the manifest hash the builder checks
    # for staleness: take it from the same commit as the lock.
    pyproject_path = lock_dir / "pyproject.toml"
    pyproject = pyproject_path.read_bytes() if pyproject_path.is_file() else None
    if l_from.startswith("git "):
        pyproject = _git_show(l_from.split()[1], pyproject_path)
    if pyproject is not None:
        (out_locks / "pyproject.toml").write_bytes(pyproject)
    notes += _write_references(record, out_stacks)
    return Sources(out_stacks, out_stacks / "locks", notes, m_from)


def _write_references(record: Record, stacks: Path) -> list[str]:
    """Each serving profile's correctness reference, from the record's golden outputs."""
    serving = record.manifest.get("serving")
    notes: list[str] = []
    if not isinstance(serving, dict):
        return notes
    for name, profile in serving.items():
        ref = profile.get("correctness_reference") if isinstance(profile, dict) else None
        golden = record.golden_outputs.get(f"serving.{name}")
        if not isinstance(ref, str) or not isinstance(golden, dict):
            continue
        target = (stacks / ref).resolve()
        if not target.is_relative_to(stacks.resolve()):
            continue  # the loader refuses such a path and says why
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(golden, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        notes.append(f"correctness reference of serving.{name}: the record's own")
    return notes


def _copy_tree(src: Path, dst: Path, skip: tuple[str, ...] = ()) -> None:
    for item in src.rglob("*"):
        rel = item.relative_to(src)
        if rel.parts[0] in skip or item.is_symlink():
            continue
        target = dst / rel
        if item.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        elif item.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(item.read_bytes())


def base_site_of(record: Record) -> BaseSite | None:
    """The base site the recorded env was layered over (build record `base_site`), if any."""
    base = record.build.raw.get("base_site")
    if not isinstance(base, dict):
        return None
    try:
        return BaseSite.model_validate(base)
    except ValidationError:
        return None


def check_base_site(record: Record, given: Path | None) -> list[str]:
    """Notes on the base site this host supplies; BadInput when the record needs one and none
    or another one is given. The recorded path is where that machine kept it, never used."""
    recorded = base_site_of(record)
    if recorded is None:
        if given is not None:
            raise BadInput(
                f"--base-site {given}: record {record.label} was not built over a base site"
            )
        return []
    torch = recorded.packages.get("torch")
    what = f"{len(recorded.packages)} distributions" + (f", torch {torch}" if torch else "")
    if given is None:
        raise BadInput(
            f"record {record.label} was built over a base site ({what}; at {recorded.path} "
            "on the machine that made it, a path of that host, not used here): give this "
            "host's with --base-site PATH",
        )
    if not given.is_dir():
        raise BadInput(f"--base-site {given}: no such folder")
    versions, records = site_identity(given.resolve())
    diff = compare_site(recorded.packages, recorded.records_sha256, versions, records)
    if not diff.same:
        raise BadInput(
            f"--base-site {given}: not the base site record {record.label} was built over ({what})",
            details=diff.lines(),
        )
    how = (
        "versions and RECORD sha256"
        if diff.compared_files
        else ("versions only: the record predates file hashes of its base site")
    )
    return [f"base site {given}: the record's {what} ({how})"]
