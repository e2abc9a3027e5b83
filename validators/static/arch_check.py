"""GPU-arch coverage of an environment's kernel libraries against the stack's target archs."""

from __future__ import annotations

import struct
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from stackgate.manifest.values import arch_cc
from validators.elf.elf_symbols import ElfReadError
from validators.elf.fatbin import GpuCode, cubin_code, gpu_code
from validators.elf.file_facts_cache import FileFactsCache
from validators.static.environment import Environment

EM_CUDA = 190


@dataclass
class DistCode:
    """GPU code found in one distribution: per shared object, plus standalone cubins counted."""

    libraries: dict[Path, list[GpuCode]] = field(default_factory=dict)
    cubins: Counter[GpuCode] = field(default_factory=Counter)
    unreadable: list[tuple[Path, str]] = field(default_factory=list)
    # per library: fatbin-like data the reader cannot read (kernels in an unknown form)
    unknown: dict[Path, tuple[str, ...]] = field(default_factory=dict)

    def all_codes(self) -> set[GpuCode]:
        out = set(self.cubins)
        for codes in self.libraries.values():
            out.update(codes)
        return out


def _fast_cubin(path: Path) -> GpuCode | None:
    """A cubin's target from its ELF header and file name; the note only when the name lacks it."""
    with path.open("rb") as f:
        head = f.read(64)
    if len(head) < 52 or head[:4] != b"\x7fELF":
        raise ElfReadError(path, "not an ELF file (truncated?)")
    is64 = head[4] == 2
    (machine,) = struct.unpack_from("<H", head, 18)
    if machine != EM_CUDA:
        return None
    (flags,) = struct.unpack_from("<I", head, 48 if is64 else 36)
    sm = (flags >> 8) & 0xFF if head[8] >= 8 else flags & 0xFF
    lower = path.name.lower()
    for suffix in ("a", "f"):
        if f"sm{sm}{suffix}" in lower or f"sm_{sm}{suffix}" in lower:
            return GpuCode("sass", sm, suffix)
    return cubin_code(path)


def scan(
    env: Environment, shared_objects: list[Path], cache: FileFactsCache | None = None
) -> dict[str, DistCode]:
    """GPU code per distribution label (files no RECORD owns are grouped by their folder)."""
    out: dict[str, DistCode] = {}
    for path in shared_objects:
        label = env.owner_label(path)
        try:
            found = cache.gpu(path) if cache is not None else gpu_code(path)
        except ElfReadError as exc:
            out.setdefault(label, DistCode()).unreadable.append((path, exc.reason))
            continue
        if found.codes or found.unknown:
            out.setdefault(label, DistCode()).libraries[path] = list(found.codes)
        if found.unknown:
            out[label].unknown[path] = found.unknown
    labels: dict[Path, str] = {}
    for path in env.cubin_files():
        owner = labels.get(path.parent)
        if owner is None:  # one owner per folder (8,934 cubins in flashinfer-cubin 0.6.4)
            owner = labels[path.parent] = _cubin_owner(env, path)
        label = owner
        try:
            code = _fast_cubin(path)
        except (ElfReadError, OSError) as exc:
            reason = exc.reason if isinstance(exc, ElfReadError) else str(exc)
            out.setdefault(label, DistCode()).unreadable.append((path, reason))
            continue
        if code is not None:
            out.setdefault(label, DistCode()).cubins[code] += 1
    return out


def _cubin_owner(env: Environment, path: Path) -> str:
    """RECORD maps only .so files (to stay fast); cubins are owned by their top-level package."""
    try:
        top = path.resolve().relative_to(env.site_packages.resolve()).parts[0]
    except ValueError:
        return str(path.parent)
    for dist in env.distributions.values():
        if dist.key.replace("-", "_") == top.lower():
            return dist.label()
    return f"({top})"


@dataclass(frozen=True)
class Coverage:
    target: str
    covered_by: list[str]  # files (or cubin counts) that can run on the target
    uncovered_files: list[str]  # libraries with GPU code but nothing for the target
    # uncovered libraries that also hold GPU code this reader cannot read: "why" per library
    undecided: list[str] = field(default_factory=list)


def coverage(code: DistCode, target: str, site: Path) -> Coverage:
    major, minor, _ = arch_cc(target)
    covered: list[str] = []
    uncovered: list[str] = []
    undecided: list[str] = []
    for path, codes in sorted(code.libraries.items()):
        rel = _rel(path, site)
        usable = [c for c in codes if c.runs_on(major, minor)]
        if usable:
            covered.append(f"{rel}: {', '.join(c.label() for c in usable)}")
            continue
        readable = ", ".join(c.label() for c in codes) or "nothing readable"
        uncovered.append(f"{rel}: only {readable}")
        why = code.unknown.get(path)
        if why:
            more = f" (+{len(why) - 1} more)" if len(why) > 1 else ""
            undecided.append(f"{rel}: {why[0]}{more}")
    usable_cubins = sum(n for c, n in code.cubins.items() if c.runs_on(major, minor))
    if usable_cubins:
        covered.append(f"{usable_cubins} standalone cubins")
    return Coverage(target, covered, uncovered, undecided)


def _rel(path: Path, site: Path) -> str:
    try:
        return str(path.resolve().relative_to(site.resolve()))
    except ValueError:
        return str(path)
