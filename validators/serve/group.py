"""The serve-bench validator group: launch the profile, judge readiness, output and speed, and
leave the host as clean as it was.

Checks, in order (each a Result in group 'serve-bench'):
  launch       the profile became an argv and a free port (or a clear port clash)
  ready        ready line + health 200, or crash (exit / fatal signature) / hang / timeout
  correctness.greedy / correctness.arithmetic   against the known-good recording
  single_stream   decode tok/s at C=1 against the manifest threshold
  sweep        the concurrency sweep; every request must succeed
  token_counts every measured request's claimed completion tokens against its streamed text
               re-counted with the model's tokenizer in the env (recount.py); SKIP naming why
               when no tokenizer loads
  serving      after the load: still running, no fatal signature logged meanwhile
  teardown     no process of ours left, NVML clean, GPU memory released, port free
Teardown runs whatever happened before it. Context options (RunContext.options, all strings):
reference, record_reference, jsonl, concurrencies ("1,4,16"), port, log_dir, host.
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from stackgate.engines import ENGINES
from stackgate.errors import BadInput, StackgateError
from stackgate.host.snapshot import host_snapshot
from stackgate.manifest import BenchSettings, ServingProfile, Thresholds
from stackgate.model import validation_problems
from stackgate.output import console_err
from stackgate.safe_text import redact_file
from validators.core.checks import ServeBenchCheck
from validators.core.context import RunContext
from validators.core.results import Measurement, Result, Status, make_result
from validators.serve import bench_client, correctness, measures, preconditions, prime_shapes
from validators.serve.adapters import LaunchSpec, build_launch
from validators.serve.interrupts import Interrupts
from validators.serve.lifecycle import ReadyOutcome, Server, choose_port, start, wait_ready
from validators.serve.logwatch import LogWatch
from validators.serve.metadata import run_metadata
from validators.serve.recount import Recheck
from validators.serve.teardown import teardown

GROUP = "serve-bench"


def _result(
    check: ServeBenchCheck,
    status: Status,
    reason: str,
    evidence: dict[str, Any],
    t0: float,
    measured: Sequence[Measurement] = (),
) -> Result:
    return make_result(
        check, status, reason, evidence, time.monotonic() - t0, group=GROUP, measurements=measured
    )


def _launch(status: Status, reason: str, evidence: dict[str, Any], t0: float) -> Result:
    return _result("serve-bench.launch", status, reason, evidence, t0)


def _say(line: str) -> None:
    """One plain progress line on stderr (works in CI logs)."""
    console_err().print(f"  [serve] {line}", highlight=False, markup=False)


class _PhasePrinter:
    """Phase changes and weight-loading progress on stderr (plain lines: works in CI logs)."""

    def __init__(self) -> None:
        self.phase = ""
        self.step = -1

    def __call__(self, watch: LogWatch) -> None:
        if watch.phase != self.phase:
            self.phase = watch.phase
            _say(f"phase: {watch.phase}")
        progress = watch.progress
        if progress is not None and progress.total:
            step = int(progress.fraction * 10)
            if step != self.step:
                self.step = step
                bar = "#" * step + "-" * (10 - step)
                _say(f"{progress.desc}: [{bar}] {progress.done}/{progress.total}")


def _python(ctx: RunContext) -> str | None:
    if ctx.python is not None:
        return str(ctx.python)
    return None


def _bench_settings(profile: ServingProfile, ctx: RunContext) -> BenchSettings:
    return bench_settings(profile, ctx.options.serve.concurrencies)


def bench_settings(profile: ServingProfile, levels: tuple[int, ...] | None) -> BenchSettings:
    """The profile's benchmark, with the levels given on the command line (if any)."""
    if not levels:
        return profile.bench
    # Validated again, not model_copy'd: the levels and the profile's sizes are bounded together
    # (MAX_LEVEL_PROMPT_TOKENS), so a level given here cannot build a prompt array of many GB.
    try:
        return BenchSettings.model_validate(
            profile.bench.model_dump() | {"concurrencies": list(levels)}
        )
    except ValidationError as exc:
        raise BadInput(
            f"concurrencies {','.join(map(str, levels))}: not a benchmark this profile can run",
            details=validation_problems(exc),
        ) from None


