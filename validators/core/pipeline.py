"""Run validator groups cheapest first and build the Report.

Order and modules: stackgate.validator_groups (host, static, runtime, serve-bench). A group
with a FAIL or ERROR stops the run unless keep_going; the groups not run are listed with why.
Groups are imported lazily, when they run.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import cast

from stackgate.build_record import build_record_path, read_build_record
from stackgate.errors import BadInput, StackgateError
from stackgate.validator_groups import MODULES, ORDER, SPECS, ValidatorGroup
from validators.core.checks import available_check, crashed_check
from validators.core.context import GroupRunner, RunContext
from validators.core.host_facts import HostFacts
from validators.core.results import Report, Result, make_result


def load_group(name: ValidatorGroup) -> GroupRunner | str:
    """The group's run_group, or why it cannot be loaded."""
    module_name = MODULES[name]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            return f"{name} not available ({module_name} is not installed in this checkout)"
        return f"{name} cannot be imported: {exc}"
    runner = getattr(module, "run_group", None)
    if not callable(runner):
        return f"{name} not available ({module_name} has no run_group)"
    return cast(GroupRunner, runner)


def apply_accepted(
    results: Sequence[Result],
    accepted: Mapping[str, str],
    refused: Mapping[str, str] | None = None,
) -> list[Result]:
    """The stack's word on its findings (validation.accepted_findings / refused_findings): an
    accepted FAIL becomes a SKIP that keeps both the stack's reason and the finding; an accepted
    SKIP or WARN (a PASS whose evidence says severity WARN) keeps its status and says so; a
    refused WARN becomes a FAIL. Nothing else changes, and nothing is hidden."""
    refused = refused or {}
    out: list[Result] = []
    for r in results:
        warn = r.status == "PASS" and r.evidence.get("severity") == "WARN"
        why = accepted.get(r.check)
        if warn and (no := refused.get(r.check)) is not None:
            out.append(
                r.model_copy(
                    update={
                        "status": "FAIL",
                        "reason": f"refused by the stack (validation.refused_findings): {no} "
                        f"-- finding: {r.reason}",
                        "evidence": {**r.evidence, "refused": no},
                    }
                )
            )
            continue
        if why is None or not (warn or r.status in ("FAIL", "SKIP")):
            out.append(r)
            continue
        out.append(
            r.model_copy(
                update={
                    "status": "PASS" if warn else "SKIP",
                    "reason": f"accepted by the stack (validation.accepted_findings): {why} "
                    f"-- finding: {r.reason}",
                    "evidence": {**r.evidence, "accepted": why},
                }
            )
        )
    return out


def _recorded_tree(env: Path | None) -> str | None:
    """The env's build-record tree hash, None without a readable one (the groups say why)."""
    if env is None or not build_record_path(env).is_file():
        return None
    try:
        return read_build_record(env).tree.sha256
    except BadInput:
        return None


def run_pipeline(
    ctx: RunContext,
    groups: Sequence[ValidatorGroup],
    *,
    loader: Callable[[ValidatorGroup], GroupRunner | str] = load_group,
) -> Report:
    wanted = [g for g in ORDER if g in groups]
    started = datetime.now(UTC).isoformat(timespec="seconds")
    t0 = time.perf_counter()
    report = Report(
        stack=ctx.stack.manifest.name,
        manifest_sha256=ctx.stack.file_sha256(),
        env_path=str(ctx.env_path) if ctx.env_path else None,
        env_tree_sha256=_recorded_tree(ctx.env_path),
        started_at=started,
    )
    stopped_by: str | None = None
    for name in wanted:
        if stopped_by is not None:
            report.groups_skipped[name] = f"not run: group '{stopped_by}' failed (use --keep-going)"
            continue
        runner = loader(name)
        t = time.perf_counter()
        if isinstance(runner, str):
            results = [make_result(available_check(name), "ERROR", runner, group=name)]
        else:
            try:
                results = runner(ctx)
            except Exception as exc:  # a group must not take the run down; say what broke
                reason = f"{type(exc).__name__}: {exc}"
                if isinstance(exc, StackgateError) and exc.details:
                    # "1 problem in the manifest" alone hid which file and what problem.
                    reason += ": " + "; ".join(exc.details[:3])
                seconds = time.perf_counter() - t
                results = [
                    make_result(crashed_check(name), "ERROR", reason, None, seconds, group=name)
                ]
        validation = ctx.stack.manifest.validation
        results = apply_accepted(results, validation.accepted_findings, validation.refused_findings)
        report.results.extend(results)
        report.groups_run.append(name)
        if SPECS[name].host_facts:
            report.host = HostFacts.of_evidence({r.check: r.evidence for r in results})
        if not ctx.keep_going and any(r.status in ("FAIL", "ERROR") for r in results):
            stopped_by = name
    report.duration_s = round(time.perf_counter() - t0, 3)
    return report
