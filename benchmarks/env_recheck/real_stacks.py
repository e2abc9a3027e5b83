"""A held-back check of real environments: stacks from PyPI that no test was written for, each
locked and built with `stackgate lock` / `stackgate build` as a user would, one at a time.

For each stack the script writes a manifest into a scratch folder (outside the checkout), locks
it, builds it, records the build's exit code, verdict line and wall time, and lists every path
that two or more installed distributions claim in their RECORDs (read from the env itself, apart
from the builder's own bookkeeping: path, owners, whose bytes the env holds). The env is deleted
before the next stack (`--keep` keeps it); uv's cache is shared between stacks, so stacks that
reuse a torch reuse its wheels.

    python benchmarks/env_recheck/real_stacks.py [--scratch /work/scratch-real-stacks]
        [--only NAME ...] [--python /path/to/python3.12]
        [--out benchmarks/env_recheck/results/real_stacks.json]

Writes the JSON (one entry per stack, merged into an existing file by name) and
`results/real_stacks.md` (the table) beside it.
"""

from __future__ import annotations

import argparse
import base64
import csv
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
UV = ROOT / ".tools" / "bin" / "uv"

TORCH = "2.9.1"  # the committed cu128 stack's torch: its wheels are in uv's cache already


@dataclass(frozen=True)
class Stack:
    name: str
    what: str
    packages: dict[str, str]  # name -> exact version ("" = any, as the resolver picks)
    extras: dict[str, list[str]] = field(default_factory=dict)


STACKS: tuple[Stack, ...] = (
    Stack("cupy", "CuPy for CUDA 12", {"cupy-cuda12x": "13.6.0"}),
    Stack("vllm-0.13", "vLLM 0.13.0 (torch 2.9.1)", {"vllm": "0.13.0"}),
    Stack("vllm-0.12", "vLLM 0.12.0 (torch 2.9.0)", {"vllm": "0.12.0"}),
    Stack("sglang-0.5.8", "SGLang 0.5.8", {"sglang": "0.5.8"}),
    Stack("sglang-0.5.6", "SGLang 0.5.6.post2", {"sglang": "0.5.6.post2"}),
    Stack(
        "diffusers",
        "diffusers + transformers + torch 2.9.1",
        {"torch": TORCH, "diffusers": "0.35.2", "transformers": "4.57.3", "accelerate": "1.12.0"},
    ),
    Stack(
        "hf-bnb",
        "transformers + accelerate + bitsandbytes + torch 2.9.1",
        {
            "torch": TORCH,
            "transformers": "4.57.3",
            "accelerate": "1.12.0",
            "bitsandbytes": "0.48.2",
        },
    ),
    Stack("xformers", "xformers + torch 2.9.1", {"torch": TORCH, "xformers": "0.0.33.post2"}),
    Stack(
        "onnxruntime-gpu",
        "onnxruntime-gpu + torch 2.9.1",
        {"torch": TORCH, "onnxruntime-gpu": "1.23.2"},
    ),
    Stack(
        "jax-cuda12",
        "JAX with the CUDA 12 plugin (pip CUDA)",
        {"jax": "0.8.1"},
        {"jax": ["cuda12"]},
    ),
    Stack("tensorrt-llm", "TensorRT-LLM's PyPI wheel", {"tensorrt-llm": "1.2.0"}),
)


def manifest(stack: Stack) -> str:
    lines = [
        "schema_version = 1",
        f'name = "{stack.name}"',
        f'description = "{stack.what}"',
        'python = "3.12"',
        'platform = "linux-x86_64"',
        "",
        "[host]",
        'min_driver = "570.26"',
        'cuda = "12.8"',
        'target_archs = ["9.0a"]',
        "",
        "[indexes.pypi]",
        'url = "https://pypi.org/simple"',
        "explicit = false",
        "",
    ]
    for name, version in stack.packages.items():
        lines.append(f"[packages.{name}]")
        if version:
            lines.append(f'version = "{version}"')
        lines.append('index = "pypi"')
        if name in stack.extras:
            lines.append("extras = [" + ", ".join(f'"{e}"' for e in stack.extras[name]) + "]")
        lines.append("")
    lines += ["[validation]", 'required = ["static"]', ""]
    return "\n".join(lines)


