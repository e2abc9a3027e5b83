"""Paths several distributions install get the copy one rule chooses, not the one uv's
parallel writes happened to leave.

uv installs wheels in parallel: when two wheels ship the same path with different bytes
(flashinfer-python 0.6.3 and torch-c-dlpack-ext 0.1.5 both ship a top-level `build_backend.py`),
whichever write ends last stays, and two builds of one lock would hash differently. So each
such path is given the copy of the owner `stackgate.envtree.wheel_records.chosen_owner` names,
from uv's unpacked copy of that wheel in its cache (`archive-v*/<id>/`), taken only when its
sha256 is the one the owner's RECORD lists; the executable bit follows that copy too (the tree
hash tells them apart). A generated console or GUI script (in no wheel) is rebuilt from the one uv left
for the other owner (builder/venv/entry_scripts.py), under the same sha256 condition.

A copy that cannot be found (uv's cache pruned under the build, a `.data` script whose
`#!python` uv rewrote) leaves the path as uv wrote it: the record's clash then names a `chosen`
owner that `holds` lacks, and the build says this env's tree hash may differ from another's.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from builder.venv.entry_scripts import entry_point, script_for
from stackgate.envtree.wheel_records import (
    Claim,
    Claims,
    chosen_owner,
    read_claims,
    record_digest,
    site_packages,
)


@dataclass(frozen=True)
class Settled:
    path: str  # relative to the env
    chosen: str  # the owner's dist-info folder
    rewritten: bool  # its bytes or mode were put in place (False: uv had left them)
    found: bool  # the env holds the chosen copy now (False: no verified copy was found)


def _digest(path: str) -> str:
    with open(path, "rb") as handle:  # noqa: PTH123 -- str paths, as the tree walk
        return record_digest(hashlib.file_digest(handle, "sha256").digest())


def _candidates(cache: Path, claim: Claim) -> list[Path]:
    """uv's unpacked copies that may hold the claimed file: `<archive>/<row path>` for a file
    under site-packages; for a `.data` file (`../../../include/...`, `../../../bin/x`) every
    file of that name under the archive's `*.data/<scheme>/` folders (the sha256 decides)."""
    out: list[Path] = []
    for dist_info in sorted(cache.glob(f"archive-v*/*/{claim.dist}")):
        archive = dist_info.parent
        if not claim.row_path.startswith(("..", "/")):
            out.append(archive / claim.row_path)
            continue
        name = claim.row_path.rsplit("/", 1)[-1]
        out += sorted(p for p in archive.glob(f"*.data/*/**/{name}") if p.is_file())
    return out


def _verified_copy(cache: Path | None, claim: Claim) -> Path | None:
    """An unpacked copy whose sha256 is the one the claim's RECORD lists."""
    if cache is None:
        return None
    for candidate in _candidates(cache, claim):
        try:
            if candidate.is_file() and _digest(str(candidate)) == claim.digest:
                return candidate
        except OSError:
            continue
    return None


def _put(source: Path, target: str) -> None:
    """The source's bytes and permission bits at target, replaced in one rename."""
    mode = stat.S_IMODE(source.stat().st_mode)
    with source.open("rb") as src:
        _replace_with(lambda out: shutil.copyfileobj(src, out, 1 << 20), mode, target)


def _put_data(data: bytes, mode: int, target: str) -> None:
    """`data` at target with `mode`, replaced in one rename."""
    _replace_with(lambda out: out.write(data), mode, target)


def _replace_with(write: Callable[[BinaryIO], object], mode: int, target: str) -> None:
    tmp = f"{target}.stackgate-settle"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            write(out)
        os.chmod(tmp, mode)  # noqa: PTH101 -- str paths
        os.replace(tmp, target)  # noqa: PTH105 -- str paths
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _entry_script(env: Path, target: str, rel: str, chosen: Claim) -> bytes | None:
    """The chosen owner's console/GUI script, made from the one uv left (entry_scripts), when
    its sha256 is the one the owner's RECORD lists."""
    for site in site_packages(env):
        spec = entry_point(site / chosen.dist, rel.removeprefix("bin/"))
        if spec is None:
            continue
        with open(target, "rb") as handle:  # noqa: PTH123 -- str paths
            script = script_for(handle.read(1 << 20), spec)
        if script is not None and record_digest(hashlib.sha256(script).digest()) == chosen.digest:
            return script
    return None


def settle_clashes(env: Path, uv_cache: Path | None, claims: Claims | None = None) -> list[Settled]:
    """Give every path several distributions install the copy of its chosen owner; one entry
    per clashed path that some owner lists with a hash, in path order. claims: the env's
    RECORD rows when already read."""
    claims = claims if claims is not None else read_claims(env)
    root = os.path.realpath(env)
    out: list[Settled] = []
    for rel in claims.clash_paths():
        owned = claims.by_path[rel]
        chosen = chosen_owner(owned)
        if chosen is None:
            continue
        target = f"{env}/{rel}"
        real = os.path.realpath(target)
        try:
            st = os.lstat(target)
        except OSError:
            st = None
        if st is None or not stat.S_ISREG(st.st_mode) or not real.startswith(root + os.sep):
            # missing, a link or leading out: the RECORD check refuses or reports it as it is
            out.append(Settled(rel, chosen.dist, rewritten=False, found=False))
            continue
        current = _digest(target)
        if current not in {c.digest for c in owned if c.digest}:
            # no owner's bytes: damage, left as it is for the RECORD check to refuse
            out.append(Settled(rel, chosen.dist, rewritten=False, found=False))
            continue
        holds = current == chosen.digest
        copy = _verified_copy(uv_cache, chosen)
        if copy is None and not holds and rel.startswith("bin/"):
            script = _entry_script(env, target, rel, chosen)
            if script is not None:
                _put_data(script, stat.S_IMODE(st.st_mode), target)
                out.append(Settled(rel, chosen.dist, rewritten=True, found=True))
                continue
        if copy is None:
            # bytes that every owner shares, or already the chosen ones: only the mode is unknown
            out.append(Settled(rel, chosen.dist, rewritten=False, found=holds))
            continue
        wanted_x = bool(copy.stat().st_mode & 0o111)
        if holds and bool(st.st_mode & 0o111) == wanted_x:
            out.append(Settled(rel, chosen.dist, rewritten=False, found=True))
            continue
        if holds:  # the chosen bytes with another owner's mode
            os.chmod(target, stat.S_IMODE(copy.stat().st_mode))  # noqa: PTH101 -- str paths
        else:
            _put(copy, target)
        out.append(Settled(rel, chosen.dist, rewritten=True, found=True))
    return out
