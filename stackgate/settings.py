"""Every STACKGATE_* environment variable, declared once: its default, what it means, who reads
it. `docs/settings.md` is generated from this table (`python -m stackgate.settings --write`;
a test keeps it current, and another fails on a STACKGATE_* name in the code that is not
declared here). They are read here only (value, switch, folder), by one precedence: a
command-line flag beats the variable, the variable beats the default.

The caches have one root, `cache_root()`: $STACKGATE_CACHE, else $XDG_CACHE_HOME/stackgate
(the XDG base directory a Linux user expects to move caches with), else ~/.cache/stackgate.
Before, three variables named parts of it and XDG_CACHE_HOME was honoured nowhere.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from stackgate.errors import BadInput
from stackgate.path_kind import nearest_part


@dataclass(frozen=True)
class Setting:
    name: str
    default: str
    meaning: str
    read_by: tuple[str, ...]
    kind: str = "user"  # user | set-by-stackgate | test


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "STACKGATE_ROOT",
        "the checkout holding `stacks/` (the package's parent, else the "
        "nearest one at or above the working directory)",
        "the checkout whose `stacks/`, `envs/` and `.state/` are used (a tool install run "
        "from outside the checkout)",
        ("stackgate/paths.py",),
    ),
    Setting(
        "STACKGATE_STACKS_DIR",
        "`$STACKGATE_ROOT/stacks`",
        "the folder of stack manifests, rules and locks",
        ("stackgate/paths.py", "stackgate/manifest/rules.py"),
    ),
    Setting(
        "STACKGATE_VENV_ROOT",
        "`<checkout>/envs`",
        "where built environments live (`--venv-root` beats it)",
        ("stackgate/layout.py",),
    ),
    Setting(
        "STACKGATE_STATE_DIR",
        "`<checkout>/.state`",
        "the folder of the known-good record store (`--store` beats it)",
        ("validators/records/store.py",),
    ),
    Setting(
        "STACKGATE_CACHE",
        "`$XDG_CACHE_HOME/stackgate`, else `~/.cache/stackgate`",
        "the root of stackgate's caches: pre-install facts (`lockcheck/`), static file facts "
        "(`static/`), file digests (`file-digests.sqlite`), driver stubs (`driver-stubs/`)",
        ("stackgate/settings.py",),
    ),
    Setting(
        "STACKGATE_CACHE_DIR",
        "unset",
        "older name of STACKGATE_CACHE (it moved only the "
        "file digest cache); read when STACKGATE_CACHE is unset",
        ("stackgate/settings.py",),
    ),
    Setting(
        "STACKGATE_DRIVER_STUB_CACHE",
        "`$STACKGATE_CACHE/driver-stubs`",
        "where compiled libcuda stand-ins for static's confirming loads are kept",
        ("validators/static/driver_stub.py",),
    ),
    Setting(
        "STACKGATE_NO_DIGEST_CACHE",
        "unset",
        "`1`: hash every file of an env, never trusting the file digest cache",
        ("stackgate/envtree/digests.py",),
    ),
    Setting(
        "STACKGATE_UV",
        "the `uv` the `uv` package installed, else `uv` on PATH",
        "the uv executable every uv call uses (a path, or a name looked up on PATH)",
        ("stackgate/uvbin.py",),
    ),
    Setting(
        "STACKGATE_HOSTNAME",
        "the host name",
        "this host's name in records and fleet results (`fleet node --node` beats it)",
        ("stackgate/host/snapshot.py", "validators/fleet/node.py"),
    ),
    Setting(
        "STACKGATE_CA_BUNDLE",
        "unset",
        "a CA bundle mounted for image build steps behind a "
        "TLS-intercepting proxy (`--ca-bundle` beats it)",
        ("builder/commands/image.py",),
    ),
    Setting(
        "STACKGATE_STORAGE_DRIVER",
        "the engine's own",
        "buildah/podman storage driver, e.g. `vfs` (`--storage-driver` beats it)",
        ("builder/commands/image.py",),
    ),
    Setting(
        "STACKGATE_STORAGE_ROOT",
        "the engine's own",
        "buildah/podman store (`--root`; `--storage-root` beats it)",
        ("builder/commands/image.py",),
    ),
    Setting(
        "STACKGATE_KEEP_BUILDS",
        "unset",
        "`1`: keep image build containers and layers for debugging (removed on exit otherwise)",
        ("stackgate/containers/base.py",),
    ),
    Setting(
        "STACKGATE_KEEP_CONTAINERS",
        "unset",
        "`1`: keep the container `validators run --image` ran in",
        ("stackgate/containers/base.py",),
    ),
    Setting(
        "STACKGATE_VERBOSE",
        "unset",
        "set: `static --lock` prints every wheel listed and object read; `compat` every pair "
        "as it is judged",
        ("validators/commands/static.py", "validators/commands/compat.py"),
    ),
    Setting(
        "STACKGATE_DIST_BACKEND",
        "`nccl`",
        "the torch.distributed backend of the runtime probes (`gloo`: CPUs only, no GPUs needed)",
        ("validators/runtime/probes/dist.py", "validators/runtime/ranks.py"),
    ),
    Setting(
        "STACKGATE_DRIVER_USERLAND",
        "`~/.cache/stackgate/driver-userland/...`, where "
        "`.ci/bootstrap` unpacks Debian's `libcuda1`",
        "a folder holding a real `libcuda.so.1`, to confirm a crash at load under the driver stub",
        ("validators/static/driver_userland.py",),
    ),
    Setting(
        "STACKGATE_TOPOLOGY",
        "set by the env",
        "the topology profile an env applied to this "
        "process (its `.pth` / `env.sh` set it; variables you set yourself still win)",
        ("builder/venv/envprofile.py",),
        kind="set-by-stackgate",
    ),
    Setting(
        "STACKGATE_FLEET_OFFSET",
        "set by `fleet submit`",
        "the first node index of a Slurm array chunk",
        ("validators/fleet/slurm/submission.py", "fleet/slurm/validate.sbatch.j2"),
        kind="set-by-stackgate",
    ),
    Setting(
        "STACKGATE_TOOLS_DIR",
        "`.tools`",
        "where `.ci/bootstrap tools` puts the venv with uv and nox",
        (".ci/bootstrap",),
    ),
    Setting(
        "STACKGATE_DRIVER_USERLAND_ROOT",
        "`~/.cache/stackgate/driver-userland`",
        "where `.ci/bootstrap` unpacks Debian's `libcuda1` for static's confirming loads",
        (".ci/bootstrap",),
    ),
    Setting(
        "STACKGATE_SKIP_DISK_CHECK",
        "unset",
        "`1`: `nox -s tests` starts without checking free disk first",
        ("noxfile.py",),
    ),
    Setting(
        "STACKGATE_TEST_HOLD_AT",
        "unset",
        "`builder build` prints `stackgate: holding "
        "before <step>` at that step and waits to be killed (the kill-at-every-step tests)",
        ("builder/venv/fault_hook.py",),
        kind="test",
    ),
)

# Strings that look like variables and are not: a line marker in probe output, a placeholder
# in hashed files.
NOT_SETTINGS = frozenset({"STACKGATE_PROBE", "STACKGATE_ENV"})

BY_NAME = {s.name: s for s in SETTINGS}


def value(name: str, flag: str | Path | None = None, default: str = "") -> str:
    """The flag when given, else $name when set and not empty, else `default`."""
    return str(flag) if flag else os.environ.get(name) or default


def switch(name: str) -> bool:
    """A setting that turns something on: set to anything but empty or `0`."""
    return value(name) not in ("", "0")


def folder(name: str, what: str, flag: Path | None = None) -> Path | None:
    """The folder the flag or else $name names (None when neither). A variable is input like a
    flag: one that cannot name a folder (`/etc/passwd`, `/dev/null`, or under a file) is bad
    input naming it, before anything is created under it."""
    raw = value(name)
    if flag is not None or not raw:
        return flag
    if "\0" in raw:
        raise BadInput(f"${name}: contains a NUL byte; it must name a folder for {what}")
    path = Path(raw)
    probe, kind = nearest_part(path)
    if kind not in (None, "folder"):
        where = "is" if probe == path else f"is under {probe}, which is"
        raise BadInput(f"${name}={raw} {where} not a folder; it must name a folder for {what}")
    return path


def cache_root() -> Path:
    """$STACKGATE_CACHE, else $STACKGATE_CACHE_DIR (its older name), else $XDG_CACHE_HOME/
    stackgate (an absolute XDG_CACHE_HOME only, as the XDG spec says), else ~/.cache/stackgate.
    A variable that names a file is bad input naming it (folder)."""
    for var in ("STACKGATE_CACHE", "STACKGATE_CACHE_DIR"):
        found = folder(var, "stackgate's caches")
        if found is not None:
            return found
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "stackgate"
    return Path.home() / ".cache" / "stackgate"


def markdown() -> str:
    """docs/settings.md."""
    head = (
        "# Settings (environment variables)\n\n"
        "Generated from `stackgate/settings.py` by `python -m stackgate.settings --write`; a test\n"
        "keeps it current. A command-line flag beats a variable, a variable beats the default.\n"
        "The caches share one root: `$STACKGATE_CACHE`, else `$XDG_CACHE_HOME/stackgate`, else\n"
        "`~/.cache/stackgate`.\n"
    )
    out = [head]
    for kind, title in (
        ("user", "Yours to set"),
        ("set-by-stackgate", "Set by stackgate for its own processes"),
        ("test", "For the test suite"),
    ):
        out.append(
            f"\n## {title}\n\n| variable | default | meaning | read by |\n|---|---|---|---|\n"
        )
        for s in SETTINGS:
            if s.kind == kind:
                readers = ", ".join(f"`{r}`" for r in s.read_by)
                out.append(f"| `{s.name}` | {s.default} | {s.meaning} | {readers} |\n")
    return "".join(out)


def main(argv: list[str]) -> int:
    if argv == ["--write"]:
        (Path(__file__).resolve().parent.parent / "docs" / "settings.md").write_text(markdown())
    else:
        sys.stdout.write(markdown())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
