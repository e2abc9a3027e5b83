"""Does validators/lockcheck/zip_directory.py earn its place? Read the central directory of
real wheels over HTTP ranges twice in one run: with our reader (RemoteWheel.read_directory:
the last 64 KiB, then the directory's start if it begins earlier) and with stdlib zipfile over
the same ranged reader (an unbuffered file object: each read() is one range request, as
zipfile issues them). Counts requests and bytes, and checks both list the same members at the
same offsets. Served from a real HTTP server on 127.0.0.1 (tests/helpers/range_server.py).

    .venv/bin/python benchmarks/zip_directory/run.py [WHEEL ...]

Without arguments: the wheels larger than 1 MB under ~/.cache/stackgate/upstream (the tests'
pinned upstream wheels), then /opt/pypi-more/files (this machine's local PyPI mirror), up to 12.
"""

from __future__ import annotations

import io
import json
import shutil
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.helpers.range_server import serve  # noqa: E402
from validators.lockcheck.http_ranges import RemoteFile  # noqa: E402
from validators.lockcheck.wheel_reader import RemoteWheel  # noqa: E402

SOURCES = (Path.home() / ".cache" / "stackgate" / "upstream", Path("/opt/pypi-more/files"))


class RangedIO(io.RawIOBase):
    """A seekable, unbuffered file over RemoteFile: each read() is one range request."""

    def __init__(self, remote: RemoteFile) -> None:
        self.remote, self.pos = remote, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.pos

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self.pos, 2: self.remote.size}[whence]
        self.pos = base + offset
        return self.pos

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        data = self.remote.read(self.pos, self.pos + len(buffer))
        buffer[: len(data)] = data
        self.pos += len(data)
        return len(data)


def _remote(client: httpx.Client, url: str, size: int, spool: Path) -> RemoteFile:
    return RemoteFile(client, url, size, spool)


def measure(wheel: Path, base: str, client: httpx.Client, spool: Path) -> dict[str, object]:
    size = wheel.stat().st_size
    url = base + wheel.name
    ours_file = _remote(client, url, size, spool)
    t = time.perf_counter()
    ours = RemoteWheel(ours_file, "")
    ours.read_directory()
    ours_s = time.perf_counter() - t
    stdlib_file = _remote(client, url, size, spool)
    t = time.perf_counter()
    with zipfile.ZipFile(RangedIO(stdlib_file)) as z:
        infos = z.infolist()
    stdlib_s = time.perf_counter() - t
    same = {m.name: (m.local_offset, m.compressed_size, m.size) for m in ours.members.values()} == {
        i.filename: (i.header_offset, i.compress_size, i.file_size) for i in infos
    }
    return {
        "wheel": wheel.name,
        "size": size,
        "members": len(infos),
        "ours": {"requests": ours_file.stats.requests, "bytes": ours_file.stats.bytes_fetched,
                 "seconds": round(ours_s, 4)},
        "stdlib": {"requests": stdlib_file.stats.requests, "bytes": stdlib_file.stats.bytes_fetched,
                   "seconds": round(stdlib_s, 4)},
        "same_members_and_offsets": same,
    }  # fmt: skip


def main(argv: list[str]) -> int:
    found = [sorted(p for p in src.glob("*.whl") if p.stat().st_size > 1 << 20)
             for src in SOURCES if src.is_dir()]  # fmt: skip
    wheels = [Path(a) for a in argv] or [p for group in found for p in group][:12]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        served = Path(tmp) / "served"
        served.mkdir()
        for wheel in wheels:
            (served / wheel.name).symlink_to(wheel.resolve())
        spool = Path(tmp) / "spool"
        spool.mkdir()
        with serve(served) as server, httpx.Client() as client:
            base = f"http://127.0.0.1:{server.server_port}/"
            rows = [measure(w, base, client, spool) for w in wheels]
        shutil.rmtree(served)
    for row in rows:
        o, s = row["ours"], row["stdlib"]
        print(f"{row['wheel'][:60]:60} {row['members']:>6} members  ours {o['requests']} req "  # type: ignore[index]
              f"{o['bytes']:>9} B   stdlib {s['requests']} req {s['bytes']:>9} B   "  # type: ignore[index]
              f"same={row['same_members_and_offsets']}")  # fmt: skip
    total = {k: sum(r[k]["requests"] for r in rows) for k in ("ours", "stdlib")}  # type: ignore[index]
    nbytes = {k: sum(r[k]["bytes"] for r in rows) for k in ("ours", "stdlib")}  # type: ignore[index]
    print(json.dumps({"wheels": len(rows), "requests": total, "bytes": nbytes}))
    out = Path(__file__).parent / "results.json"
    out.write_text(json.dumps({"rows": rows, "requests": total, "bytes": nbytes}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
