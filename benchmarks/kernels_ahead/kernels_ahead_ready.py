"""One server of a stack's serve profile from ENV: its ready time and its greedy outputs.

    python benchmarks/kernels_ahead/kernels_ahead_ready.py STACK --env ENV --out FILE \
        [--load-timeout-s S] [--reference PATH]

Started and stopped through stackgate's own launch path (validators.serve: build_launch,
start, wait_ready, teardown), as every `validators run` starts one. The caller gives it a fresh
HOME so that FlashInfer's, TVM-FFI's and Triton's default caches start empty (a fresh host).
--load-timeout-s caps the wait below the profile's own (a device command has a time limit): a
server not ready by then is reported as `timeout` with the seconds waited (a lower bound).
With --reference the greedy outputs are compared with that committed reference.

Writes FILE (JSON): ready verdict and seconds, the greedy comparison, teardown.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from stackgate.manifest.loading import load_stack  # noqa: E402
from validators.serve import correctness  # noqa: E402
from validators.serve.adapters import build_launch  # noqa: E402
from validators.serve.lifecycle import choose_port, start, wait_ready  # noqa: E402
from validators.serve.teardown import teardown  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stack")
    parser.add_argument("--env", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--load-timeout-s", type=float, default=None)
    parser.add_argument("--reference", type=Path, default=None)
    args = parser.parse_args()
    if not (args.env / "bin" / "python").exists():
        parser.error(f"--env {args.env}: no bin/python")
    manifest = load_stack(args.stack).manifest
    name = manifest.validation.serve_profile
    if name is None:
        parser.error(f"{args.stack}: no validation.serve_profile")
    profile = manifest.serving[name]
    load_timeout = min(args.load_timeout_s or profile.load_timeout_s, profile.load_timeout_s)
    port, _ = choose_port("127.0.0.1", None, profile.engine)
    spec = build_launch(
        manifest, profile, python=str(args.env / "bin" / "python"), host="127.0.0.1", port=port
    )
    log = Path(tempfile.mkdtemp(prefix="ka-server-")) / "server.log"
    result: dict[str, Any] = {"env": str(args.env), "profile": name, "log": str(log)}
    t0 = time.monotonic()
    server = start(spec, log, path_prepend=args.env / "bin")
    try:
        ready = wait_ready(
            server, load_timeout_s=load_timeout, hang_timeout_s=profile.hang_timeout_s
        )
        result["ready"] = {
            "verdict": ready.verdict,
            "seconds": round(time.monotonic() - t0, 1),
            "reason": ready.reason,
            "load_timeout_s": load_timeout,
        }
        print(json.dumps(result["ready"]), flush=True)
        if ready.verdict == "ready" and args.reference is not None:
            s = time.monotonic()
            timeout = profile.bench.request_timeout_s
            greedy, _ = correctness.collect(spec.base_url, spec.model, timeout_s=timeout)
            same = correctness.compare(correctness.load_reference(args.reference), greedy)
            result["greedy"] = {
                "reference": str(args.reference),
                "exact_match": same.exact_match,
                "token_agreement": same.token_agreement,
                "mismatches": same.mismatches[:4],
                "seconds": round(time.monotonic() - s, 1),
            }
            print(json.dumps(result["greedy"]), flush=True)
    finally:
        report = teardown(
            server.tracker,
            host="127.0.0.1",
            port=port,
            baseline=server.gpu_baseline,
            grace_s=profile.stop_grace_s,
            wait_leader=server.reap,
        )
        server.tracker.close()
        result["teardown_ok"] = report.ok
        result["seconds"] = round(time.monotonic() - t0, 1)
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0 if result.get("ready", {}).get("verdict") == "ready" else 1


if __name__ == "__main__":
    raise SystemExit(main())
