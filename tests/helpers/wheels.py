"""Real wheels and PEP 503 indexes made on the spot, for uv/pip to resolve against.

A wheel here is a real zip with METADATA, WHEEL and RECORD (hashes included), so installers
treat it like any other. Local version tags (`2.9.1+cu130`) and dependencies are supported.
"""

from __future__ import annotations

import base64
import hashlib
import html
import zipfile
from collections.abc import Iterable, Mapping
from pathlib import Path

from packaging.utils import canonicalize_name


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def make_wheel(
    out_dir: Path,
    name: str,
    version: str,
    *,
    requires: Iterable[str] = (),
    files: Mapping[str, bytes | str] | None = None,
    tag: str = "py3-none-any",
    deflate: bool = False,
    variant: tuple[str, str] | None = None,
    unhashed: Iterable[str] = (),
    executable: Iterable[str] = (),
) -> Path:
    """Write `<name>-<version>-<tag>.whl` into out_dir and return its path (members stored,
    or deflated as real wheels are with `deflate=True`). `variant`: (label, the text of
    `*.dist-info/variant.json`) for a PEP 825 variant wheel `<name>-<version>-<tag>-<label>.whl`
    (label "": the file name has none; text "": the wheel holds no variant.json). `unhashed`:
    members whose RECORD row lists no hash (`path,,`), as some wheels list byte-code.
    `executable`: members stored with mode 0755 (the rest 0644)."""
    dist = name.replace("-", "_")
    dist_info = f"{dist}-{version}.dist-info"
    contents: dict[str, bytes] = {}
    for rel, data in (files or {f"{dist}/__init__.py": f"__version__ = {version!r}\n"}).items():
        contents[rel] = data.encode() if isinstance(data, str) else data
    meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    meta += [f"Requires-Dist: {r}" for r in requires]
    contents[f"{dist_info}/METADATA"] = ("\n".join(meta) + "\n").encode()
    if variant is not None and variant[1]:
        contents[f"{dist_info}/variant.json"] = variant[1].encode()
    contents[f"{dist_info}/WHEEL"] = (
        f"Wheel-Version: 1.0\nGenerator: stackgate-tests\nRoot-Is-Purelib: true\nTag: {tag}\n"
    ).encode()
    bare = set(unhashed)
    runnable = set(executable)
    record_lines = [
        f"{rel},," if rel in bare else f"{rel},{_record_hash(data)},{len(data)}"
        for rel, data in contents.items()
    ]
    record_lines.append(f"{dist_info}/RECORD,,")
    contents[f"{dist_info}/RECORD"] = ("\n".join(record_lines) + "\n").encode()
    out_dir.mkdir(parents=True, exist_ok=True)
    label = f"-{variant[0]}" if variant is not None and variant[0] else ""
    path = out_dir / f"{dist}-{version}-{tag}{label}.whl"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for rel in sorted(contents):
            info = zipfile.ZipInfo(rel, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (0o755 if rel in runnable else 0o644) << 16
            if deflate:  # as real wheels are (ZipInfo members default to stored)
                info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, contents[rel])
    return path


def make_index(root: Path, wheels: Iterable[Path]) -> str:
    """A PEP 503 simple index under root/simple; returns its file:// URL."""
    simple = root / "simple"
    by_project: dict[str, list[Path]] = {}
    for wheel in wheels:
        project = canonicalize_name(wheel.name.split("-")[0])
        by_project.setdefault(project, []).append(wheel)
    for project, files in by_project.items():
        folder = simple / project
        folder.mkdir(parents=True, exist_ok=True)
        links = []
        for wheel in files:
            target = folder / wheel.name
            if not target.exists():
                target.write_bytes(wheel.read_bytes())
            sha = hashlib.sha256(target.read_bytes()).hexdigest()
            links.append(
                f'<a href="{html.escape(wheel.name)}#sha256={sha}">{html.escape(wheel.name)}</a><br/>'
            )
        (folder / "index.html").write_text(
            "<!DOCTYPE html><html><body>\n" + "\n".join(links) + "\n</body></html>\n"
        )
    projects = sorted(p.name for p in simple.iterdir() if p.is_dir())
    (simple / "index.html").write_text(
        "<!DOCTYPE html><html><body>\n"
        + "\n".join(f'<a href="{p}/">{p}</a><br/>' for p in projects)
        + "\n</body></html>\n"
    )
    return simple.resolve().as_uri()
