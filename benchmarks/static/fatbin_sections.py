"""Where GPU libraries keep their fatbins: per ELF file, the sections holding the fatbin
magic (0xBA55ED50, 8-byte aligned) and how many, to find libraries that keep kernels outside
`.nv_fatbin` (issue 25 item 2 and its variants). A survey, not the static reader: the reader
(validators/elf/fatbin.py) searches every allocated non-executable PROGBITS section.

    python benchmarks/static/fatbin_sections.py ENV/lib/python3.12/site-packages/nvidia/*/lib/*.so*
"""

from __future__ import annotations

import mmap
import sys
from pathlib import Path

from elftools.elf.elffile import ELFFile

MAGIC = (0xBA55ED50).to_bytes(4, "little")
OWN = (".nv_fatbin", "__nv_relfatbin")


def sections_with_fatbins(path: Path) -> dict[str, tuple[int, int]]:
    """{section: (fatbin headers found, section bytes)}."""
    out: dict[str, tuple[int, int]] = {}
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        for sec in ELFFile(f).iter_sections():
            if sec["sh_type"] == "SHT_NOBITS" or sec["sh_size"] == 0:
                continue
            start, end = sec["sh_offset"], sec["sh_offset"] + sec["sh_size"]
            n, i = 0, m.find(MAGIC, start, end)
            while i >= 0:
                n += i % 8 == 0
                i = m.find(MAGIC, i + 4, end)
            if n:
                out[sec.name] = (n, sec["sh_size"])
    return out


def main() -> int:
    for arg in sys.argv[1:]:
        path = Path(arg)
        if path.is_symlink() or not path.is_file():
            continue
        found = sections_with_fatbins(path)
        outside = {k: v for k, v in found.items() if k not in OWN}
        if outside:
            parts = ", ".join(f"{k}: {n} in {size:,} B" for k, (n, size) in found.items())
            print(f"{path.parent.parent.name}/{path.name}: {parts}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
