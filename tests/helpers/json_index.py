"""A PEP 691 (JSON) simple index of wheels built in the test, served over real HTTP on
127.0.0.1 with byte ranges: what `uv lock` resolves against (the sizes in the JSON go into
uv.lock, as PyPI's do) and what the pre-install reader reads ranges of.

Folder: ROOT/files/<wheel> and ROOT/simple/<project>/index.json; GET /simple/<project>/
answers the JSON with its media type, every other path is a file of the range server.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from packaging.utils import canonicalize_name, parse_wheel_filename
from variantlib.constants import VALIDATION_WHEEL_NAME_REGEX

from tests.helpers import range_server

JSON_TYPE = "application/vnd.pypi.simple.v1+json"


def _name_version(filename: str) -> tuple[str, str]:
    """Project and version of a wheel (a PEP 825 variant label allowed) or of an index's
    `<name>-<version>-variants.json`."""
    if filename.endswith("-variants.json"):
        name, _, version = filename[: -len("-variants.json")].rpartition("-")
        return str(canonicalize_name(name)), version
    match = VALIDATION_WHEEL_NAME_REGEX.fullmatch(filename)
    if match is not None and match.group("variant_label"):
        return str(canonicalize_name(match.group("name"))), match.group("ver")
    name, version, _build, _tags = parse_wheel_filename(filename)
    return str(canonicalize_name(name)), str(version)


def write_index(root: Path, wheels: Iterable[Path]) -> None:
    """`wheels`: wheel files, and variants.json files listed beside them as PEP 825 has it."""
    files = root / "files"
    files.mkdir(parents=True, exist_ok=True)
    projects: dict[str, list[dict[str, object]]] = {}
    for wheel in wheels:
        data = wheel.read_bytes()
        (files / wheel.name).write_bytes(data)
        name = _name_version(wheel.name)[0]
        projects.setdefault(name, []).append(
            {
                "filename": wheel.name,
                "url": f"../../files/{wheel.name}",
                "hashes": {"sha256": hashlib.sha256(data).hexdigest()},
                "size": len(data),
            }
        )
    for name, rows in projects.items():
        folder = root / "simple" / name
        folder.mkdir(parents=True, exist_ok=True)
        versions = sorted({_name_version(str(r["filename"]))[1] for r in rows})
        page = {"meta": {"api-version": "1.1"}, "name": name, "files": rows, "versions": versions}
        (folder / "index.json").write_text(json.dumps(page), encoding="utf-8")


class _IndexHandler(range_server._Handler):
    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        if path.endswith("/"):
            page = self.server.root / path.lstrip("/") / "index.json"
            if not page.is_file():
                self.send_error(404)
                return
            body = page.read_bytes()
            self.send_response(200)
            self.send_header("Content-Type", JSON_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()

    def do_HEAD(self) -> None:  # uv asks before reading a wheel's metadata by ranges
        path = self.server.root / self.path.lstrip("/").split("?")[0]
        if not path.is_file():
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(path.stat().st_size))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()


@contextmanager
def serve_index(root: Path) -> Iterator[str]:
    """Serve ROOT; yields the index URL (.../simple)."""
    with range_server.serve(root) as server:
        server.RequestHandlerClass = _IndexHandler
        yield f"http://127.0.0.1:{server.server_port}/simple"