def run_group(ctx: RunContext, interrupts: Interrupts | None = None) -> list[Result]:
    """Run serve-bench for ctx.serve_profile (or the manifest's validation.serve_profile).

    SIGTERM/SIGINT are recorded by `interrupts` (the serve-bench command's, which owns them
    for the whole command) or by the group's own while it runs, and end it through
    KeyboardInterrupt only where unwinding is safe: never between the launch and the `try`
    that tears the server down, never inside the teardown (validators/serve/interrupts.py)."""
    if interrupts is None:
        with Interrupts().installed() as own:
            return _run_group(ctx, own)
    return _run_group(ctx, interrupts)


def _chosen(ctx: RunContext, t0: float) -> tuple[str, ServingProfile, str] | Result:
    """The profile to serve and the interpreter to serve it with, or why nothing is launched."""
    manifest = ctx.stack.manifest
    name = ctx.serve_profile or manifest.validation.serve_profile
    if name is None:
        return _launch("SKIP", "no serving profile given and none in [validation]", {}, t0)
    profile = manifest.serving.get(name)
    if profile is None:
        known = ", ".join(sorted(manifest.serving)) or "none"
        return _launch("ERROR", f"unknown serving profile '{name}' (known: {known})", {}, t0)
    _bench_settings(profile, ctx)  # levels given as options are bad input before any launch
    python = _python(ctx)
    if python is None and ENGINES[profile.engine].needs_env:
        return _launch("SKIP", "no environment given (--env): nothing to serve from", {}, t0)
    unmet = preconditions.check(profile, ctx.stack.folder)
    if unmet is not None:  # in seconds, before anything is launched
        return _launch(unmet.status, unmet.reason, {"launched": False}, t0)
    return name, profile, python or sys.executable


def _run_group(ctx: RunContext, intr: Interrupts) -> list[Result]:
    t0 = time.monotonic()
    chosen = _chosen(ctx, t0)
    if isinstance(chosen, Result):
        return [chosen]
    name, profile, python = chosen
    host = ctx.options.serve.host
    # The stack's NCCL tuning belongs to the interconnect: take the one asked for, else the
    # one NVML sees (PCIe-only 8x RTX PRO 6000 -> pcie profile), else none.
    topology = ctx.topology or host_snapshot().topology
    ctx = dataclasses.replace(ctx, topology=topology)
    try:
        port, why = choose_port(host, ctx.options.serve.port or profile.port, profile.engine)
        spec = build_launch(
            ctx.stack.manifest, profile, python=python, host=host, port=port, topology=topology
        )
    except StackgateError as exc:
        return [_launch("FAIL", exc.message, {"details": exc.details}, t0)]
    if ctx.out_dir is None:
        # Never litter the working directory: logs and records go to a fresh folder, named in
        # the results' evidence.
        ctx = dataclasses.replace(ctx, out_dir=Path(tempfile.mkdtemp(prefix="stackgate-serve-")))
    log_dir = ctx.options.serve.log_dir or (ctx.out_dir or Path()) / "serve-logs"
    log_path = log_dir / f"{ctx.stack.manifest.name}-{name}-{time.strftime('%Y%m%d-%H%M%S')}.log"
    bin_dir = Path(python).parent if ctx.python is not None else None
    results: list[Result] = []
    intr.checkpoint()  # the last point where a signal ends the run with nothing launched
    # A signal from here to the `try` is only recorded: a KeyboardInterrupt raised inside
    # start() after the Popen would leave the server running with nobody to stop it.
    server = start(spec, log_path, path_prepend=bin_dir)
    try:  # nothing between the start and this try: teardown must always run
        intr.checkpoint()
        launch_evidence = {
            "argv": spec.argv,
            "env": spec.env,
            "log": str(log_path),
            "notes": spec.notes,
            "pid": server.popen.pid,
            "topology": topology or "none",
        }
        why_port = f"{spec.engine} started on {host}:{port} ({why})"
        results.append(_launch("PASS", why_port, launch_evidence, t0))
        results += _while_up(ctx, name, profile, spec, server, python, intr)
    finally:
        results.append(_stopped(server, profile, host, port))
    return results


