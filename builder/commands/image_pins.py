"""`image-pins`: check images/base-images.toml, or refresh its digests from a registry."""

from __future__ import annotations

import argparse
from pathlib import Path

from builder.image.pins import load_pins, refresh_pins
from stackgate.cli import emit_json
from stackgate.errors import EXIT_OK
from stackgate.output import console_err, styled
from stackgate.paths import display_path

NAME = "image-pins"
HELP = (
    "check the base-image pins (digest + tag comment); --refresh resolves the tags again (skopeo)"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--file", help="pins file (default images/base-images.toml)")
    parser.add_argument(
        "--refresh", action="store_true", help="resolve each tag with skopeo; rewrite moved digests"
    )


def run(args: argparse.Namespace) -> int:
    path = Path(args.file) if args.file else None
    changes = refresh_pins(path) if args.refresh else []
    pins = load_pins(path)
    images = {"uv": pins.uv.model_dump()}
    for version, bases in pins.cuda.items():
        images[f"cuda {version} devel"] = bases.devel.model_dump()
        images[f"cuda {version} runtime"] = bases.runtime.model_dump()
    if args.json:
        emit_json({"ok": True, "file": str(pins.path), "images": images, "changes": changes})
    console = console_err()
    for name, image in images.items():
        console.print(f"{name}: {image['tag']} -> {image['ref'].split('@', 1)[1]}", highlight=False)
    if args.refresh:
        for change in changes:
            console.print(f"  {change}", highlight=False)
    moved = f", {len(changes)} digest(s) moved" if args.refresh else ""
    console.print(
        styled(
            "[bold green]OK[/] {}",
            f"{len(images)} base-image pins in {display_path(pins.path)}{moved}",
        )
    )
    return EXIT_OK
