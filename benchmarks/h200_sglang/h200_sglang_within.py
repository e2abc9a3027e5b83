"""Within-server noise of SGLang serve-bench, and a serving knob's cost (issue 22).

    python benchmarks/h200_sglang/h200_sglang_within.py STACK_OR_MANIFEST --env ENV --benches K --out FILE

ONE server of the stack's serve profile, started and stopped through stackgate's own launch
path (validators.serve: build_launch, start, wait_ready, teardown), then K back-to-back runs of
the profile's benchmark level(s) through stackgate's own client (bench_client.run_level, the
function serve-bench's sweep calls, warm-up included each time). Every restart-to-restart run
of `validators run` starts a fresh server; this measures the part of the noise one server
already has, so the two CVs can be set side by side. Also kept, for the restart bimodality
question: where the server's processes may and did run (Cpus_allowed_list and the last CPU,
from /proc) and their NUMA node, sampled after the last bench.

With --record-reference PATH the server first records the profile's greedy reference there
(validators.serve.correctness.collect + record, what `serve-bench --record-reference` calls),
and after the benches collects the greedy outputs again and compares them with it (the same
server, after load: does greedy decoding hold within one server?).

With --long-benches K --long-factor L (added after machine 2, not run yet), K more benches at
`rounds` x L follow on the same server (`long_benches`, `within_server_long`): does a run L
times as long have a CV sqrt(L) times smaller (benchmarks/h200_sglang/h200_sglang_design.py assumes so)?
They are kept apart from `benches`, which benchmarks/h200_sglang/h200_sglang_prereg.py reads.

Writes FILE (JSON): per bench the gated sweep metrics, their mean/CV, the process placement.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from stackgate.manifest.loading import load_stack  # noqa: E402
from validators.serve import bench_client, correctness  # noqa: E402
from validators.serve.adapters import build_launch  # noqa: E402
from validators.serve.lifecycle import choose_port, start, wait_ready  # noqa: E402
from validators.serve.teardown import teardown  # noqa: E402

KEYS = (
    "output_throughput", "request_throughput", "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms",
    "mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms", "mean_itl_ms", "median_itl_ms",
    "p99_itl_ms", "mean_e2e_latency_ms", "p99_e2e_latency_ms",
)  # fmt: skip


def placement(pids: list[int]) -> list[dict[str, Any]]:
    """Each process's allowed CPUs, the CPU it last ran on, and its threads' count."""
    out = []
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            stat = Path(f"/proc/{pid}/stat").read_text()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:120]
        except OSError:
            continue
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        last_cpu = int(stat.rsplit(")", 1)[1].split()[36])
        out.append({
            "pid": pid, "name": fields.get("Name", "").strip(), "cmd": cmd,
            "cpus_allowed": fields.get("Cpus_allowed_list", "").strip(),
            "mems_allowed": fields.get("Mems_allowed_list", "").strip(),
            "threads": int(fields.get("Threads", "0")), "last_cpu": last_cpu,
        })  # fmt: skip
    return out


def summary(benches: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in KEYS:
        values = [float(b[key]) for b in benches if b.get(key) is not None]
        if len(values) >= 2 and statistics.fmean(values):
            mean = statistics.fmean(values)
            out[key] = {
                "mean": round(mean, 4),
                "cv": round(statistics.stdev(values) / mean, 5),
                "values": [round(v, 4) for v in values],
            }
    return out


def run_benches(target: bench_client.Target, settings: Any, count: int) -> list[dict[str, Any]]:
    """`count` back-to-back runs of every benchmark level (warm-up included each time)."""
    benches = []
    for i in range(count):
        for level in settings.concurrencies:
            s = time.monotonic()
            metrics = bench_client.run_level(target, settings, level)
            kept = {k: metrics.get(k) for k in KEYS}
            kept.update(
                bench=i, concurrency=level, rounds=settings.rounds,
                seconds=round(time.monotonic() - s, 2),
            )  # fmt: skip
            benches.append(kept)
            print(json.dumps(kept), flush=True)
    return benches


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stack")
    parser.add_argument("--env", type=Path, required=True)
    parser.add_argument("--benches", type=int, default=6)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--record-reference", type=Path, default=None, metavar="PATH")
    parser.add_argument("--long-benches", type=int, default=0, metavar="K")
    parser.add_argument("--long-factor", type=int, default=4, metavar="L")
    args = parser.parse_args()
    if args.benches < 0 or args.long_benches < 0 or args.long_factor < 1:
        parser.error("--benches, --long-benches: >= 0; --long-factor: >= 1")
    loaded = load_stack(args.stack)
    manifest = loaded.manifest
    name = manifest.validation.serve_profile
    assert name is not None, "the stack names no serve_profile"
    profile = manifest.serving[name]
    settings = profile.bench
    python = str(args.env / "bin" / "python")
    port, _ = choose_port("127.0.0.1", None, profile.engine)
    spec = build_launch(manifest, profile, python=python, host="127.0.0.1", port=port)
    log = Path(tempfile.mkdtemp(prefix="sg-within-")) / "server.log"
    t0 = time.monotonic()
    server = start(spec, log, path_prepend=args.env / "bin")
    result: dict[str, Any] = {"stack": str(args.stack), "profile": name, "argv": spec.argv}
    try:
        ready = wait_ready(
            server, load_timeout_s=profile.load_timeout_s, hang_timeout_s=profile.hang_timeout_s
        )
        result["ready"] = {"verdict": ready.verdict, "seconds": round(time.monotonic() - t0, 1)}
        if ready.verdict != "ready":
            raise SystemExit(f"server not ready: {ready.reason}")
        target = bench_client.Target(base_url=spec.base_url, model=spec.model)
        timeout = settings.request_timeout_s
        if args.record_reference is not None:
            greedy, arithmetic = correctness.collect(spec.base_url, spec.model, timeout_s=timeout)
            ref = correctness.record(
                args.record_reference, stack=manifest.name, profile=name, model=spec.model,
                greedy=greedy, arithmetic=arithmetic,
            )  # fmt: skip
            result["reference"] = {"path": str(args.record_reference), "prompts": len(greedy)}
        benches = run_benches(target, settings, args.benches)
        longer = settings.model_validate(
            {**settings.model_dump(), "rounds": settings.rounds * args.long_factor}
        )
        long_benches = run_benches(target, longer, args.long_benches)
        if args.record_reference is not None:
            again, _ = correctness.collect(spec.base_url, spec.model, timeout_s=timeout)
            same = correctness.compare(ref, again)
            result["greedy_again_after_benches"] = {
                "exact_match": same.exact_match, "token_agreement": same.token_agreement,
                "unit": same.unit, "mismatches": same.mismatches[:4],
            }  # fmt: skip
        server.tracker.refresh()
        result["placement"] = placement(sorted(server.tracker.known))
        result["benches"] = benches
        result["within_server"] = summary(benches)
        if long_benches:
            result["long_factor"] = args.long_factor
            result["long_benches"] = long_benches
            result["within_server_long"] = summary(long_benches)
    finally:
        report = teardown(
            server.tracker, host="127.0.0.1", port=port, baseline=server.gpu_baseline,
            grace_s=profile.stop_grace_s, wait_leader=server.reap,
        )  # fmt: skip
        server.tracker.close()
        result["teardown_ok"] = report.ok
        result["seconds"] = round(time.monotonic() - t0, 1)
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
