"""The package index the bisect tests resolve against, and the stacks that use it.

Real wheels (tests/helpers/wheels.py) served over real HTTP on 127.0.0.1 (range_server, so
`static --lock` reads byte ranges of them as it would from PyPI). Each package comes in 1.0
(the baseline's) and 2.0 (the candidate's). Their 2.0s act on the synthetic token server
(tests/serve/synthetic_server.py, started with the env's Python and `--rate-plugins`) through a
`synthetic_server.rate` entry point, or break:

- `n01`..`n16`: neutral, no effect;
- `slowpkg` / `slowtoo` 2.0: half the server's tokens/s (each alone; two independent culprits);
- `duoa` / `duob` 2.0: half the tokens/s only when both are 2.0 (an interaction);
- `coupled` 2.0 needs `partner>=2` and halves the rate; `coupled` 1.0 needs `partner<2`:
  neither moves alone through the resolver (a merged unit);
- `brokenpkg` 2.0: an ELF extension (gcc) with an undefined symbol: `static --lock` FAILs it;
- `jitter` 2.0: a factor drawn in [0.97, 1.03] at each start (a flaky equal candidate).

The effect is large on purpose (x0.5, where the issue's example is 20%): on a shared 2-core
host noise never hides it. The runs are the family-wise rule's, not the noise's: a refusal
needs a family false-alarm probability <= 1%, and a relabelling test with few runs cannot reach
that (5 runs against 5: 252 run-label permutations, smallest p 1/252; 2 against 2 gave 1/6).
ABBA pairs are judged by sign flips: 7 pairs (1/128) is the fewest that can refuse, and only
when the observed pattern is the most extreme of all 128 (which x0.5 throughput is, far beyond
every other gated metric; a 5% effect needs 8 pairs: tests/gate/test_synthetic_server.py).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from tests.helpers.interpreter import PY_MINOR
from tests.helpers.tiny_stack import SYNTHETIC_ACCEPTS
from tests.helpers.wheels import make_index, make_wheel

ROOT = Path(__file__).resolve().parents[2]
SYNTHETIC = ROOT / "tests" / "serve" / "synthetic_server.py"
NEUTRAL = tuple(f"n{i:02d}" for i in range(1, 17))
# Runs a side the stacks declare (unpaired gates against the record's numbers, --no-interleave).
REPEATS = 5
# ABBA pairs an interleaved bisect step makes (2^7 = 128 sign patterns).
PAIRS = 7
HALF = "def factor():\n    return 0.5\n"
BOTH = """from importlib.metadata import version


def factor():
    both = all(version(n).startswith("2.") for n in ("duoa", "duob"))
    return 0.7071067811865476 if both else 1.0
