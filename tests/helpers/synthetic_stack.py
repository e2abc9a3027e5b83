"""A stack whose serving profile is the synthetic token server (tests/serve/synthetic_server.py):
a real process streaming over real HTTP at a known rate per stream, so a "5% slower" candidate
is a server configured 5% slower. Used by the gate's end-to-end test and benchmark."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.helpers.tiny_stack import Serving, tiny_index, tiny_manifest

ROOT = Path(__file__).resolve().parents[2]
SYNTHETIC = ROOT / "tests" / "serve" / "synthetic_server.py"


def write_synthetic_stack(
    stacks: Path,
    work: Path,
    name: str,
    rate: float,
    *,
    output_len: int = 32,
    concurrencies: tuple[int, ...] = (1, 4, 16),
) -> Path:
    url = tiny_index(work, with_dep=False)
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
    serving = Serving(
        command, output_len=output_len, concurrencies=concurrencies, rounds=2,
        single_stream_requests=4,
    )  # fmt: skip
    (stacks / "refs").mkdir(parents=True, exist_ok=True)
    path = stacks / f"{name}.toml"
    path.write_text(
        tiny_manifest(
            name,
            url,
            description=f"synthetic server at {rate} tok/s per stream",
            required=("serve-bench",),
            with_dep=False,
            serving=serving,
        )
    )
    return path
