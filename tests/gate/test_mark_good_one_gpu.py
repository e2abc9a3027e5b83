"""mark-good's qualify() on the real SGLang run reports of the lent ONE-H200 machine (issue 22,
benchmarks/h200_sglang/results/machine1): every run there was refused for SKIPs alone, the
GPU-link checks a one-GPU host cannot run (host.interconnect, host.p2p) and the finding the
stack accepts in its own manifest (static.dists.requirements). Those no longer refuse a TP-1
stack; what is really missing or wrong still does."""

from __future__ import annotations

from pathlib import Path

from stackgate.manifest.loading import load_stack
from validators.records.compose import qualify
from validators.records.resolve import read_report

ROOT = Path(__file__).resolve().parents[2]
# Copied from benchmarks/h200_sglang/results/machine1 (runs0/ and chain/).
DATA = ROOT / "tests" / "data" / "h200_sglang"
NO_REFERENCE = [DATA / "one-gpu-runs" / f"run-{i}.json" for i in (1, 2, 3)]
WITH_REFERENCE = [DATA / "one-gpu-chain" / f"run-{i}.json" for i in (1, 2)]


def _skips(path: Path) -> set[str]:
    return {r.check for r in read_report(path).results if r.status == "SKIP"}


def test_the_h200_runs_hold_the_skips_in_question() -> None:
    for path in NO_REFERENCE + WITH_REFERENCE:
        assert {"host.interconnect", "host.p2p", "static.dists.requirements"} <= _skips(path)


def test_one_gpu_link_skips_and_accepted_findings_do_not_refuse_a_tp1_stack() -> None:
    problems = qualify(load_stack("h200-sglang"), [read_report(p) for p in NO_REFERENCE])
    assert not [p for p in problems if "host.interconnect" in p or "host.p2p" in p]
    assert not [p for p in problems if "static.dists.requirements" in p]
    # still refused: no greedy reference was recorded for these runs
    assert any("serve-bench.correctness.greedy SKIP" in p for p in problems)


def test_runs_that_disagree_with_the_reference_are_still_refused() -> None:
    problems = qualify(load_stack("h200-sglang"), [read_report(p) for p in WITH_REFERENCE])
    greedy = [p for p in problems if "serve-bench.correctness.greedy FAIL" in p]
    assert len(greedy) == 2 and "exact match" in greedy[0]


def test_a_stack_that_spans_gpus_is_refused_for_the_same_link_skips() -> None:
    problems = qualify(load_stack("cu130"), [read_report(NO_REFERENCE[0])])
    assert any("host.interconnect SKIP" in p for p in problems)
    assert any("host.p2p SKIP" in p for p in problems)


def test_an_acceptance_the_manifest_does_not_make_refuses(tmp_path: Path) -> None:
    text = (ROOT / "stacks" / "h200-sglang.toml").read_text(encoding="utf-8")
    marker = '"static.dists.requirements" = "by design of this example'
    assert marker in text
    edited = tmp_path / "h200-sglang.toml"
    edited.write_text(text.replace(marker, marker.replace("by design", "BY DESIGN")))
    problems = qualify(load_stack(str(edited)), [read_report(NO_REFERENCE[0])])
    assert any("static.dists.requirements SKIP" in p for p in problems)