def _stopped(server: Server, profile: ServingProfile, host: str, port: int) -> Result:
    """Tear the server down. Signals are only recorded in here (no interruptible block): a
    second Ctrl-C or SIGTERM cannot cut the teardown short; one that came now still ends in
    exit 130."""
    t0 = time.monotonic()
    _say("teardown")
    report = teardown(
        server.tracker,
        host=host,
        port=port,
        baseline=server.gpu_baseline,
        grace_s=profile.stop_grace_s,
        wait_leader=server.reap,
    )
    server.tracker.close()
    redact_file(server.log_path)  # the engine wrote it itself: a token it printed is hidden now
    report.evidence["log"] = str(server.log_path)
    status: Status = "PASS" if report.ok else "FAIL"
    return _result("serve-bench.teardown", status, report.reason, report.evidence, t0)


def _while_up(
    ctx: RunContext,
    name: str,
    profile: ServingProfile,
    spec: LaunchSpec,
    server: Server,
    python: str,
    intr: Interrupts,
) -> list[Result]:
    t0 = time.monotonic()
    outcome: ReadyOutcome = wait_ready(
        server,
        load_timeout_s=profile.load_timeout_s,
        hang_timeout_s=profile.hang_timeout_s,
        on_update=_PhasePrinter(),
        checkpoint=intr.checkpoint,
    )
    status: Status = "PASS" if outcome.verdict == "ready" else "FAIL"
    evidence = {"verdict": outcome.verdict, **outcome.evidence}
    results = [_result("serve-bench.ready", status, outcome.reason, evidence, t0)]
    later: tuple[ServeBenchCheck, ...] = (
        "serve-bench.correctness.greedy",
        "serve-bench.correctness.arithmetic",
        "serve-bench.single_stream",
        "serve-bench.sweep",
        "serve-bench.token_counts",
        "serve-bench.serving",
    )
    if outcome.verdict != "ready":
        why = f"server not ready ({outcome.verdict})"
        return results + [_result(c, "SKIP", why, {}, time.monotonic()) for c in later]
    t1 = time.monotonic()
    results += _correctness(ctx, name, profile, spec, intr)
    intr.checkpoint()
    results += _benchmark(ctx, name, profile, spec, python, intr)
    intr.checkpoint()
    results.append(_serving_health(server, t1))
    return results


def _serving_health(server: Server, t0: float) -> Result:
    """After the load: a rank that died mid-benchmark may leave a server that still answers
    some requests; its log and its exit status say so."""
    server.read_log()
    watch = server.watch
    code = server.popen.poll()
    evidence: dict[str, Any] = {"log": str(server.log_path)}
    if watch.fatal is not None:
        evidence["last_log_lines"] = watch.last_lines(20)
        reason = f"fatal signature '{watch.fatal.label}' while serving: {watch.fatal.line}"
        return _result("serve-bench.serving", "FAIL", reason, evidence, t0)
    if code is not None:
        evidence["last_log_lines"] = watch.last_lines(20)
        return _result(
            "serve-bench.serving",
            "FAIL",
            f"server exited with code {code} while serving",
            evidence,
            t0,
        )
    return _result(
        "serve-bench.serving", "PASS", "still running, no fatal signature in the log", evidence, t0
    )


def _reference_path(ctx: RunContext, profile: ServingProfile) -> Path | None:
    given = ctx.options.serve.reference
    if given:
        return given
    if profile.correctness_reference:
        return ctx.stack.folder / profile.correctness_reference
    return None


_GREEDY: ServeBenchCheck = "serve-bench.correctness.greedy"
_ARITHMETIC: ServeBenchCheck = "serve-bench.correctness.arithmetic"


