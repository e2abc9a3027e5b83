"""A newcomer's first hour, timed: the README's commands as typed, from a fresh clone, with an
empty HOME (no uv cache, no stackgate cache, no tools), one after the other.

    python benchmarks/first_hour/first_hour.py [--skip WORD ...] [--workdir DIR] [--out NAME]

Clones the checkout's HEAD into WORKDIR/clone, then runs, with HOME=WORKDIR/home and a PATH
without uv or nox, the README's `setup-commands` block and then its `usage-commands` block, each
line verbatim through bash in the clone. Per step: seconds, exit code, the last lines of its
output, and the time to its first line of output and its longest silence (a step that says
nothing for minutes reads as hung). A line whose words contain a --skip WORD is recorded as
skipped with the reason given (e.g. `build`: 20 GB of disk). Results:
benchmarks/first_hour/results/<out>.json and .md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import selectors
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "first_hour" / "results"


def block(text: str, name: str) -> list[str]:
    """The command lines of the README block marked `<!-- name ... -->`, comments dropped."""
    body = text.split(f"<!-- {name}")[1].split(f"<!-- /{name} -->")[0]
    code = body.split("```bash", 1)[1].split("```", 1)[0]
    lines = [line.split("#", 1)[0].strip() for line in code.splitlines()]
    return [line for line in lines if line]


def run_step(command: str, cwd: Path, env: dict[str, str], timeout: float) -> dict[str, object]:
    """Run one line through bash; time it, its first output and its longest silence."""
    start = time.monotonic()
    proc = subprocess.Popen(
        ["bash", "-c", command], cwd=cwd, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    out = bytearray()
    first: float | None = None
    last = start
    silence = 0.0
    timed_out = False
    while True:
        now = time.monotonic()
        if now - start > timeout:
            proc.kill()
            timed_out = True
        events = sel.select(timeout=1.0)
        if events:
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                break
            now = time.monotonic()
            first = first if first is not None else now - start
            silence = max(silence, now - last)
            last = now
            out += chunk
    rc = proc.wait()
    end = time.monotonic()
    silence = max(silence, end - last)
    text = out.decode(errors="replace")
    return {
        "command": command,
        "seconds": round(end - start, 1),
        "rc": 124 if timed_out else rc,
        "first_output_s": None if first is None else round(first, 1),
        "longest_silence_s": round(silence, 1),
        "output_lines": len(text.splitlines()),
        "tail": text.splitlines()[-12:],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/stackgate-first-hour"))
    ap.add_argument("--skip", action="append", default=[], metavar="WORD=WHY",
                    help="skip the lines containing WORD, recording WHY")
    ap.add_argument("--timeout", type=float, default=1800, help="per step, seconds")
    ap.add_argument("--out", default="first_hour")
    args = ap.parse_args()
    skips = dict(s.split("=", 1) if "=" in s else (s, "skipped") for s in args.skip)
    if args.workdir.exists():
        shutil.rmtree(args.workdir)
    clone, home = args.workdir / "clone", args.workdir / "home"
    home.mkdir(parents=True)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip
    t0 = time.monotonic()
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    clone_s = time.monotonic() - t0
    readme = (clone / "README.md").read_text()
    commands = block(readme, "setup-commands") + block(readme, "usage-commands")
    # An empty HOME and a PATH without uv/nox: what a newcomer has. The network settings of this
    # workplace (a TLS-intercepting egress) are the only variables kept.
    keep = ("SSL_CERT_FILE", "SSL_CERT_DIR", "PIP_CERT", "REQUESTS_CA_BUNDLE", "HTTP_PROXY",
            "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy", "LANG", "TERM")
    env = {k: os.environ[k] for k in keep if k in os.environ}
    env |= {"HOME": str(home), "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
    steps: list[dict[str, object]] = []
    for command in commands:
        hit = next((w for w in skips if re.search(rf"(^|\s){re.escape(w)}(\s|$)", command)), None)
        if hit is not None:
            steps.append({"command": command, "skipped": skips[hit]})
            print(f"first-hour: SKIP {command}: {skips[hit]}", file=sys.stderr)
            continue
        print(f"first-hour: $ {command}", file=sys.stderr)
        step = run_step(command, clone, env, args.timeout)
        steps.append(step)
        print(f"first-hour:   rc={step['rc']} in {step['seconds']} s, first output after "
              f"{step['first_output_s']} s, longest silence {step['longest_silence_s']} s",
              file=sys.stderr)  # fmt: skip
    du = subprocess.run(["du", "-sm", str(home), str(clone)], capture_output=True, text=True)
    result = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "commit": head,
        "host": {"machine": platform.machine(), "cpus": os.cpu_count(),
                 "loadavg_at_end": os.getloadavg()},
        "clone_s": round(clone_s, 1),
        "steps": steps,
        "disk_mb": {Path(p).name: int(n) for n, p in (ln.split("\t") for ln in du.stdout.splitlines())},
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.out}.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0 if all(s.get("rc", 0) == 0 for s in steps) else 1


if __name__ == "__main__":
    raise SystemExit(main())
