"""Base-image pins: images/base-images.toml, each image pinned by digest, its tag in a comment.

    devel = "docker.io/nvidia/cuda@sha256:<64 hex>"  # docker.io/nvidia/cuda:13.0.1-devel-ubuntu24.04

The digest is what builds use; the comment is what a person reads and what `refresh_pins`
resolves again (where a registry answers). Both halves are checked on load: a pin without
a digest, without its tag comment, with a `latest` tag or with a tag on another repository
is bad input (exit 2).
"""

from __future__ import annotations

import hashlib
import re
import tomllib
from collections.abc import Callable
from pathlib import Path

from packaging.version import Version
from pydantic import Field

from stackgate import proc
from stackgate.errors import BadInput
from stackgate.model import StrictModel
from stackgate.paths import display_path, project_root

_DIGEST_RE = re.compile(r"^(?P<repo>[a-z0-9][a-z0-9._/:-]*)@(?P<digest>sha256:[0-9a-f]{64})\Z")
_TAGGED_RE = re.compile(
    r"^(?P<repo>[a-z0-9][a-z0-9._/:-]*?):(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]*)\Z"
)
# One pinned line: key = "ref"  # readable tag
_LINE_RE = re.compile(
    r'^(?P<lead>\s*(?P<key>[A-Za-z0-9_-]+)\s*=\s*")(?P<ref>[^"]+)(?P<mid>"\s*#\s*)'
    r"(?P<tag>\S+)\s*$"
)
_TABLE_RE = re.compile(r"^\s*\[(?P<name>[^\]]+)\]\s*$")


def pins_file() -> Path:
    return project_root() / "images" / "base-images.toml"


class PinnedImage(StrictModel):
    """An image reference pinned by digest, with the tag it was resolved from."""

    ref: str = Field(description="repository@sha256:<digest>")
    tag: str = Field(description="repository:tag the digest was resolved from (readable)")

    @property
    def digest(self) -> str:
        return self.ref.split("@", 1)[1]


class CudaBases(StrictModel):
    version: str
    devel: PinnedImage
    runtime: PinnedImage


class ImagePins(StrictModel):
    path: Path
    uv: PinnedImage
    python: dict[str, str] = Field(description="Python minor -> full version uv installs.")
    cuda: dict[str, CudaBases]

    def for_cuda(self, version: str) -> CudaBases:
        """The bases for a stack's CUDA: an exact pin, or the newest x.y.z pin for 'x.y'."""
        if version in self.cuda:
            return self.cuda[version]
        wanted = Version(version).release
        matches = [v for v in self.cuda if Version(v).release[: len(wanted)] == wanted]
        if not matches:
            known = ", ".join(sorted(self.cuda)) or "none"
            raise BadInput(
                f"no base image pinned for CUDA {version} in {display_path(self.path)}",
                details=[f"pinned CUDA versions: {known}; add one and run image-pins --refresh"],
            )
        return self.cuda[max(matches, key=Version)]

    def python_for(self, minor: str) -> str:
        try:
            return self.python[minor]
        except KeyError:
            raise BadInput(
                f"no CPython version pinned for {minor} in {display_path(self.path)} [uv].python"
            ) from None


def _pinned(where: str, ref: object, tag: str | None, problems: list[str]) -> PinnedImage | None:
    if not isinstance(ref, str):
        problems.append(f"{where}: must be a string 'repository@sha256:<digest>'")
        return None
    match = _DIGEST_RE.match(ref)
    if match is None:
        problems.append(f"{where}: '{ref}' is not pinned by digest (repository@sha256:<64 hex>)")
        return None
    if tag is None:
        problems.append(f"{where}: no '# repository:tag' comment after the pin")
        return None
    tagged = _TAGGED_RE.match(tag)
    if tagged is None:
        problems.append(f"{where}: comment '{tag}' is not repository:tag")
        return None
    if tagged["tag"] == "latest":
        problems.append(f"{where}: tag 'latest' names no fixed image; pin a versioned tag")
    if tagged["repo"] != match["repo"]:
        problems.append(f"{where}: tag '{tag}' names another repository than '{match['repo']}'")
    return PinnedImage(ref=ref, tag=tag)