"""
JITTER = "import random\n\n\ndef factor():\n    return random.uniform(0.97, 1.03)\n"
MISSING_C = "extern int bisect_missing_symbol(void);\nint PyInit__native(void) { return bisect_missing_symbol(); }\n"
TAG_NATIVE = f"cp{PY_MINOR.replace('.', '')}-abi3-manylinux_2_17_x86_64"


def _plugin_wheel(out: Path, name: str, source: str, requires: Iterable[str] = ()) -> Path:
    dist_info = f"{name}-2.0.dist-info"
    return make_wheel(out, name, "2.0", requires=requires, files={
        f"{name}/__init__.py": source,
        f"{dist_info}/entry_points.txt": f"[synthetic_server.rate]\n{name} = {name}:factor\n",
    })  # fmt: skip


def _broken_wheel(out: Path, build: Path) -> Path:
    build.mkdir(parents=True, exist_ok=True)
    src = build / "native.c"
    src.write_text(MISSING_C)
    so = build / "_native.abi3.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(so), str(src)], check=True,
                   capture_output=True)  # fmt: skip
    return make_wheel(out, "brokenpkg", "2.0", tag=TAG_NATIVE, files={
        "brokenpkg/__init__.py": "from brokenpkg import _native  # noqa: F401\n",
        "brokenpkg/_native.abi3.so": so.read_bytes(),
    })  # fmt: skip


def build_index(work: Path) -> Path:
    """All wheels and a PEP 503 index of them under work/served/simple; returns work/served."""
    wheels = work / "wheels"
    made: list[Path] = []
    plain = [*NEUTRAL, "slowpkg", "slowtoo", "duoa", "duob", "brokenpkg", "jitter", "partner"]
    for name in plain:
        made.append(make_wheel(wheels, name, "1.0"))
    for name in NEUTRAL:
        made.append(make_wheel(wheels, name, "2.0"))
    made.append(make_wheel(wheels, "partner", "2.0"))
    made.append(make_wheel(wheels, "coupled", "1.0", requires=["partner<2"]))
    made.append(_plugin_wheel(wheels, "coupled", HALF, requires=["partner>=2"]))
    for name in ("slowpkg", "slowtoo"):
        made.append(_plugin_wheel(wheels, name, HALF))
    for name in ("duoa", "duob"):
        made.append(_plugin_wheel(wheels, name, BOTH))
    made.append(_plugin_wheel(wheels, "jitter", JITTER))
    made.append(_broken_wheel(wheels, work / "build"))
    served = work / "served"
    make_index(served, made)
    add_json_pages(served)
    return served


def bisect_manifest(
    name: str,
    url: str,
    packages: Mapping[str, str],
    *,
    rate: float = 400.0,
    env: Mapping[str, str] | None = None,
    repeats: int = REPEATS,
    interleave: bool = False,
    index: str = "local",
) -> str:
    """A stack of these packages served by the synthetic server (serve-bench only), with the
    gate policy the tests bisect under: REPEATS runs a side, margins wide enough for a 2-core
    host's noise and far inside the x0.5 effect."""
    command = ["{python}", str(SYNTHETIC), "--port", "{port}",
               "--model", "{served_model_name}", "--rate", str(rate), "--rate-plugins",
               "--load-s", "0.1"]  # fmt: skip
    lines = [
        "schema_version = 1",
        f"name = {json.dumps(name)}",
        'description = "bisect test stack: packages that change the synthetic server"',
        f'python = "{PY_MINOR}"',
        "",
        "[host]",
        'min_driver = "570"',
        'cuda = "12.8"',
        'target_archs = ["8.7"]',
        "",
        f"[indexes.{index}]",
        f"url = {json.dumps(url)}",
        "explicit = false",
    ]
    for package, version in sorted(packages.items()):
        lines += ["", f"[packages.{package}]", f'version = "{version}"', f'index = "{index}"']
    lines += [
        "",
        "[serving.main]",
        'engine = "openai-command"',
        'model_path = "synthetic"',
        f"command = {json.dumps(command)}",
        "load_timeout_s = 60",
        "hang_timeout_s = 60",
        "stop_grace_s = 5",
        'correctness_reference = "refs/main.json"',
    ]
    if env:
        lines += [f"env = {{ {', '.join(f'{k} = {json.dumps(v)}' for k, v in env.items())} }}"]
    lines += [
        "",
        "[serving.main.bench]",
        "input_len = 16",
        "output_len = 24",
        "concurrencies = [1, 4]",
        "rounds = 1",
        "single_stream_requests = 2",
        "request_timeout_s = 60",
        "",
        "[validation]",
        'required = ["serve-bench"]',
        'serve_profile = "main"',
        "",
        "[validation.gate]",
        f"repeats = {repeats}",
        "tolerance = 0.25",
        "tail_tolerance = 0.6",
        f"interleave = {'true' if interleave else 'false'}",
        *SYNTHETIC_ACCEPTS,
    ]
    return "\n".join(lines) + "\n"


def versions(names: Sequence[str], version: str) -> dict[str, str]:
    return dict.fromkeys(names, version)


def add_json_pages(served: Path) -> None:
    """PEP 691 JSON pages beside make_index's HTML ones: they carry each file's size, which uv
    writes into the lock and `static --lock` needs to read byte ranges."""
    simple = served / "simple"
    for folder in sorted(p for p in simple.iterdir() if p.is_dir()):
        files = []
        for wheel in sorted(folder.glob("*.whl")):
            data = wheel.read_bytes()
            files.append({
                "filename": wheel.name,
                "url": wheel.name,
                "hashes": {"sha256": hashlib.sha256(data).hexdigest()},
                "size": len(data),
            })  # fmt: skip
        page = {"meta": {"api-version": "1.1"}, "name": folder.name, "files": files}
        (folder / "index.json").write_text(json.dumps(page))
