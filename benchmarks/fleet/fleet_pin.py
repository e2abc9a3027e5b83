"""Pinning a fleet's array elements to their nodes on a real Slurm 22.05 (issue 24 gap 1).

    python benchmarks/fleet/fleet_pin.py [--nodes 10000] [--sample 2000] [--submit-only] [--no-old-probes]
        [--array-size N] [--pin-with auto|libslurm|scontrol | --abba] [--out F]

Root, Debian's slurmctld/slurmd/munge (tests/helpers/slurm_cluster.py): a one-host cluster of
8 running nodes (s0-s7), plus `--nodes` node names f00000... that slurmctld knows (State=DOWN,
partition `big`, no slurmd): a 10,000-node fleet pins each element to a node of its own, as on
a real cluster; being down, nothing runs.

1. The candidates, each on `--sample` elements of fresh held arrays (ms per element):
   - `scontrol update` one process per element, 8 at once, arrays of 1,000 (what submit did);
   - `update` lines on the stdin of 1 or 8 scontrol processes, arrays of 1,000 / 100 / 25;
   - `sbatch --nodelist=<node>` per node (one job per node, no array; a smaller sample);
   - the libslurm helper (validators/fleet/slurm/pin.py): one update RPC per element, on the
     stdin of 1 or 4 helper processes, arrays of 25 / 1,000.
2. The submit as `fleet submit` runs it (validators.fleet.submit.execute: job folder, held
   arrays of 100, stdin pinning, the squeue read-back, collector, release) for `--nodes`
   nodes, plus the `sinfo` probe that submit runs first (every node, filtered here), and the
   probes it replaced (`sinfo -N -n <every node name>`, `sinfo -N`). `--submit-only` keeps the
   candidates of the last run and measures part 2 again. `--abba` runs the whole submit four
   times in one cluster, pinned through scontrol, libslurm, libslurm, scontrol (the order
   balances the job records each run leaves behind), so their ratio comes from one run, then
   `python -m validators fleet submit` once, end to end (interpreter start to exit).

Writes benchmarks/fleet/results/fleet_pin.json (and prints it).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from stackgate.proc import run  # noqa: E402
from tests.helpers.slurm_cluster import SlurmCluster, slurm_cluster  # noqa: E402
from validators.fleet.slurm import limits, pin, states  # noqa: E402
from validators.fleet.slurm.options import SlurmOptions  # noqa: E402
from validators.fleet.spec import FleetSpec  # noqa: E402
from validators.fleet.submit import execute, plan  # noqa: E402

RUNNING = [f"s{i}" for i in range(8)]


def _held_arrays(c: SlurmCluster, script: Path, total: int, size: int) -> list[str]:
    out = []
    for start in range(0, total, size):
        count = min(size, total - start)
        argv = ["sbatch", "--parsable", "--hold", f"--array=0-{count - 1}",
                f"--output={script.parent}/%A_%a.out", str(script)]  # fmt: skip
        out.append(c.cmd(*argv).stdout.strip().split(";")[0])
    return out


def _updates(arrays: list[str], total: int, size: int) -> list[str]:
    return [
        f"update JobId={arrays[i // size]}_{i % size} NodeList={RUNNING[i % 8]}"
        for i in range(total)
    ]


def per_process(c: SlurmCluster, script: Path, total: int) -> dict[str, Any]:
    arrays = _held_arrays(c, script, total, 1000)
    argvs = [["scontrol", *line.split()] for line in _updates(arrays, total, 1000)]
    start = time.perf_counter()
    with ThreadPoolExecutor(8) as pool:
        codes = list(
            pool.map(lambda a: subprocess.run(a, env=c.env, capture_output=True).returncode, argvs)
        )
    took = time.perf_counter() - start
    c.cmd("scancel", *arrays)
    return {"how": "one scontrol process per element, 8 at once", "array_size": 1000,
            "elements": total, "s": round(took, 2), "ms_per_element": round(1000 * took / total, 2),
            "failed": sum(1 for x in codes if x)}  # fmt: skip


def stdin_fed(c: SlurmCluster, script: Path, total: int, size: int, workers: int) -> dict[str, Any]:
    arrays = _held_arrays(c, script, total, size)
    lines = _updates(arrays, total, size)
    shares = [lines[k::workers] for k in range(workers)]

    def feed(share: list[str]) -> int:
        text = "\n".join(share) + "\n"
        return subprocess.run(
            ["scontrol"], input=text, env=c.env, capture_output=True, text=True
        ).returncode

    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        codes = list(pool.map(feed, shares))
    took = time.perf_counter() - start
    c.cmd("scancel", *arrays)
    return {"how": f"update lines on the stdin of {workers} scontrol process(es)", "array_size": size,
            "elements": total, "s": round(took, 2), "ms_per_element": round(1000 * took / total, 2),
            "failed": sum(1 for x in codes if x)}  # fmt: skip


def sbatch_per_node(c: SlurmCluster, script: Path, total: int) -> dict[str, Any]:
    start = time.perf_counter()
    ids = [
        c.cmd("sbatch", "--parsable", "--hold", f"--nodelist={RUNNING[i % 8]}",
              f"--output={script.parent}/one.out", str(script)).stdout.strip()
        for i in range(total)
    ]  # fmt: skip
    took = time.perf_counter() - start
    c.cmd("scancel", *ids)
    return {"how": "sbatch --nodelist=<node> per node (one job each, serial)", "elements": total,
            "s": round(took, 2), "ms_per_element": round(1000 * took / total, 2)}  # fmt: skip


def helper_fed(c: SlurmCluster, script: Path, total: int, size: int, workers: int) -> dict[str, Any]:
    arrays = _held_arrays(c, script, total, size)
    pairs = [(f"{arrays[i // size]}_{i % size}", RUNNING[i % 8]) for i in range(total)]
    with tempfile.TemporaryDirectory() as work:
        start = time.perf_counter()
        helper = pin.build_helper(Path(work))
        built = time.perf_counter() - start
        start = time.perf_counter()
        problems = pin.pin_with_helper(helper, pairs, workers)
        took = time.perf_counter() - start
    c.cmd("scancel", *arrays)
    return {"how": f"libslurm helper, {workers} process(es)", "array_size": size,
            "elements": total, "s": round(took, 2), "ms_per_element": round(1000 * took / total, 2),
            "compile_s": round(built, 2), "failed": len(problems)}  # fmt: skip


def _cpu_of(pid: int) -> float:
    """user+sys CPU seconds of a process (its own, from /proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _own_cpu() -> float:
    """user+sys CPU seconds of this process and every child it waited for (scontrol, sbatch)."""
    me, kids = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def full_submit(
    n: int,
    workdir: Path,
    c: SlurmCluster | None = None,
    old_probes: bool = True,
    pin_with: str = "auto",
    fleet_id: str = "pin-scale",
) -> dict[str, Any]:
    nodes = [f"f{i:05d}" for i in range(n)]
    daemons = {
        p.args[0].rsplit("/", 1)[-1]: p.pid
        for p in (c.procs if c else [])
        if isinstance(p.args, list)
    }
    probe_named_s = probe_per_node_s = None
    if old_probes:
        start = time.perf_counter()
        run(["sinfo", "-h", "-N", "-n", ",".join(nodes), "-o", "%N|%T|%E"])  # what submit did
        probe_named_s = time.perf_counter() - start
        start = time.perf_counter()
        run(["sinfo", "-h", "-N", "-o", "%N|%T|%E"])  # a line per node
        probe_per_node_s = time.perf_counter() - start
    start = time.perf_counter()
    unavailable = states.probe_unavailable(nodes)  # a line per state, hostlists expanded
    probe_s = time.perf_counter() - start
    spec = FleetSpec(
        fleet_id=fleet_id, stack="cu130", stack_name="cu130", wheelhouse="/w", nodes=nodes,
        job_dir=str(workdir / "jobs" / fleet_id), checkout=str(ROOT), python=sys.executable,
        local_root="/l", slurm=SlurmOptions(partition="big", pin_with=pin_with),
    )  # fmt: skip
    start = time.perf_counter()
    planned = plan(spec, max_array=limits.limits().max_array_size)
    plan_s = time.perf_counter() - start
    ctld, munged = daemons.get("slurmctld"), daemons.get("munged")
    ctld_before = _cpu_of(ctld) if ctld else 0.0
    munged_before = _cpu_of(munged) if munged else 0.0
    own_before, load_before = _own_cpu(), os.getloadavg()[0]
    start = time.perf_counter()
    submitted = execute(planned)
    submit_s = time.perf_counter() - start
    own_s = _own_cpu() - own_before
    ctld_s = (_cpu_of(ctld) - ctld_before) if ctld else None
    munged_s = (_cpu_of(munged) - munged_before) if munged else None
    arrays = submitted["arrays"]
    held = pin.parse_requested(
        run(["squeue", "-h", "-r", "-j", ",".join(arrays), "-o", "%i|%n"]).stdout
    )
    offsets = submitted["offsets"]
    size = offsets[1] - offsets[0] if len(offsets) > 1 else n
    pinned = sum(
        1 for i, node in enumerate(nodes) if held.get(f"{arrays[i // size]}_{i % size}") == node
    )
    # What status, verdict and collect pay per array afterwards: elements.learn asks
    # `scontrol show job` once per array.
    ctld_before, own_before = (_cpu_of(ctld) if ctld else 0.0), _own_cpu()
    start = time.perf_counter()
    learned = len(states.element_states(arrays))
    learn_s = time.perf_counter() - start
    learn = {"elements": learned, "wall_s": round(learn_s, 2),
             "cpu_s_this_process_and_children": round(_own_cpu() - own_before, 2),
             "cpu_s_slurmctld": round(_cpu_of(ctld) - ctld_before, 2) if ctld else None}  # fmt: skip
    run(["scancel", *arrays, submitted["collector_job"]])
    return {
        "nodes": n,
        "pin_with": pin_with,
        "pinned_with": submitted.get("pinned_with"),
        "sinfo_probe_named_nodes_s": None if probe_named_s is None else round(probe_named_s, 2),
        "sinfo_probe_per_node_s": None if probe_per_node_s is None else round(probe_per_node_s, 2),
        "sinfo_probe_s": round(probe_s, 2),
        "probe_says_unavailable": len(unavailable),
        "plan_s": round(plan_s, 2),
        "submit_s": round(submit_s, 2),
        "submit_cpu_s_this_process_and_children": round(own_s, 2),
        "submit_cpu_s_slurmctld": None if ctld_s is None else round(ctld_s, 2),
        "submit_cpu_s_munged": None if munged_s is None else round(munged_s, 2),
        "submit_load_before": round(load_before, 2),
        "submit_load_after": round(os.getloadavg()[0], 2),
        "arrays": len(arrays),
        "array_size": size,
        "element_states_after": learn,
        "elements_pinned_as_asked": pinned,
        "commands": len(submitted["commands"]),
    }


def cli_submit(n: int, workdir: Path, c: SlurmCluster) -> dict[str, Any]:
    """`python -m validators fleet submit` itself, end to end: interpreter start, node names
    expanded by Slurm, the node probe, the plan, the job folder, the submit."""
    (workdir / "wheelhouse").mkdir(exist_ok=True)
    argv = [sys.executable, "-m", "validators", "fleet", "submit", "cu130",
            "--wheelhouse", str(workdir / "wheelhouse"), "--nodes", f"f[00000-{n - 1:05d}]",
            "--partition", "big", "--jobs-root", str(workdir / "cli-jobs"),
            "--local-root", "/l/{node}", "--fleet-id", "cli", "--json"]  # fmt: skip
    env = {**os.environ, "SLURM_CONF": str(c.conf), "STACKGATE_STATE_DIR": str(workdir / "st")}
    load = os.getloadavg()[0]
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    took = time.perf_counter() - start
    if done.returncode != 0:
        return {"exit": done.returncode, "stderr": done.stderr[-2000:]}
    submitted = json.loads(done.stdout)["submitted"]
    c.cmd("scancel", *submitted["arrays"], submitted["collector_job"])
    return {"wall_s": round(took, 2), "load_before": round(load, 2),
            "pinned_with": submitted.get("pinned_with"), "arrays": len(submitted["arrays"])}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--sample", type=int, default=2000)
    parser.add_argument(
        "--submit-only", action="store_true", help="keep the candidates measured before"
    )
    parser.add_argument(
        "--array-size",
        type=int,
        default=0,
        help="elements per pinned array, either way (default: pin.PIN_ARRAY_SIZE through "
        "scontrol, LIBSLURM_ARRAY_SIZE through libslurm)",
    )
    parser.add_argument(
        "--no-old-probes", action="store_true", help="skip the sinfo probes submit replaced"
    )
    parser.add_argument("--pin-with", choices=["auto", "libslurm", "scontrol"], default="auto")
    parser.add_argument(
        "--abba", action="store_true", help="the submit 4 times: scontrol, libslurm x2, scontrol"
    )
    parser.add_argument(
        "--cli-only", action="store_true", help="only `validators fleet submit`, end to end"
    )
    parser.add_argument(
        "--out", type=Path, default=ROOT / "benchmarks" / "fleet" / "results" / "fleet_pin.json"
    )
    args = parser.parse_args()
    if args.array_size:
        pin.PIN_ARRAY_SIZE = pin.LIBSLURM_ARRAY_SIZE = args.array_size
    workdir = Path(tempfile.mkdtemp(prefix="fleet-pin-"))
    workdir.chmod(0o755)
    script = workdir / "hold.sbatch"
    script.write_text("#!/bin/bash\n#SBATCH --no-requeue\ntrue\n")
    fake = f"f[00000-{args.nodes - 1:05d}]"
    extra = (
        f"MaxJobCount={5 * args.nodes + 10 * args.sample}",
        # DOWN: nothing ever runs there. The CLI leaves out nodes Slurm calls down, so for it
        # they start IDLE (no slurmd answers them: slurmctld marks them not responding only
        # after its first failed ping, ~SlurmdTimeout/3 = 100 s, longer than the submit takes).
        f"NodeName={fake} NodeAddr=127.0.0.1 CPUs=1 RealMemory=1024 "
        f"State={'IDLE' if args.cli_only else 'DOWN'}",
        f"PartitionName=big Nodes={fake} State=UP",
    )
    result: dict[str, Any] = {"cpus": os.cpu_count(), "load_before": os.getloadavg()[0]}
    try:
        with slurm_cluster(RUNNING, extra_conf=extra) as c:
            os.environ["SLURM_CONF"] = str(c.conf)
            n = args.sample
            if args.cli_only:
                result["cli_submit"] = [cli_submit(args.nodes, workdir, c)]
                args.out.write_text(json.dumps(result, indent=2) + "\n")
                print(json.dumps(result, indent=2))
                return
            result["candidates"] = (
                []
                if args.submit_only
                else [
                    per_process(c, script, n // 2),
                    stdin_fed(c, script, n, 1000, 1),
                    stdin_fed(c, script, n, 1000, 8),
                    stdin_fed(c, script, n, 100, 1),
                    stdin_fed(c, script, n, 100, 8),
                    stdin_fed(c, script, n, 25, 8),
                    sbatch_per_node(c, script, max(1, n // 10)),
                    helper_fed(c, script, n, 25, 1),
                    helper_fed(c, script, n, 25, 4),
                    helper_fed(c, script, n, 1000, 4),
                ]
            )
            result["pin_array_size"] = {
                "scontrol": pin.PIN_ARRAY_SIZE,
                "libslurm": pin.LIBSLURM_ARRAY_SIZE,
            }
            if args.abba:
                order = ["scontrol", "libslurm", "libslurm", "scontrol"]
                result["submits"] = [
                    full_submit(args.nodes, workdir, c, False, how, f"pin-scale-{k}")
                    for k, how in enumerate(order)
                ]
                result["cli_submit"] = cli_submit(args.nodes, workdir, c)
            else:
                result["submit"] = full_submit(
                    args.nodes, workdir, c, not args.no_old_probes, args.pin_with
                )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    result["load_after"] = os.getloadavg()[0]
    out = args.out
    if args.submit_only and out.exists():
        result["candidates"] = json.loads(out.read_text()).get("candidates", [])
        result["candidates_from_an_earlier_run"] = True
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
