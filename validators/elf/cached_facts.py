"""An ELF object's facts in the form the caches keep them: the ElfObject fields (minus its
path) and its GPU code labels, plus how the bytes were read when they came from a wheel member.

Both readers store this model: the installed-env check (`file_facts_cache.FileFactsCache`) and the
pre-install reader of a lock's wheels (`validators.lockcheck`), so it lives below both, beside
the ElfObject and GpuCode it converts to and from.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from stackgate.lock.wheel_listing import FACTS_VERSION  # the builder reads it too
from validators.elf.elf_symbols import ElfObject, Import
from validators.elf.fatbin import GpuCode
from validators.elf.object_facts import ObjectFacts

_LABEL = re.compile(r"^(sm|compute)_(\d+)([af?]?)$")


class ReadEvidence(BaseModel):
    model_config = ConfigDict(extra="forbid")

    member: str
    member_size: int
    compressed_size: int
    compressed_read: int
    whole: bool
    sha256_checked: bool
    record_mismatch: str | None = None  # sha256 of the member, where RECORD says otherwise
    prefix_bytes: int
    tail_from: int | None = None
    gpu_code: str = "none"  # none / complete / partial (sections only partly read) / from-name
    dynamic: str = "read"  # read / inferred (DT_NEEDED etc. from .dynstr) / none
    sections: str = "read"  # read / from PT_DYNAMIC (section table rebuilt as ld.so sees it)


class CachedFacts(BaseModel):
    """The ElfObject fields (minus its path) plus GPU code, as stored in the cache."""

    model_config = ConfigDict(extra="forbid")

    facts_version: int = FACTS_VERSION
    is_elf: bool = True
    machine: str = ""
    elf_class: int = 64
    elf_type: str = ""
    soname: str | None = None
    needed: list[str] = []
    rpath: list[str] = []
    runpath: list[str] = []
    imports: list[tuple[str, str | None, str | None, bool]] = []
    exports: dict[str, int] = {}
    multi: dict[str, list[int]] = {}
    version_names: dict[int, str] = {}
    version_defs: list[str] = []
    version_needs: dict[str, list[str]] = {}
    gpu_codes: list[str] = []
    read: ReadEvidence | None = None

    @classmethod
    def from_object(
        cls, obj: ElfObject, codes: Iterable[GpuCode] = (), read: ReadEvidence | None = None
    ) -> CachedFacts:
        return cls(
            machine=obj.machine,
            elf_class=obj.elf_class,
            elf_type=obj.elf_type,
            soname=obj.soname,
            needed=list(obj.needed),
            rpath=list(obj.rpath),
            runpath=list(obj.runpath),
            imports=[(i.name, i.version, i.version_file, i.weak) for i in obj.imports],
            exports=obj.exports,
            multi={k: list(v) for k, v in obj.multi.items()},
            version_names=obj.version_names,
            version_defs=sorted(obj.version_defs),
            version_needs={k: sorted(v) for k, v in obj.version_needs.items()},
            gpu_codes=[c.label() for c in codes],
            read=read,
        )

    def elf_object(self, path: Path) -> ElfObject:
        return ElfObject(
            path=path,
            machine=self.machine,
            elf_class=self.elf_class,
            elf_type=self.elf_type,
            soname=self.soname,
            needed=tuple(self.needed),
            rpath=tuple(self.rpath),
            runpath=tuple(self.runpath),
            imports=tuple(Import(n, v, f, w) for n, v, f, w in self.imports),
            exports=self.exports,
            version_defs=frozenset(self.version_defs),
            multi={k: tuple(v) for k, v in self.multi.items()},
            version_names=self.version_names,
            version_needs={k: frozenset(v) for k, v in self.version_needs.items()},
        )

    def object_facts(self, path: Path) -> ObjectFacts:
        """The static group's facts of this object, installed at `path`."""
        return ObjectFacts(self.elf_object(path), tuple(self.codes()))

    def codes(self) -> list[GpuCode]:
        out: list[GpuCode] = []
        for label in self.gpu_codes:
            m = _LABEL.match(label)
            if m:
                kind = "sass" if m.group(1) == "sm" else "ptx"
                out.append(GpuCode(kind, int(m.group(2)), m.group(3)))  # type: ignore[arg-type]
        return out