def _run(argv: list[str], log: Path) -> tuple[int, float, str]:
    started = time.monotonic()
    with log.open("w") as out:
        done = subprocess.run(argv, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, check=False)
    wall = time.monotonic() - started
    text = log.read_text(errors="replace").strip().splitlines()
    return done.returncode, wall, text[-1] if text else ""


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return "sha256=" + base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode()


def clashes(env: Path) -> list[dict[str, object]]:
    """Every path two or more distributions' RECORDs claim: path, owners (dist-info names) and
    which owners' RECORD hash the env's bytes match ("none" when no listed hash matches)."""
    sites = sorted(env.glob("lib/python3*/site-packages"))
    if not sites:
        return []
    site = sites[0]
    owners: dict[str, list[tuple[str, str]]] = {}
    for record in sorted(site.glob("*.dist-info/RECORD")):
        dist = record.parent.name
        with record.open(newline="") as f:
            for row in csv.reader(f):
                if not row or row[0].endswith("RECORD"):
                    continue
                path = os.path.normpath(row[0])
                owners.setdefault(path, []).append((dist, row[1] if len(row) > 1 else ""))
    found: list[dict[str, object]] = []
    for path, claims in sorted(owners.items()):
        if len({dist for dist, _ in claims}) < 2:
            continue
        file = site / path
        held = _digest(file) if file.is_file() else ""
        matching = [dist for dist, digest in claims if digest and digest == held]
        hashes = {digest for _, digest in claims}
        found.append(
            {
                "path": path,
                "owners": [dist for dist, _ in claims],
                "same_bytes": len(hashes) == 1,
                "env_holds": matching or (["none"] if held else ["absent"]),
            }
        )
    return found


def run_stack(
    stack: Stack, scratch: Path, python: str, *, keep: bool, static: bool
) -> dict[str, object]:
    stacks = scratch / "stacks"
    logs = scratch / "logs"
    stacks.mkdir(parents=True, exist_ok=True)
    logs.mkdir(parents=True, exist_ok=True)
    path = stacks / f"{stack.name}.toml"
    path.write_text(manifest(stack))
    common = ["--python", python, "--locks-dir", str(scratch / "locks")]
    stackgate = [str(UV), "run", "--frozen", "stackgate"]
    entry: dict[str, object] = {"stack": stack.name, "what": stack.what}
    lock_rc, lock_s, lock_line = _run(
        ["nice", "-n", "10", *stackgate, "lock", str(path), *common, "--no-compat"],
        logs / f"{stack.name}.lock.log",
    )
    entry.update(lock_rc=lock_rc, lock_s=round(lock_s, 1), lock_verdict=lock_line)
    if lock_rc != 0:
        return entry
    lock = (scratch / "locks" / stack.name / "uv.lock").read_text()
    entry["packages"] = lock.count("\n[[package]]") - 1  # the generated project is one
    venvs = scratch / "envs"
    build_rc, build_s, build_line = _run(
        ["nice", "-n", "10", *stackgate, "build", str(path), *common,
         "--venv-root", str(venvs), "--topology", "pcie"],
        logs / f"{stack.name}.build.log",
    )  # fmt: skip
    entry.update(build_rc=build_rc, build_s=round(build_s, 1), build_verdict=build_line)
    env = venvs / stack.name / "current"
    if not env.exists():
        partials = sorted((venvs / stack.name).glob("*.partial"))
        env = partials[0] if partials else env
    if env.exists():
        record = env / "stackgate" / "build-record.json"
        if record.is_file():
            data = json.loads(record.read_text())
            entry["files"] = data["tree"]["files"]
            entry["gib"] = round(data["tree"]["bytes"] / 2**30, 2)
            checked = data.get("wheel_records") or {}
            entry["recorded_clashes"] = len(checked.get("clashes", []))
            shutil.copy(record, logs / f"{stack.name}.build-record.json")
        entry["clashes"] = clashes(env)
        if static:
            rc, wall, line = _run(
                ["nice", "-n", "10", *stackgate, "static", str(path), "--env", str(env)],
                logs / f"{stack.name}.static.log",
            )
            entry.update(static_rc=rc, static_s=round(wall, 1), static_verdict=line)
    if not keep:
        shutil.rmtree(venvs / stack.name, ignore_errors=True)
    return entry


