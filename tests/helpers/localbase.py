"""A real, local base image for buildah tests: busybox-static + the interpreter running pytest.

Registries are unreachable from CI, so the image recipe is built FROM an image made here:
- /bin/busybox (Debian's busybox-static) with a link per applet, so RUN steps have /bin/sh;
- the CPython that runs the tests (sys.base_prefix, stdlib only: no site-packages, tests,
  tkinter...) copied to /usr/local, its libpython to /usr/lib (a default search dir, so the
  binary's RUNPATH into the host's prefix no longer matters);
- every shared library that python, its extension modules and the host's uv need, found with
  ldd, at the path ldd printed (the loader searches /lib/x86_64-linux-gnu without a cache).

It is committed with `--timestamp 0`, so the same host makes the same base digest. Building
it takes a few seconds; it lives in the test's own buildah store, never the global one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from stackgate import proc

# Parts of the stdlib a `uv sync` and a `python -c` never need; leaving them out keeps the vfs
# copies (one per layer) small.
_SKIP_STDLIB = {
    "site-packages",
    "test",
    "idlelib",
    "tkinter",
    "turtledemo",
    "ensurepip",
    "lib2to3",
    "__pycache__",
    "pydoc_data",
}
_LDD_LINE = re.compile(r"(?:=>\s*)?(/\S+)\s+\(0x[0-9a-f]+\)")


@dataclass(frozen=True)
class LocalImage:
    name: str  # e.g. localhost/stackgate-test-base
    digest: str  # manifest digest, sha256:...
    python: str  # interpreter path inside the image

    @property
    def pinned(self) -> str:
        return f"{self.name}@{self.digest}"


def buildah_base_args(store: Path) -> list[str]:
    return [
        "buildah",
        "--root",
        str(store / "root"),
        "--runroot",
        str(store / "run"),
        "--storage-driver",
        "vfs",
    ]


def _ldd(paths: list[Path]) -> set[Path]:
    found: set[Path] = set()
    for path in paths:
        out = proc.run(["ldd", str(path)], check=False)
        for match in _LDD_LINE.finditer(out.stdout):
            found.add(Path(match.group(1)))
    return found


# Libraries manylinux wheels may link without bundling (PEP 600's short list): numpy's
# extension needs libstdc++, for one, and every real base image has them.
_MANYLINUX_SONAMES = ("libstdc++.so.6", "libgcc_s.so.1", "libz.so.1", "libexpat.so.1")


def _manylinux_libs() -> set[Path]:
    cache = proc.run(["ldconfig", "-p"]).stdout
    found = set()
    for soname in _MANYLINUX_SONAMES:
        match = re.search(rf"^\s*{re.escape(soname)} \(libc6,x86-64\) => (\S+)$", cache, flags=re.M)
        if match:
            found.add(Path(match.group(1)))
    return found | _ldd(sorted(found))


def _copy_stdlib(src: Path, dst: Path) -> None:
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_STDLIB)
        rel = Path(dirpath).relative_to(src)
        (dst / rel).mkdir(parents=True, exist_ok=True)
        for name in sorted(filenames):
            shutil.copy2(Path(dirpath) / name, dst / rel / name, follow_symlinks=True)


def make_rootfs(root: Path) -> str:
    """Fill `root` with busybox + this interpreter; return the interpreter path inside."""
    busybox = shutil.which("busybox")
    assert busybox is not None, "busybox-static is not installed"
    (root / "bin").mkdir(parents=True)
    shutil.copy2(busybox, root / "bin" / "busybox")
    applets = proc.run([busybox, "--list"]).stdout.split()
    for applet in applets:
        if applet != "busybox":
            (root / "bin" / applet).symlink_to("busybox")
    for d in ("tmp", "root", "etc", "usr/bin"):
        (root / d).mkdir(parents=True, exist_ok=True)
    (root / "tmp").chmod(0o1777)
    (root / "usr/bin/env").symlink_to("/bin/env")
    (root / "etc/passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (root / "etc/group").write_text("root:x:0:\n")

    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    prefix = Path(sys.base_prefix)
    exe = prefix / "bin" / f"python{version}"
    stdlib = Path(sysconfig.get_path("stdlib", vars={"installed_base": str(prefix)}))
    target = root / "usr/local"
    (target / "bin").mkdir(parents=True)
    shutil.copy2(exe, target / "bin" / f"python{version}")
    (target / "bin" / "python3").symlink_to(f"python{version}")
    _copy_stdlib(stdlib, target / "lib" / f"python{version}")

    dynload = sorted((stdlib / "lib-dynload").glob("*.so"))
    elf = [exe, real_uv(), *(so for so in dynload if not so.name.startswith("_tkinter"))]
    for lib in sorted(_ldd(elf) | _manylinux_libs()):
        # libpython from the host prefix goes to /usr/lib; system libs keep their path.
        dest = (
            root / "usr/lib" / lib.name
            if lib.is_relative_to(prefix)
            else root / lib.relative_to("/")
        )
        dest.parent.mkdir(parents=True, exist_ok=True)
        if not dest.exists():
            shutil.copy2(lib, dest, follow_symlinks=True)
    return f"/usr/local/bin/python{version}"


def _is_elf(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            return fh.read(4) == b"\x7fELF"
    except OSError:
        return False


def real_uv() -> Path:
    """The uv executable itself, not a pyenv shim script in front of it."""
    candidates = [os.environ.get("UV"), shutil.which("uv")]
    if shutil.which("pyenv"):
        candidates.append(proc.run(["pyenv", "which", "uv"], check=False).stdout.strip())
    for candidate in candidates:
        if candidate and _is_elf(Path(candidate).resolve()):
            return Path(candidate).resolve()
    raise AssertionError(f"no uv executable (ELF) found among {candidates}")


def _commit(store: Path, rootfs: Path, name: str, *, config: list[str]) -> str:
    b = buildah_base_args(store)
    container = proc.run(
        [*b, "from", "--name", f"{name.rsplit('/', 1)[-1]}-work", "scratch"]
    ).stdout.strip()
    try:
        proc.run([*b, "copy", container, f"{rootfs}/", "/"], timeout=300)
        proc.run([*b, "config", *config, container])
        proc.run(
            [*b, "commit", "--timestamp", "0", "--identity-label=false", "--rm", container, name],
            timeout=300,
        )
    finally:
        proc.run([*b, "rm", container], check=False)
    return image_digest(store, name)


def image_digest(store: Path, name: str) -> str:
    out = proc.run([*buildah_base_args(store), "images", "--json", "--digests", name]).stdout
    entries = json.loads(out)
    return str(entries[0]["digest"])


def make_base_image(
    store: Path, work: Path, name: str = "localhost/stackgate-test-base"
) -> LocalImage:
    rootfs = work / "rootfs"
    rootfs.parent.mkdir(parents=True, exist_ok=True)
    python = make_rootfs(rootfs)
    digest = _commit(
        store,
        rootfs,
        name,
        config=["--env", "PATH=/usr/local/bin:/usr/bin:/bin", "--cmd", "/bin/sh"],
    )
    return LocalImage(name=name, digest=digest, python=python)


def make_uv_image(store: Path, work: Path, name: str = "localhost/stackgate-test-uv") -> LocalImage:
    """Stands in for ghcr.io/astral-sh/uv (unreachable here): /uv is the host's uv binary."""
    rootfs = work / "uv-rootfs"
    rootfs.mkdir(parents=True)
    shutil.copy2(real_uv(), rootfs / "uv")
    digest = _commit(store, rootfs, name, config=["--cmd", "/uv"])
    return LocalImage(name=name, digest=digest, python="")
