"""The tiny real stack the end-to-end tests lock, build and judge: two wheels made on the spot
(tests/helpers/wheels.py), a manifest that names them, and the interpreter uv builds from.

One builder for the fleet, gate and reproduce tests, so a change to the manifest schema is
made here once. The image tests keep their own manifest (an SM120 host, a [build] and an
[environment] section: they test those) and so do the builder tests (cu130-shaped indexes).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.interpreter import PY_MINOR
from tests.helpers.wheels import make_index, make_wheel


def tiny_index(work: Path, *, with_dep: bool = True) -> str:
    """Wheels under work/wheels and a PEP 503 index of them under work/index; its file:// URL.

    tinypkg 1.0.0 needs tinydep>=0.1 (tinydep 0.2.0 is there); with_dep=False: tinypkg alone,
    needing nothing.
    """
    wheels = [
        make_wheel(
            work / "wheels", "tinypkg", "1.0.0", requires=["tinydep>=0.1"] if with_dep else []
        )
    ]
    if with_dep:
        wheels.append(make_wheel(work / "wheels", "tinydep", "0.2.0"))
    return make_index(work / "index", wheels)


@dataclass(frozen=True)
class Serving:
    """A `[serving.main]` profile run by the openai-command engine, and its bench."""

    command: Sequence[str]  # may hold {port} and {served_model_name}
    output_len: int = 16
    concurrencies: Sequence[int] = (1,)
    rounds: int = 1
    single_stream_requests: int = 2


# The synthetic token server stands for an engine but serves no model: nothing to re-count its
# streamed text with (serve-bench.token_counts SKIPs). Its stacks accept that in the open, as a
# user would, so mark-good records the reason; a real engine's stack has a tokenizer.
SYNTHETIC_ACCEPTS = [
    "",
    "[validation.accepted_findings]",
    '"serve-bench.token_counts" = "the synthetic token server serves no model, so there is no '
    'tokenizer to re-count its tokens with"',
]


def tiny_manifest(
    name: str,
    url: str,
    *,
    description: str,
    required: Sequence[str],
    with_dep: bool = True,
    serving: Serving | None = None,
) -> str:
    """The manifest of the stack tiny_index(with_dep=...) serves at `url`."""
    packages = {"tinypkg": "1.0.0", **({"tinydep": "0.2.0"} if with_dep else {})}
    lines = [
        "schema_version = 1",
        f"name = {json.dumps(name)}",
        f"description = {json.dumps(description)}",
        f'python = "{PY_MINOR}"',
        "",
        "[host]",
        'min_driver = "570"',
        'cuda = "12.8"',
        "# An arch no lent or CI machine has (Jetson Orin): the host never matches the targets.",
        'target_archs = ["8.7"]',
        "",
        "[indexes.local]",
        f"url = {json.dumps(url)}",
        "explicit = false",
    ]
    for package, version in packages.items():
        lines += ["", f"[packages.{package}]", f'version = "{version}"', 'index = "local"']
    if serving is not None:
        lines += [
            "",
            "[serving.main]",
            'engine = "openai-command"',
            'model_path = "synthetic"',
            f"command = {json.dumps(list(serving.command))}",
            "load_timeout_s = 120",
            "hang_timeout_s = 120",
            "stop_grace_s = 5",
            'correctness_reference = "refs/main.json"',
            "",
            "[serving.main.bench]",
            "input_len = 16",
            f"output_len = {serving.output_len}",
            f"concurrencies = {json.dumps(list(serving.concurrencies))}",
            f"rounds = {serving.rounds}",
            f"single_stream_requests = {serving.single_stream_requests}",
            "request_timeout_s = 60",
        ]
    lines += ["", "[validation]", f"required = {json.dumps(list(required))}"]
    if serving is not None:
        lines.append('serve_profile = "main"')
        lines += SYNTHETIC_ACCEPTS
    return "\n".join(lines) + "\n"