def _comments(text: str) -> dict[tuple[str, str], str]:
    """(table, key) -> tag comment, read line by line (TOML parsers drop comments)."""
    found: dict[tuple[str, str], str] = {}
    table = ""
    for line in text.splitlines():
        if header := _TABLE_RE.match(line):
            table = header["name"].replace('"', "").strip()
            continue
        if pinned := _LINE_RE.match(line):
            found[(table, pinned["key"])] = pinned["tag"]
    return found


def load_pins(path: Path | None = None) -> ImagePins:
    """Read and check the pins file; every problem is reported at once (exit 2)."""
    file = path or pins_file()
    shown = display_path(file)
    try:
        text = file.read_text(encoding="utf-8")
        data = tomllib.loads(text)
    except (OSError, ValueError) as exc:  # ValueError: TOMLDecodeError, endless ints
        raise BadInput(f"{shown}: cannot read the image pins: {exc}") from None
    tags = _comments(text)
    problems: list[str] = []
    uv_table = data.get("uv", {})
    uv = _pinned("uv.image", uv_table.get("image"), tags.get(("uv", "image")), problems)
    python = uv_table.get("python", {})
    if not isinstance(python, dict) or not all(
        isinstance(v, str) and re.fullmatch(rf"{re.escape(k)}\.\d+", v) for k, v in python.items()
    ):
        problems.append("uv.python: must map a minor ('3.12') to a full version ('3.12.12')")
        python = {}
    cuda: dict[str, CudaBases] = {}
    for version, table in sorted(data.get("cuda", {}).items()):
        devel = _pinned(
            f"cuda.{version}.devel",
            table.get("devel"),
            tags.get((f"cuda.{version}", "devel")),
            problems,
        )
        runtime = _pinned(
            f"cuda.{version}.runtime",
            table.get("runtime"),
            tags.get((f"cuda.{version}", "runtime")),
            problems,
        )
        if devel and runtime:
            cuda[version] = CudaBases(version=version, devel=devel, runtime=runtime)
    if problems or uv is None:
        raise BadInput(f"{shown}: {len(problems)} problem(s) in the image pins", details=problems)
    return ImagePins(path=file, uv=uv, python=python, cuda=cuda)


# --- refreshing (needs a registry; the nox session `refresh-image-pins` runs it) ----------

Resolver = Callable[[str], str]


def skopeo_resolver(tag: str) -> str:
    """The digest `tag` names now: sha256 of the raw manifest (the multi-arch index)."""
    raw = proc.run(["skopeo", "inspect", "--raw", f"docker://{tag}"], timeout=120).stdout
    return "sha256:" + hashlib.sha256(raw.encode()).hexdigest()


def refresh_pins(path: Path | None = None, resolver: Resolver = skopeo_resolver) -> list[str]:
    """Resolve every tag comment again and rewrite the digests that moved; returns the changes.

    Only the digest text of a pinned line changes; comments, order and layout stay."""
    file = path or pins_file()
    lines = file.read_text(encoding="utf-8").splitlines(keepends=True)
    changes: list[str] = []
    out: list[str] = []
    for line in lines:
        match = _LINE_RE.match(line.rstrip("\n"))
        ref = match["ref"] if match else ""
        if match and _DIGEST_RE.match(ref):
            repo, old = ref.split("@", 1)
            new = resolver(match["tag"])
            if new != old:
                changes.append(f"{match['tag']}: {old} -> {new}")
                line = line.replace(f"{repo}@{old}", f"{repo}@{new}", 1)
        out.append(line)
    if changes:
        file.write_text("".join(out), encoding="utf-8")
        load_pins(file)  # the rewritten file must still be valid
    return changes