def _correctness(
    ctx: RunContext, name: str, profile: ServingProfile, spec: LaunchSpec, intr: Interrupts
) -> list[Result]:
    t0 = time.monotonic()
    _say("correctness")
    try:
        # Each request may wait up to request_timeout_s: a signal cuts it short.
        with intr.interruptible():
            greedy, arithmetic = correctness.collect(
                spec.base_url,
                spec.model,
                timeout_s=profile.bench.request_timeout_s,
                checkpoint=intr.checkpoint,
            )
    except Exception as exc:  # a server that answers garbage HTTP is a failed stack
        reason = f"greedy requests failed: {type(exc).__name__}: {exc}"
        return [_result(c, "FAIL", reason, {}, t0) for c in (_GREEDY, _ARITHMETIC)]
    correct, wrong = correctness.arithmetic_score(arithmetic)
    this_run = f"{correct}/{len(arithmetic)}"
    record_to = ctx.options.serve.record_reference
    if record_to:
        correctness.record(
            record_to,
            stack=ctx.stack.manifest.name,
            profile=name,
            model=spec.model,
            greedy=greedy,
            arithmetic=arithmetic,
        )
        msg = f"recorded {len(greedy)} greedy outputs as the reference in {record_to}"
        return [
            _result(_GREEDY, "PASS", msg, {"reference": record_to}, t0),
            _result(
                _ARITHMETIC,
                "PASS",
                f"{this_run} correct, recorded as the reference",
                {"wrong": wrong[:5]},
                t0,
            ),
        ]
    ref_path = _reference_path(ctx, profile)
    if ref_path is None or not ref_path.is_file():
        return _unjudged(ref_path, greedy, correct, this_run, t0)
    ref = correctness.load_reference(ref_path)
    thresholds = ctx.stack.manifest.validation.thresholds
    arith_status: Status = "PASS" if correct >= ref.arithmetic_correct else "FAIL"
    return [
        _greedy_vs(ref, greedy, thresholds, t0),
        _result(
            _ARITHMETIC,
            arith_status,
            f"{this_run} correct (known-good: {ref.arithmetic_correct})",
            {"correct": correct, "reference_correct": ref.arithmetic_correct, "wrong": wrong[:5]},
            t0,
        ),
    ]


def _unjudged(
    ref_path: Path | None, greedy: list[correctness.Sample], correct: int, this_run: str, t0: float
) -> list[Result]:
    """No known-good recording: both checks SKIP, saying how to make one."""
    where = f" at {ref_path}" if ref_path else ""
    why = (
        f"no known-good reference{where}; record one on the known-good stack "
        "(serve-bench --record-reference PATH, or validators run --option "
        "record_reference=PATH)"
    )
    samples = {"samples": [s.text[:60] for s in greedy[:3]]}
    return [
        _result(_GREEDY, "SKIP", why, samples, t0),
        _result(_ARITHMETIC, "SKIP", f"{why} (this run: {this_run})", {"correct": correct}, t0),
    ]


def _greedy_vs(
    ref: correctness.Reference, greedy: list[correctness.Sample], thresholds: Thresholds, t0: float
) -> Result:
    """This run's greedy outputs against the known-good recording, at the manifest's minimums."""
    cmp = correctness.compare(ref, greedy)
    exact_min = thresholds.correctness_exact_match_min
    agreement_min = thresholds.correctness_token_agreement_min
    ok = cmp.exact_match >= exact_min and cmp.token_agreement >= agreement_min
    reason = (
        f"exact match {cmp.exact_match:.0%} (min {exact_min:.0%}), "
        f"{cmp.unit} agreement {cmp.token_agreement:.0%} "
        f"(min {agreement_min:.0%}) vs {ref.stack}/{ref.profile}"
    )
    evidence = {
        "exact_match": cmp.exact_match,
        "token_agreement": cmp.token_agreement,
        "unit": cmp.unit,
        "mismatches": cmp.mismatches,
        "reference": correctness.reference_summary(ref),
    }
    return _result(_GREEDY, "PASS" if ok else "FAIL", reason, evidence, t0)


def _benchmark(
    ctx: RunContext,
    name: str,
    profile: ServingProfile,
    spec: LaunchSpec,
    python: str,
    intr: Interrupts,
) -> list[Result]:
    settings = _bench_settings(profile, ctx)
    target = bench_client.Target(spec.base_url, spec.model)
    metadata = run_metadata(ctx, name, spec, python)
    intr.checkpoint()  # run_level owns the signals while its loop runs (owned_loop.py)
    out_dir = ctx.out_dir or Path(tempfile.gettempdir())  # run_group always sets it
    jsonl = ctx.options.serve.jsonl or out_dir / "serve-bench.jsonl"
    threshold = ctx.stack.manifest.validation.thresholds.single_stream_decode_tok_s
    t0 = time.monotonic()
    # The server's token counts are claims: the env's tokenizer re-counts what it streamed.
    with intr.interruptible():
        recheck = Recheck.start(python, profile)
    try:
        results = _levels(settings, target, metadata, jsonl, threshold, recheck, intr, t0)
    finally:
        recheck.close()
    status, reason, evidence = recheck.verdict()
    results.append(_result("serve-bench.token_counts", status, reason, evidence, t0))
    return results


