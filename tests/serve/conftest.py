"""Fixtures for serve-bench: stacks written on the spot, the synthetic server, leftover checks."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil
import pytest

from stackgate.manifest.loading import LoadedStack, load_stack
from validators.core.context import RunContext
from validators.core.options import parse_options
from validators.core.results import Result

HERE = Path(__file__).resolve().parent
SYNTHETIC = HERE / "synthetic_server.py"

_BASE = """\
schema_version = 1
name = "{name}"
description = "serve-bench test stack"
python = "3.12"

[host]
min_driver = "580"
cuda = "13.0"
target_archs = ["9.0a"]

[packages]

[environment.common]
STACKGATE_TEST_COMMON = "1"

[validation]
serve_profile = "main"

[validation.thresholds]
correctness_exact_match_min = 0.9
"""


def toml_value(value: Any) -> str:
    """JSON scalars, strings and arrays are TOML too; tables become inline tables."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


def write_stack(folder: Path, name: str, profiles: dict[str, dict[str, Any]], extra: str = "") -> Path:
    """A manifest with the given serving profiles (flat keys; `bench` as a dict)."""
    lines = [_BASE.format(name=name), extra]
    for pname, fields in profiles.items():
        lines.append(f"[serving.{pname}]")
        bench = fields.pop("bench", None)
        lines += [f"{k} = {toml_value(v)}" for k, v in fields.items()]
        if bench:
            lines.append(f"[serving.{pname}.bench]")
            lines += [f"{k} = {toml_value(v)}" for k, v in bench.items()]
    path = folder / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@contextmanager
def synthetic_server(*flags: str) -> Iterator[str]:
    """The synthetic token server on a free 127.0.0.1 port, ready; its base URL.

    Its stderr is not ours: a server whose client gave up on it (a lie refused mid-stream)
    logs a broken pipe, which must not read as the client's traceback."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, str(SYNTHETIC), "--port", str(port), "--load-s", "0", *flags],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    assert proc.stdout is not None
    for line in proc.stdout:
        if b"ready to roll" in line:
            break
    proc.stdout.close()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


def synthetic_command(*flags: str) -> list[str]:
    return [sys.executable, str(SYNTHETIC), "--port", "{port}", "--model", "{served_model_name}",
            *flags]


FAST_BENCH = {"input_len": 16, "output_len": 16, "concurrencies": [1, 4], "rounds": 1,
              "single_stream_requests": 2, "prompt_format": "token-ids", "request_timeout_s": 60}


@pytest.fixture
def make_ctx(tmp_path: Path) -> Callable[..., RunContext]:
    """A RunContext for a stack with one profile 'main' running the synthetic server."""

    def make(*flags: str, options: dict[str, str] | None = None, **fields: Any) -> RunContext:
        profile = {"engine": "openai-command", "model_path": "synthetic",
                   "command": synthetic_command(*flags), "bench": dict(FAST_BENCH),
                   "load_timeout_s": 600, "hang_timeout_s": 600, "stop_grace_s": 5}
        profile.update(fields)
        path = write_stack(tmp_path, "synthetic", {"main": profile})
        stack: LoadedStack = load_stack(path)
        opts = {"log_dir": str(tmp_path / "logs"), "jsonl": str(tmp_path / "bench.jsonl")}
        opts.update(options or {})
        # the same typed options `--option KEY=VALUE` gives the serve-bench group
        typed = parse_options([f"{k}={v}" for k, v in opts.items()])
        return RunContext(stack=stack, out_dir=tmp_path, options=typed)

    return make


def by_check(results: list[Result]) -> dict[str, Result]:
    return {r.check.removeprefix("serve-bench."): r for r in results}


def assert_tracked_gone(tracked: list[dict[str, Any]]) -> None:
    """Each recorded process is gone, a zombie (holds nothing; its new parent reaps it), or
    its pid now belongs to a different process."""
    assert tracked, "teardown recorded no process at all"
    for entry in tracked:
        try:
            proc = psutil.Process(entry["pid"])
            same = proc.create_time() == entry["create_time"]
            assert not same or proc.status() == psutil.STATUS_ZOMBIE, f"left running: {entry}"
        except psutil.NoSuchProcess:
            pass


def assert_no_leftovers(results: list[Result]) -> None:
    assert_tracked_gone(by_check(results)["teardown"].evidence["tracked"])


@pytest.fixture
def held_port() -> Iterator[tuple[int, socket.socket]]:
    """A port some other program listens on (a socket of this test process)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1)
    try:
        yield sock.getsockname()[1], sock
    finally:
        sock.close()
