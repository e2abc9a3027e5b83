"""A fleet of 10,000 nodes: the submit side on a real Slurm, the collect side on a job folder.

    python benchmarks/fleet/fleet_scale.py [--nodes 10000] [--slurm] [--collect-only] [--job DIR]
        [--baseline OLD_CHECKOUT] [--out F]

Job folder (no scheduler): N nodes that each reported PASS the way `fleet node` leaves it
(attempt claim, status.json, one ~16 KB record under records/ made like
benchmarks/records/records_scale.py's, 8 runs of 30 metrics), 1% of them lemons. Then, as subprocesses
with their wall time, CPU time and peak memory (GNU time):

- `fleet verdict --job-dir J` (read every node's files, judge, print);
- `fleet collect --job-dir J --store NEW` (the same, plus the import into an empty store).

Spec side, in this process: FleetSpec validation of N node names with the one-pass duplicate
check, against the pairwise count it replaced (measured in the same run), and `plan()` (both
scripts and every command).

`--slurm` (root, Debian's slurmctld/slurmd/munge, tests/helpers/slurm_cluster.py): a one-host
cluster of 8 nodes with MaxArraySize=1001 (Slurm's default) and MaxJobCount=60000, and the submit path's Slurm work
for N elements: the held arrays (`sbatch`, N/1001 of them), N pinning `scontrol update`s
(pin.PIN_WORKERS at once; element i pinned to node i mod 8: the cluster has 8 nodes, the
cost is per update), the collector's `sbatch`; then everything is cancelled.

Writes benchmarks/fleet/results/fleet_scale.json (and prints it).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.records.records_scale import synthetic_record, timed_rusage  # noqa: E402
from stackgate.proc import run  # noqa: E402
from validators.fleet.slurm import limits, pin, submission  # noqa: E402
from validators.fleet.spec import FleetSpec  # noqa: E402
from validators.fleet.status import NodeStatus, claim_attempt, write_status  # noqa: E402
from validators.fleet.submit import plan  # noqa: E402
from validators.records.model import BuildFacts  # noqa: E402

DECODE = "serve-bench.single_stream/single_stream_decode_tok_s"


def _spec(nodes: list[str], job_dir: Path) -> FleetSpec:
    return FleetSpec(
        fleet_id="scale", stack="cu130", stack_name="cu130", wheelhouse="/w", nodes=nodes,
        job_dir=str(job_dir), checkout=str(ROOT), python=sys.executable, local_root="/l",
    )  # fmt: skip


def spec_side(n: int, workdir: Path) -> dict[str, Any]:
    nodes = [f"gpu{i:05d}" for i in range(n)]
    start = time.perf_counter()
    spec = _spec(nodes, workdir / "job")
    validate_s = time.perf_counter() - start
    start = time.perf_counter()
    sorted({x for x in nodes if nodes.count(x) > 1})  # the check it replaced
    pairwise_s = time.perf_counter() - start
    start = time.perf_counter()
    planned = plan(spec)
    plan_s = time.perf_counter() - start
    return {
        "spec_validation_s": round(validate_s, 4),
        "old_pairwise_duplicate_check_s": round(pairwise_s, 3),
        "plan_s": round(plan_s, 3),
        "plan_commands": len(planned.commands),
    }


def per_node_side(sizes: list[int], workdir: Path) -> list[dict[str, Any]]:
    """What one node step (and each node's judging) pays that grows with the fleet: reading
    and validating fleet.json (every node name, the one-pass duplicate check), the index
    dict, and finding its Slurm element among N/100 arrays. Best of 5, in this process."""
    from validators.fleet.elements import Submission
    from validators.fleet.spec import read_spec

    def best(fn: Any) -> float:
        times = []
        for _ in range(5):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return min(times)

    out = []
    for n in sizes:
        nodes = [f"gpu{i:06d}" for i in range(n)]
        path = workdir / f"fleet-{n}.json"
        path.write_text(_spec(nodes, workdir / "job").to_json())
        spec = read_spec(path)
        arrays = [str(1000 + a) for a in range((n + 99) // 100)]
        submission = Submission(
            scheduler="slurm", arrays=arrays, offsets=[100 * a for a in range(len(arrays))]
        )
        out.append({
            "nodes": n,
            "read_spec_ms": round(1000 * best(functools.partial(read_spec, path)), 2),
            "index_dict_ms": round(1000 * best(spec.index_of), 2),
            "element_of_us": round(1e6 * best(functools.partial(submission.element_of, n - 1)), 2),
            "spec_bytes": path.stat().st_size,
        })  # fmt: skip
    return out


def make_job(n: int, job_dir: Path) -> dict[str, Any]:
    rng_np = __import__("numpy").random.default_rng(n)
    rng = random.Random(n)
    nodes = [f"gpu{i:05d}" for i in range(n)]
    spec = _spec(nodes, job_dir)
    job_dir.mkdir(parents=True)
    (job_dir / "fleet.json").write_text(spec.to_json())
    build = BuildFacts(lock_sha256="1" * 64, env_tree_sha256="2" * 64, python="3.12.8")
    start = time.perf_counter()
    total = 0
    base = synthetic_record(0, rng_np)  # one shape for all; each node's copy is its own
    for i, node in enumerate(nodes):
        slow = 0.9 if i % 100 == 7 else 1.0  # 1% lemons, 10% slower
        metrics = dict(base.metrics)
        metrics[DECODE] = [60.0 * slow * (1 + rng.gauss(0, 0.0074)) for _ in range(8)]
        record = base.model_copy(
            update={
                "stack": "cu130", "note": f"fleet scale node {node}", "build": build,
                "host": base.host.model_copy(update={"hostname": node}), "metrics": metrics,
            }
        ).sealed()  # fmt: skip
        rel = f"records/cu130/{record.created_stamp}-{record.short_id}.json"
        (job_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        text = record.to_json()
        (job_dir / rel).write_text(text)
        total += len(text)
        claim_attempt(job_dir, node, None, 0)
        write_status(job_dir, NodeStatus(
            fleet_id="scale", node=node, index=i, outcome="PASS", phase="done", exit_code=0,
            record_id=record.record_id, record_file=rel,
        ))  # fmt: skip
    return {"nodes": n, "record_bytes": total, "make_s": round(time.perf_counter() - start, 1)}


def _loaded(argv: list[str], env: dict[str, str]) -> dict[str, Any]:
    """timed_rusage (wall, CPU of the command and its workers, peak RSS) with the machine's
    1-minute load average before and after: the wall time means little without it."""
    before = os.getloadavg()[0]
    out = timed_rusage(argv, env)
    return {**out, "load_before": round(before, 2), "load_after": round(os.getloadavg()[0], 2)}


def _cli_of(checkout: Path) -> list[str]:
    """`python -m validators` with another checkout's code (what this change is measured
    against, in the same run): its folder first on sys.path."""
    boot = f"import runpy, sys; sys.path.insert(0, {str(checkout)!r}); runpy.run_module('validators', run_name='__main__')"
    return [sys.executable, "-c", boot]


def collect_side(
    n: int, workdir: Path, job: Path | None = None, baseline: Path | None = None
) -> dict[str, Any]:
    """job: a job folder made by an earlier run (`--job`), made here when missing.
    baseline: a checkout of the code before (`git worktree add DIR <commit>`): its collect is
    measured on the same job folder, right after this one's."""
    job = job or workdir / "job"
    made = (
        make_job(n, job) if not (job / "fleet.json").exists() else {"nodes": n, "reused": str(job)}
    )
    (job / "verdict.json").unlink(missing_ok=True)
    env = {**os.environ, "STACKGATE_STATE_DIR": str(workdir / "state"), "NO_COLOR": "1"}
    cli = [sys.executable, "-m", "validators", "fleet"]
    verdict = _loaded([*cli, "verdict", "--job-dir", str(job), "--json"], env)
    collect = _loaded(
        [*cli, "collect", "--job-dir", str(job), "--store", str(workdir / "team.sqlite"), "--json"],
        env,
    )
    counts = json.loads((job / "verdict.json").read_text())["counts"]
    out = {**made, "verdict": verdict, "collect": collect, "counts": counts}
    if baseline is not None:
        argv = [*_cli_of(baseline), "fleet", "collect", "--job-dir", str(job),
                "--store", str(workdir / "team-baseline.sqlite"), "--json"]  # fmt: skip
        out["collect_baseline"] = {**_loaded(argv, env), "checkout": str(baseline)}
        out["collect_cpu_ratio_baseline_over_this"] = round(
            out["collect_baseline"]["cpu_s"] / collect["cpu_s"], 2
        )
    return out


