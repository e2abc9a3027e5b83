"""An installed Python environment as the static checks see it: its site-packages, its
interpreter, its distributions (from *.dist-info METADATA and RECORD), and its ELF files."""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from packaging.markers import default_environment

from stackgate.installed import Distribution, read_dist_infos
from validators.elf.elf_symbols import is_elf


class NotAnEnvironment(Exception):
    """The path is not a Python environment (no interpreter, no site-packages)."""


@dataclass(frozen=True)
class SharedFile:
    """One path installed by two distributions with different contents (RECORD hashes):
    the later install overwrote the earlier one's file (pip and uv do not refuse)."""

    path: Path
    first: Distribution
    first_hash: str
    second: Distribution
    second_hash: str

    def overwritten(self) -> Distribution | None:
        """The distribution whose RECORD no longer matches the file on disk, if one does not."""
        try:
            data = self.path.read_bytes()
        except OSError:
            return None
        actual = "sha256=" + base64.urlsafe_b64encode(
            hashlib.sha256(data).digest()
        ).decode().rstrip("=")
        if actual == self.second_hash and actual != self.first_hash:
            return self.first
        if actual == self.first_hash and actual != self.second_hash:
            return self.second
        return None


@dataclass
class Environment:
    root: Path
    site_packages: Path
    interpreter: Path | None
    distributions: dict[str, Distribution]
    owners: dict[Path, Distribution] = field(default_factory=dict)
    unreadable: list[tuple[Path, str]] = field(default_factory=list)
    # ELF files two distributions' RECORDs both list, with different hashes
    clashes: list[SharedFile] = field(default_factory=list)
    # Set when the ELF files are known without walking a tree (facts from wheels).
    objects: tuple[Path, ...] | None = None
    # the env's Python, X.Y.Z (pyvenv.cfg) or X.Y.0 (the site-packages folder's name)
    python_version: str | None = None
    _markers: dict[str, str] | None = field(default=None, repr=False)
    _resolved: dict[Path, Path] = field(default_factory=dict, repr=False)
    _walked: tuple[Path, ...] | None = field(default=None, repr=False)
    _cubins: tuple[Path, ...] | None = field(default=None, repr=False)

    def owner(self, path: Path) -> Distribution | None:
        real = self._resolved.get(path)
        if real is None:
            real = self._resolved[path] = path.resolve()
        return self.owners.get(real)

    def owner_label(self, path: Path) -> str:
        dist = self.owner(path)
        if dist is not None:
            return dist.label()
        try:
            rel = path.resolve().relative_to(self.site_packages.resolve())
            return f"(no distribution owns {rel})"
        except ValueError:
            return f"(outside the env: {path})"

    def marker_env(self) -> dict[str, str]:
        """PEP 508 marker values for this env: its own Python, this host's platform (the env
        runs here), no extra. Computed once."""
        if self._markers is None:
            values = {k: str(v) for k, v in default_environment().items()}
            version = self.python_version
            if version is None:
                match = re.search(r"python(\d+)\.(\d+)", str(self.site_packages))
                version = f"{match.group(1)}.{match.group(2)}.0" if match else None
            if version is not None:
                values["python_version"] = ".".join(version.split(".")[:2])
                values["python_full_version"] = version
                if values.get("implementation_name") == "cpython":
                    # CPython's implementation_version is its version: the env's, not the
                    # interpreter this tool runs on (a 3.11 checking a 3.12 env)
                    values["implementation_version"] = version
            values["extra"] = ""
            self._markers = values
        return self._markers

    def shared_objects(self) -> list[Path]:
        """Every ELF shared object under site-packages (extensions and bundled libraries)."""
        if self.objects is not None:
            return list(self.objects)
        if self._walked is None:
            self._walk()
        assert self._walked is not None
        return list(self._walked)

    def cubin_files(self) -> list[Path]:
        """Every standalone *.cubin under site-packages (found by the same walk)."""
        if self._cubins is None:
            if self.objects is not None:
                return []
            self._walk()
        assert self._cubins is not None
        return list(self._cubins)

    def _walk(self) -> None:
        found: list[Path] = []
        cubins: list[Path] = []
        for dirpath, dirnames, filenames in os.walk(self.site_packages):
            dirnames.sort()
            for name in sorted(filenames):
                if name.endswith(".cubin"):
                    cubins.append(Path(dirpath) / name)
                    continue
                if ".so" not in name:
                    continue
                if not (name.endswith(".so") or ".so." in name):
                    continue
                path = Path(dirpath) / name
                # symlinks point at files listed anyway; FIFOs and devices would block a read
                if path.is_symlink() or not path.is_file():
                    continue
                try:
                    if not is_elf(path):
                        continue
                except OSError as exc:
                    self.unreadable.append((path, f"cannot read: {exc.strerror or exc}"))
                    continue
                found.append(path)
        self._walked = tuple(found)
        self._cubins = tuple(cubins)


def find_site_packages(env: Path) -> Path:
    candidates = sorted(env.glob("lib/python3*/site-packages"))
    if not candidates:
        raise NotAnEnvironment(f"{env}: no lib/python3*/site-packages (not a Python environment)")
    return candidates[-1]


def find_interpreter(env: Path) -> Path | None:
    for name in ("python", "python3"):
        candidate = env / "bin" / name
        if candidate.exists():
            return candidate.resolve()
    return None


def venv_python_version(env: Path) -> str | None:
    """X.Y.Z from the env's pyvenv.cfg (`version_info` as uv writes it, `version` as venv
    does), None without one."""
    try:
        text = (env / "pyvenv.cfg").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() in ("version_info", "version"):
            match = re.match(r"(\d+)\.(\d+)\.(\d+)", value.strip())
            if match:
                return match.group(0)
    return None


def load_environment(env: Path, *, with_owners: bool = True) -> Environment:
    if not env.is_dir():
        raise NotAnEnvironment(f"{env}: no such directory")
    site = find_site_packages(env)
    dists: dict[str, Distribution] = {}
    owners: dict[Path, Distribution] = {}
    hashes: dict[Path, str] = {}
    clashes: list[SharedFile] = []
    for dist in read_dist_infos(site):
        dists[dist.key] = dist
        if not with_owners:
            continue
        dist_info = dist.dist_info
        try:
            record = (dist_info / "RECORD").read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for row in csv.reader(io.StringIO(record)):
            if row and ".so" in row[0]:
                path = (site / row[0]).resolve()
                digest = row[1] if len(row) > 1 else ""
                first = owners.get(path)
                if first is not None and first is not dist and digest != hashes.get(path, ""):
                    clashes.append(SharedFile(path, first, hashes.get(path, ""), dist, digest))
                owners[path] = dist
                hashes[path] = digest
    return Environment(
        root=env,
        site_packages=site,
        interpreter=find_interpreter(env),
        distributions=dists,
        owners=owners,
        clashes=clashes,
        python_version=venv_python_version(env),
    )
