"""A stack whose serving profile is the synthetic token server (tests/serve/synthetic_server.py):
a real process streaming over real HTTP at a known rate per stream, so a "5% slower" candidate
is a server configured 5% slower. Used by the gate's end-to-end test and benchmark."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.helpers.wheels import make_index, make_wheel

ROOT = Path(__file__).resolve().parents[2]
SYNTHETIC = ROOT / "tests" / "serve" / "synthetic_server.py"

_MANIFEST = """schema_version = 1
name = "{name}"
description = "synthetic server at {rate} tok/s per stream"
python = "{python}"

[host]
min_driver = "570"
cuda = "12.8"
target_archs = ["8.7"]

[indexes.local]
url = "{url}"
explicit = false

[packages.tinypkg]
version = "1.0.0"
index = "local"

[serving.main]
engine = "openai-command"
model_path = "synthetic"
command = {command}
load_timeout_s = 120
hang_timeout_s = 120
stop_grace_s = 5
correctness_reference = "refs/main.json"

[serving.main.bench]
input_len = 16
output_len = {output_len}
concurrencies = {concurrencies}
rounds = 2
single_stream_requests = 4
request_timeout_s = 60

[validation]
required = ["serve-bench"]
serve_profile = "main"
"""


def write_synthetic_stack(
    stacks: Path,
    work: Path,
    name: str,
    rate: float,
    *,
    output_len: int = 32,
    concurrencies: tuple[int, ...] = (1, 4, 16),
) -> Path:
    wheel = make_wheel(work / "wheels", "tinypkg", "1.0.0")
    url = make_index(work / "index", [wheel])
    command = [
        sys.executable,
        str(SYNTHETIC),
        "--port",
        "{port}",
        "--model",
        "{served_model_name}",
        "--rate",
        str(rate),
    ]
    (stacks / "refs").mkdir(parents=True, exist_ok=True)
    path = stacks / f"{name}.toml"
    path.write_text(
        _MANIFEST.format(
            name=name,
            python=f"{sys.version_info.major}.{sys.version_info.minor}",
            rate=rate,
            url=url,
            command=json.dumps(command),
            output_len=output_len,
            concurrencies=json.dumps(list(concurrencies)),
        )
    )
    return path
