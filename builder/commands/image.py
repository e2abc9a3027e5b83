"""`image STACK`: build the stack's container image from its manifest and lock.

Engines: Docker Engine through the docker SDK when a daemon answers, else buildah (daemonless),
else podman; `--engine` picks one. `--check-reproducible` builds twice and compares digests
(exit 1 when they differ). `--render DIR` writes the build context (Containerfile included)
and stops, for review or for another builder.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from builder.image.build import ImageRequest, build_image, prepare
from builder.image.context import assemble
from stackgate.cli import emit_json
from stackgate.containers.buildah import StorageConfig
from stackgate.containers.docker import DockerConfig
from stackgate.containers.select import ENGINE_CHOICES
from stackgate.errors import EXIT_CHECK_FAILED, EXIT_OK, BadInput
from stackgate.manifest.loading import load_stack
from stackgate.output import console_err, styled
from stackgate.path_kind import holds_anything, kind_of, nearest_part
from stackgate.paths import display_path, project_root
from stackgate.settings import folder, value

NAME = "image"
HELP = "build the stack's container image (docker SDK, buildah or podman); exit 3 when no engine"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("stack", help="a stack name in stacks/ or a path to a manifest")
    parser.add_argument("--engine", choices=ENGINE_CHOICES, default="auto")
    parser.add_argument(
        "--tag", help="name for the image (default localhost/stackgate-STACK:lock-HASH)"
    )
    parser.add_argument(
        "--output", metavar="oci-archive:PATH", help="also write the image as an OCI archive"
    )
    parser.add_argument(
        "--check-reproducible", action="store_true", help="build twice and compare the digests"
    )
    parser.add_argument("--render", metavar="DIR", help="write the build context to DIR and stop")
    parser.add_argument("--lock-dir", help="the uv project + uv.lock (default stacks/locks/STACK)")
    parser.add_argument("--base", help="base image for both stages, pinned: repo@sha256:...")
    parser.add_argument("--uv-image", help="image holding /uv, pinned: repo@sha256:...")
    parser.add_argument(
        "--base-python", help="interpreter the base image provides (default: uv installs one)"
    )
    parser.add_argument("--no-tool", action="store_true", help="leave the stackgate tool out")
    parser.add_argument(
        "--ca-bundle",
        help="CA bundle for a TLS-intercepting proxy, mounted for RUN steps only (buildah/podman);"
        " env STACKGATE_CA_BUNDLE",
    )
    parser.add_argument(
        "--source",
        action="append",
        default=[],
        metavar="NAME=DIR",
        help="an already patched source tree for a source-built package (default: fetched)",
    )
    parser.add_argument(
        "--storage-root",
        help="buildah/podman store (--root; --runroot beside it); env STACKGATE_STORAGE_ROOT",
    )
    parser.add_argument(
        "--storage-driver",
        help="buildah/podman storage driver (e.g. vfs); env STACKGATE_STORAGE_DRIVER",
    )
    parser.add_argument(
        "--docker-host", help="Docker daemon URL (default DOCKER_HOST or the socket)"
    )
    parser.add_argument(
        "--build-network",
        choices=["host"],
        help="docker: RUN steps on the host network (to reach a mirror on 127.0.0.1)",
    )


# An image name as the OCI distribution grammar has it: [host[:port]/]path[:tag], lower-case
# path components (github.com/distribution/reference, grammar in reference.go).
_LABEL = r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?"
_HOST = rf"{_LABEL}(?:\.{_LABEL})*"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_TAG = re.compile(
    rf"^(?:{_HOST}(?::[0-9]+)?/)?{_COMPONENT}(?:/{_COMPONENT})*(?::[\w][\w.-]{{0,127}})?\Z"
)


def _tag(value: str | None) -> str | None:
    """--tag checked now: the engine would only refuse it after the whole build."""
    if value is None:
        return None
    if len(value) > 255 or not _TAG.match(value):
        raise BadInput(
            f"--tag '{value}': not an image name; write [HOST[:PORT]/]NAME[:TAG] with a "
            "lower-case NAME (e.g. localhost/stackgate-cu130:test)"
        )
    return value


def _output(value: str | None) -> Path | None:
    """--output checked now (the archive is written after the whole build)."""
    if value is None:
        return None
    if not value.startswith("oci-archive:"):
        raise BadInput(f"--output '{value}': write it as oci-archive:PATH")
    raw = value.removeprefix("oci-archive:")
    if not raw:
        raise BadInput(f"--output '{value}': no PATH after oci-archive:")
    # absolute, links left for the check below to follow (resolve() raised FileNotFoundError
    # when a link named there went away while it was read: CPython's realpath)
    path = Path(raw).absolute()
    kind = kind_of(path)
    if kind == "folder":
        raise BadInput(f"--output '{value}': {path} is a folder; name the archive file")
    if kind not in (None, "file"):
        # the archive is moved into place (or the path unlinked first): /dev/null as root
        # would be replaced or removed, as `--junit /dev/null` replaced it (files.py)
        raise BadInput(f"--output '{value}': {path} exists and is not a regular file")
    parent, kind = nearest_part(path.parent)
    if kind != "folder":
        raise BadInput(f"--output '{value}': {parent} is not a folder")
    return path


def _render_target(value: str | None) -> Path | None:
    if value is None:
        return None
    target = Path(value)
    kind = kind_of(target)
    if kind is not None and (kind != "folder" or holds_anything(target)):
        raise BadInput(f"--render {value}: the folder is not empty")
    return target


def _ca_bundle(value: str | None, source: str = "--ca-bundle") -> Path | None:
    if not value:
        return None
    path = Path(value).resolve()
    if not path.is_file():
        raise BadInput(f"{source} {value}: no such file (a CA bundle is a PEM file)")
    return path


def _sources(items: list[str]) -> dict[str, Path]:
    out = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not Path(path).is_dir():
            raise BadInput(f"--source '{item}': write NAME=DIR with an existing DIR")
        out[name] = Path(path).resolve()
    return out


def request_from(args: argparse.Namespace) -> ImageRequest:
    """CLI > environment > defaults."""
    root = folder("STACKGATE_STORAGE_ROOT", "image storage", args.storage_root)
    storage = StorageConfig(
        root=Path(root) / "root" if root else None,
        runroot=Path(root) / "run" if root else None,
        storage_driver=value("STACKGATE_STORAGE_DRIVER", args.storage_driver) or None,
    )
    return ImageRequest(
        engine=args.engine,
        tag=_tag(args.tag),
        output=_output(args.output),
        check_reproducible=args.check_reproducible,
        lock_dir=Path(args.lock_dir).resolve() if args.lock_dir else None,
        base=args.base,
        uv_image=args.uv_image,
        base_python=args.base_python,
        include_tool=not args.no_tool,
        ca_bundle=_ca_bundle(
            value("STACKGATE_CA_BUNDLE", args.ca_bundle),
            "--ca-bundle" if args.ca_bundle else "$STACKGATE_CA_BUNDLE",
        ),
        sources=_sources(args.source),
        storage=storage,
        docker=DockerConfig(base_url=args.docker_host, build_network=args.build_network),
    )


def run(args: argparse.Namespace) -> int:
    loaded = load_stack(args.stack)
    # Every argument is checked before the lock is read, an engine is asked or a file written.
    request = request_from(args)
    target = _render_target(args.render)
    console = console_err()
    if target is not None:
        prepared = prepare(loaded, request)
        if target.exists():
            target.rmdir()
        containerfile = assemble(
            target,
            prepared.inputs,
            loaded,
            prepared.state,
            tool_root=project_root(),
            sources=request.sources,
        )
        build_args = prepared.inputs.build_args(prepared.created)
        if args.json:
            emit_json(
                {
                    "ok": True,
                    "stack": prepared.inputs.stack,
                    "containerfile": str(containerfile),
                    "build_args": build_args,
                }
            )
        console.print(
            "build args: " + " ".join(f"{k}={v}" for k, v in sorted(build_args.items())),
            markup=False,
            highlight=False,
        )
        console.print(
            styled("[bold green]OK[/] {}", f"rendered {display_path(containerfile)}; nothing built")
        )
        return EXIT_OK
    result = build_image(loaded, request)
    repro = result.reproducible
    ok = repro is None or repro.identical
    if args.json:
        emit_json({"ok": ok, **result.model_dump(mode="json")})
    if result.archive:
        console.print(f"OCI archive {result.archive}: manifest {result.archive_digest}")
    if repro is not None:
        verdict = (
            "[bold green]REPRODUCIBLE[/]" if repro.identical else "[bold red]NOT REPRODUCIBLE[/]"
        )
        console.print(
            styled(verdict + " {}", f"(timestamp {result.timestamp} from {result.timestamp_from})")
        )
        for what, (a, b) in repro.compared.items():
            console.print(f"  {what}: {a} {'==' if a == b else '!='} {b}", highlight=False)
        if repro.note:
            console.print(f"  note: {repro.note}", highlight=False)
    console.print(
        styled(
            ("[bold green]OK[/]" if ok else "[bold red]FAILED[/]") + " {}",
            f"built {result.tag or result.archive} with {result.engine} "
            f"{result.engine_version} in {result.seconds:.1f} s: image id {result.image_id}"
            + ("" if ok else " (not reproducible: see above)"),
        )
    )
    return EXIT_OK if ok else EXIT_CHECK_FAILED
