"""Installed files against the sha256 their wheel's RECORD lists (issue 24 item 3).

uv installs a wheel from its cache, where the wheel was unpacked once; it does not hash the
files again. A file edited in the cache (by hand, by a disk fault, or through a hardlinked env
before the builder used `--link-mode copy`) is installed as it is, and the build record would
hash the damaged tree as the truth. The wheel itself is pinned by the lock's sha256, and its
RECORD names the sha256 of every file it holds; uv keeps those hashes in the installed
`*.dist-info/RECORD` (and writes the hashes of the files it generates, console scripts, there
too). So every file a RECORD lists with a sha256 must hash to it, or the install is refused.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
from pathlib import Path

from stackgate.files import read_text_bounded

_MAX_RECORD_BYTES = 64 << 20
_CHUNK = 1 << 20


def _digest(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            sha.update(chunk)
    return base64.urlsafe_b64encode(sha.digest()).rstrip(b"=").decode("ascii")


def site_packages(env: Path) -> list[Path]:
    return sorted(p for p in env.glob("lib/python*/site-packages") if p.is_dir())


def record_mismatches(env: Path, limit: int = 20) -> tuple[int, list[str]]:
    """(files checked, up to `limit` problems) over every dist-info RECORD of the env."""
    checked = 0
    problems: list[str] = []
    for site in site_packages(env):
        root = site.resolve()
        for record in sorted(site.glob("*.dist-info/RECORD")):
            text = read_text_bounded(record, _MAX_RECORD_BYTES)
            for row in csv.reader(io.StringIO(text)):
                if len(row) < 2 or not row[1].startswith("sha256="):
                    continue
                target = site / row[0]
                where = f"{row[0]} ({record.parent.name})"
                try:
                    if not target.resolve().is_relative_to(root.parent.parent.parent):
                        problems.append(f"{where}: RECORD names a path outside the env")
                        continue
                    actual = _digest(target)
                except OSError as exc:
                    problems.append(f"{where}: {exc.strerror or exc}")
                    continue
                checked += 1
                if actual != row[1].removeprefix("sha256="):
                    problems.append(f"{where}: content differs from the wheel's RECORD")
                if len(problems) >= limit:
                    return checked, problems
    return checked, problems