def _levels(
    settings: BenchSettings,
    target: bench_client.Target,
    metadata: dict[str, Any],
    jsonl: Path,
    threshold: float | None,
    recheck: Recheck,
    intr: Interrupts,
    t0: float,
) -> list[Result]:
    sizes = prime_shapes.burst_sizes(settings)
    _say(f"priming prefill shapes: bursts of {sizes[0]}..{sizes[-1]} prompts")
    primed = prime_shapes.prime(target, settings, pending=intr.pending)
    _say("single-stream decode")
    single = bench_client.run_level(
        target, settings, 1, settings.single_stream_requests, pending=intr.pending, check=recheck
    )
    single["single_stream_decode_tok_s"] = bench_client.decode_tok_s(single)
    bench_client.append_jsonl(
        jsonl, [bench_client.bench_record(settings, single, metadata, "single-stream")]
    )
    ev = {"jsonl": str(jsonl)}
    results = [_single_stream(single, settings, threshold, primed | ev, t0)]
    t1 = time.monotonic()
    levels: list[dict[str, Any]] = []
    for conc in settings.concurrencies:
        _say(f"concurrency {conc}")
        intr.checkpoint()
        metrics = bench_client.run_level(
            target, settings, conc, pending=intr.pending, check=recheck
        )
        bench_client.append_jsonl(
            jsonl, [bench_client.bench_record(settings, metrics, metadata, f"sweep-c{conc}")]
        )
        levels.append(metrics)
    results.append(_sweep(levels, ev, t1))
    return results


_SINGLE_KEPT = (
    "single_stream_decode_tok_s",
    "output_throughput",
    "median_tpot_ms",
    "mean_ttft_ms",
    "completed",
    "failed",
    "errors",
)


def _single_stream(
    single: dict[str, Any],
    settings: BenchSettings,
    threshold: float | None,
    extra: dict[str, Any],
    t0: float,
) -> Result:
    """Decode speed at C=1: every request must succeed, and the speed reach the threshold."""
    tok_s = single["single_stream_decode_tok_s"]
    kept = {k: single[k] for k in _SINGLE_KEPT if k in single}
    if single["failed"]:
        status: Status = "FAIL"
        reason = f"{single['failed']} of {settings.single_stream_requests} requests failed"
    elif threshold is None:
        status, reason = "PASS", f"{tok_s:.1f} tok/s (no threshold in the manifest)"
    else:
        status = "PASS" if tok_s >= threshold else "FAIL"
        reason = f"{tok_s:.1f} tok/s single-stream decode (threshold {threshold:.1f})"
    measured = measures.measurements(kept, None)
    return _result("serve-bench.single_stream", status, reason, kept | extra, t0, measured)


def _sweep(levels: list[dict[str, Any]], extra: dict[str, Any], t0: float) -> Result:
    """The concurrency sweep: every request must succeed; the peak is reported."""
    failed = sum(int(m["failed"]) for m in levels)
    # Every level's numbers as typed measurements (the records read them: records/extract.py);
    # the levels' bench_serving fields stay in the evidence for people, without the
    # per-request samples (those are in the measurements).
    measured = [x for m in levels for x in measures.measurements(m, int(m["max_concurrency"]))]
    summary = [
        {k: v for k, v in m.items() if k != "errors" and k not in measures.SAMPLES} for m in levels
    ]
    best = max(levels, key=lambda m: float(m["output_throughput"]))
    status: Status = "FAIL" if failed else "PASS"
    reason = (
        f"{failed} request(s) failed in the sweep"
        if failed
        else f"peak {best['output_throughput']:.1f} tok/s at C={best['max_concurrency']}"
    )
    errors = sorted({e for m in levels for e in m.get("errors", [])})[:5]
    evidence = {"levels": summary, "errors": errors} | extra
    return _result("serve-bench.sweep", status, reason, evidence, t0, measured)