def slurm_side(n: int, workdir: Path) -> dict[str, Any]:
    from tests.helpers.slurm_cluster import slurm_cluster

    nodes = [f"s{i}" for i in range(8)]
    script = workdir / "hold.sbatch"
    script.write_text("#!/bin/bash\n#SBATCH --no-requeue\ntrue\n")
    # Slurm's default MaxJobCount (10,000 job records) is below what 10,000 pinned elements
    # (each its own record once pinned) plus the collector need; a cluster that runs such a
    # fleet raises it (docs/fleet.md). MaxArraySize stays at Slurm's default.
    with slurm_cluster(nodes, extra_conf=("MaxJobCount=60000",)) as cluster:
        os.environ["SLURM_CONF"] = str(cluster.conf)
        limit = limits.limits().max_array_size
        parts = submission.chunks(n, limit)
        start = time.perf_counter()
        arrays = []
        for chunk in parts:
            argv = ["sbatch", "--parsable", "--hold", f"--array=0-{chunk.count - 1}",
                    f"--output={workdir}/%A_%a.out", str(script)]  # fmt: skip
            arrays.append(submission._job_id(run(argv).stdout))
        sbatch_s = time.perf_counter() - start
        pins = [
            [
                "scontrol",
                "update",
                f"JobId={arrays[i // limit]}_{i % limit}",
                f"NodeList={nodes[i % 8]}",
            ]
            for i in range(n)
        ]
        start = time.perf_counter()
        with pin.choose_pin_way(True, "auto") as way:
            pin.pin_all(pins, way)
        pin_s = time.perf_counter() - start
        start = time.perf_counter()
        run(["sbatch", "--parsable", f"--dependency=afterany:{':'.join(arrays)}",
                   f"--output={workdir}/c.out", str(script)])  # fmt: skip
        collector_s = time.perf_counter() - start
        cluster.cmd("scancel", *arrays)
    return {
        "max_array_size": limit,
        "arrays": len(arrays),
        "sbatch_arrays_s": round(sbatch_s, 2),
        "pin_updates": n,
        "pin_workers": pin.PIN_WORKERS,
        "pin_s": round(pin_s, 1),
        "pin_ms_per_update": round(1000 * pin_s / n, 2),
        "collector_sbatch_s": round(collector_s, 2),
        "submit_slurm_total_s": round(sbatch_s + pin_s + collector_s, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--slurm", action="store_true")
    parser.add_argument("--no-collect", action="store_true")
    parser.add_argument("--collect-only", action="store_true", help="no spec or per-node side")
    parser.add_argument("--job", type=Path, help="job folder to reuse (made there when missing)")
    parser.add_argument("--baseline", type=Path, help="another checkout: its collect too, same job")
    parser.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "fleet" / "results" / "fleet_scale.json"
    )
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="fleet-scale-"))
    result: dict[str, Any] = {"nodes": args.nodes, "cpus": os.cpu_count()}
    try:
        if not args.collect_only:
            result["spec"] = spec_side(args.nodes, workdir)
            result["per_node"] = per_node_side([1_000, 10_000, 30_000], workdir)
        if not args.no_collect:
            result["collect"] = collect_side(args.nodes, workdir, args.job, args.baseline)
        if args.slurm:
            result["slurm"] = slurm_side(args.nodes, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    out = args.out
    if args.no_collect and out.exists():  # keep the collect side measured in an earlier run
        kept = json.loads(out.read_text())
        if kept.get("nodes") == args.nodes and "collect" in kept:
            result["collect"] = kept["collect"]
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