def _clash_text(found: list[dict[str, object]]) -> str:
    out = []
    for c in found:
        owners = [str(o) for o in c["owners"]]  # type: ignore[attr-defined]
        holds = [str(o) for o in c["env_holds"]]  # type: ignore[attr-defined]
        shown = ", ".join(owners) if len(owners) <= 3 else f"{len(owners)} nvidia-* wheels"
        held = ", ".join(holds) if len(holds) <= 2 else "all"
        same = "same" if c["same_bytes"] else "different"
        out.append(f"`{c['path']}`: {shown} ({same} bytes; env holds {held})")
    return "<br>".join(out) or "none"


def table(entries: list[dict[str, object]]) -> str:
    rows = [
        "| stack | what | packages | lock | build | build s | files | GiB | static "
        "| clashes recorded | clashes (path: owners; whose copy the env holds) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for e in entries:
        found = e.get("clashes") or []
        rows.append(
            f"| {e['stack']} | {e['what']} | {e.get('packages', '-')} | {e['lock_rc']} "
            f"| {e.get('build_rc', '-')} | {e.get('build_s', '-')} | {e.get('files', '-')} "
            f"| {e.get('gib', '-')} | {e.get('static_rc', '-')} "
            f"| {e.get('recorded_clashes', '-')} | {_clash_text(found)} |"  # type: ignore[arg-type]
        )
    return "\n".join(rows)


def write_page(out: Path, entries: list[dict[str, object]]) -> None:
    (out.parent / "real_stacks.md").write_text(
        "# Real stacks from PyPI, locked and built as a user would\n\n"
        "Written by `benchmarks/env_recheck/real_stacks.py` from `real_stacks.json`. lock, "
        "build and static are exit codes (build 0: installed, and the env check passed: "
        "installed equals what uv installs from the lock, every file against its wheels' "
        "RECORDs); clashes recorded: in the build record's `wheel_records`; the clash column "
        "is the script's own reading of the env's RECORDs.\n\n" + table(entries) + "\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scratch", type=Path, default=Path("/work/scratch-real-stacks"))
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--python", default="python3.12")
    parser.add_argument("--keep", action="store_true", help="keep each env after its build")
    parser.add_argument("--static", action="store_true", help="run `stackgate static` on each env")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks/env_recheck/results/real_stacks.json"
    )
    parser.add_argument("--page-only", action="store_true", help="rewrite the page from --out")
    args = parser.parse_args()
    if args.page_only:
        write_page(args.out, json.loads(args.out.read_text())["stacks"])
        return
    chosen = [s for s in STACKS if args.only is None or s.name in args.only]
    done: dict[str, dict[str, object]] = {}
    if args.out.is_file():
        done = {e["stack"]: e for e in json.loads(args.out.read_text())["stacks"]}
    for stack in chosen:
        print(f"== {stack.name}", file=sys.stderr, flush=True)
        entry = run_stack(stack, args.scratch, args.python, keep=args.keep, static=args.static)
        print(json.dumps(entry), file=sys.stderr, flush=True)
        done[stack.name] = entry
        order = [s.name for s in STACKS]
        entries = sorted(
            done.values(), key=lambda e: order.index(str(e["stack"])) if e["stack"] in order else 99
        )
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"stacks": entries}, indent=1) + "\n")
        write_page(args.out, entries)


if __name__ == "__main__":
    main()
