"""The distributed probes run at the serving profile's TP: the plan, and the orchestration of
8 real processes (rendezvous failure, one rank crashing, the deadline) without a GPU.

The processes here are real, started by the same orchestrator the GPU runs use; their
"interpreter" is a shell script where only the orchestration is under test (what a rank does
is dist.py's job, run for real with torch on gloo in test_real_wheels.py).
"""

from __future__ import annotations

from pathlib import Path

import psutil

from stackgate.manifest.loading import load_stack
from validators.core.context import RunContext
from validators.runtime.distributed import distributed_checks, profile_tp
from validators.runtime.ranks import plan_ranks
from validators.runtime.runner import ProbeOutcome, probe_env, run_distributed

NCCL = {"STACKGATE_DIST_BACKEND": "nccl"}
GLOO = {"STACKGATE_DIST_BACKEND": "gloo"}


def test_ranks_come_from_the_profiles_tp() -> None:
    manifest = load_stack("cu130").manifest
    assert profile_tp(manifest) == 8
    plan = plan_ranks(8, 8, NCCL)
    assert (plan.ranks, plan.skip, plan.note) == (8, None, None)


def test_too_few_gpus_for_the_profile_is_a_skip_that_says_how_many() -> None:
    plan = plan_ranks(8, 2, NCCL)
    assert plan.skip is not None
    assert "8 ranks (TP 8) need 8 GPUs, this host has 2" in plan.skip


def test_an_explicit_rank_count_runs_and_is_named() -> None:
    plan = plan_ranks(8, 2, NCCL, 2)
    assert plan.ranks == 2 and plan.skip is None
    assert plan.note == "2 ranks by --option ranks=2; the serving profile runs TP 8"


def test_gloo_needs_no_gpus_and_tp1_has_nothing_to_probe() -> None:
    assert plan_ranks(8, 0, GLOO) == plan_ranks(8, 0, GLOO)
    assert plan_ranks(8, 0, GLOO).skip is None and plan_ranks(8, 0, GLOO).ranks == 8
    tp1 = plan_ranks(1, 2, NCCL)
    assert tp1.skip is not None and "TP 1" in tp1.skip


def test_tp1_profile_emits_no_distributed_checks_and_tp8_on_two_gpus_skips(
    tmp_path: Path,
) -> None:
    loaded = load_stack("cu130")
    passed = ProbeOutcome("PASS", "ok")
    ctx = RunContext(stack=loaded)
    out = distributed_checks(ctx, tmp_path / "python", probe_env(NCCL), {}, None, 2, passed)
    assert [r.status for r in out] == ["SKIP", "SKIP"]
    assert all("this host has 2" in r.reason for r in out)
    profile = loaded.manifest.serving["kimi-k25-tp8"].model_copy(update={"tp": 1})
    tp1 = loaded.manifest.model_copy(update={"serving": {"kimi-k25-tp8": profile}})
    ctx1 = RunContext(stack=type(loaded)(loaded.path, tp1, loaded.raw))
    assert distributed_checks(ctx1, tmp_path / "python", probe_env(NCCL), {}, None, 2, passed) == []


def _script(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def _all_gone(pids: list[int]) -> bool:
    return not any(psutil.pid_exists(p) and psutil.Process(p).status() != "zombie" for p in pids)


def test_one_rank_of_eight_crashing_kills_the_other_seven_and_names_it(tmp_path: Path) -> None:
    """Rank 5 dies at start; the others would wait in the rendezvous for minutes. The
    orchestrator must stop at once, name rank 5 and its exit code, and leave no process."""
    fake = _script(
        tmp_path,
        "python",
        'if [ "$RANK" = 5 ]; then echo "rank 5: rendezvous refused" >&2; exit 7; fi\nexec sleep 120\n',
    )
    logs = tmp_path / "logs"
    o = run_distributed(
        fake, ["nccl", "14336", "5"], world_size=8, env=probe_env(), timeout=300, log_dir=logs
    )
    assert o.status == "FAIL", o.reason
    assert "rank 5 of 8 exited 7" in o.reason and "rendezvous refused" in o.reason
    assert o.evidence["failed_rank"] == 5 and len(o.evidence["pids"]) == 8
    assert len(list(logs.glob("nccl-rank*.log"))) == 8
    assert _all_gone(o.evidence["pids"])


def test_eight_ranks_past_the_deadline_are_all_killed(tmp_path: Path) -> None:
    fake = _script(tmp_path, "python", "exec sleep 120\n")
    o = run_distributed(
        fake, ["symm_mem"], world_size=8, env=probe_env(), timeout=2, log_dir=tmp_path / "l"
    )
    assert o.status == "FAIL"
    assert "with 8 processes did not finish within 2 s; all 8 killed" in o.reason
    assert _all_gone(o.evidence["pids"])


def test_every_rank_gets_its_rank_and_the_same_rendezvous(tmp_path: Path) -> None:
    """Eight ranks see RANK 0..7, WORLD_SIZE 8 and one MASTER_PORT; the multicast-off safety
    variables reach every one of them."""
    fake = _script(
        tmp_path,
        "python",
        'echo "$RANK $WORLD_SIZE $MASTER_ADDR:$MASTER_PORT $NCCL_NVLS_ENABLE '
        '$TORCH_SYMM_MEM_DISABLE_MULTICAST"\n',
    )
    logs = tmp_path / "logs"
    o = run_distributed(
        fake, ["nccl", "1"], world_size=8, env=probe_env(), timeout=60, log_dir=logs
    )
    assert o.status == "FAIL" and "without a result" in o.reason  # no rank wrote rank 0's JSON
    lines = [(logs / f"nccl-rank{r}.log").read_text().split() for r in range(8)]
    assert [int(line[0]) for line in lines] == list(range(8))
    assert {line[1] for line in lines} == {"8"}
    assert len({line[2] for line in lines}) == 1
    assert {(line[3], line[4]) for line in lines} == {("0", "1")}
