"""Marking a stack known-good, the steps between the command's arguments and its output: the
stack, its runs (given, or made here as many as its gate needs), their judgement (every problem
at once; a refusal writes nothing) and the record stored."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from stackgate.errors import BadInput
from stackgate.manifest.loading import LoadedStack, load_stack
from validators.core.gpu_needs import refuse_without_gpus
from validators.core.results import Report
from validators.core.runs import run_validations
from validators.gate.candidate import env_of, host_of
from validators.records.build_facts import read_build_facts
from validators.records.clock import ahead_of_evidence, own_clock, parse, stamp_time
from validators.records.compose import compose_record, qualify
from validators.records.env_verify import require_env_matches
from validators.records.fingerprint import target_mismatch
from validators.records.json_files import EXPORT_NAME, export_records
from validators.records.model import BuildFacts, HostFingerprint, Record
from validators.records.reference import parse_reference
from validators.records.resolve import committed_records_dir, read_report
from validators.records.run_set import run_set_problems
from validators.records.store import RecordStore


def stack_to_mark(text: str) -> LoadedStack:
    """The stack named by its name or manifest; a record or run report file is refused."""
    ref = parse_reference(text)
    if ref.kind == "file":
        raise BadInput(
            f"{ref}: a record or run report file, not a stack (give the stack's name or its "
            "manifest .toml; the runs go in --run)"
        )
    return load_stack(ref.text)  # a name not in stacks/: exit 2 with the known stacks


def gather_runs(
    stack: str, loaded: LoadedStack, runs: Sequence[Path] | None, env: Path | None, repeats: int
) -> list[Report]:
    """The run reports given (--run), else `repeats` runs of the validators on `env`, here."""
    if runs:
        return [read_report(p) for p in runs]
    if env is None:
        raise BadInput("give the runs (--run RESULT.json, once per run) or --env PATH to run them")
    refuse_without_gpus(loaded.manifest, "mark-good")
    return run_validations(stack, env, repeats)


@dataclass(frozen=True)
class Judged:
    """The runs judged: every problem that refuses them, and what their record is made of."""

    problems: list[str]
    host: HostFingerprint
    mismatch: list[str]  # how the host misses the stack's targets (refused unless allowed)
    env: Path | None
    build: BuildFacts | None


def judge(
    loaded: LoadedStack,
    reports: Sequence[Report],
    *,
    env: Path | None,
    image_digest: str | None,
    allow_host_mismatch: bool,
) -> Judged:
    problems = qualify(loaded, reports)
    host = host_of(reports)
    mismatch = target_mismatch(host, loaded.manifest)
    if mismatch and not allow_host_mismatch:
        problems.extend(f"host: {m}" for m in mismatch)
    env_path = env_of(reports, env)
    build: BuildFacts | None = None
    if env_path is None:
        problems.append("no environment: give --env (the reports name none)")
    else:
        build = read_build_facts(env_path, image_digest=image_digest)
        problems.extend(run_set_problems(loaded.manifest.name, reports, env_path, build))
    return Judged(problems, host, mismatch, env_path, build)


@dataclass(frozen=True)
class Stored:
    record: Record
    added: bool  # False: the store already held it
    exported: list[Path]
    store: Path


def store_known_good(
    loaded: LoadedStack,
    reports: Sequence[Report],
    judged: Judged,
    *,
    note: str | None,
    store: Path | None,
    export: Path | None,
    warn: Callable[[str, bool], None],
) -> Stored:
    """The record of runs judged without a problem (an env without an image checked against its
    build record first), added to the store, its stack's records exported under `export`. This
    host's clock dates the record: plainly wrong is exit 3 (nothing written), behind the store's
    newest record a warning, ahead of the newest evidence it sees a loud one (`warn(text,
    loud)`; records/clock.py)."""
    env, build = judged.env, judged.build
    assert env is not None and build is not None and not judged.problems
    if build.env_tree_sha256 is None:
        raise BadInput(f"{env}: the build record has no env tree hash")
    if build.image_digest is None:
        require_env_matches(env, build)
    record = compose_record(loaded, reports, build=build, host=judged.host, kind="known-good",
                            note=note, host_mismatch=judged.mismatch)  # fmt: skip
    with RecordStore.open(store) as opened:
        made_from = [(f"run {i}'s start", r.started_at) for i, r in enumerate(reports, 1)]
        for warning in own_clock(made_from, opened.newest_created_at(), parse(record.created_at)):
            warn(warning, False)
        seen = [opened.newest_created_at(), *_newest_file_stamps(record.stack, export)]
        if loud := ahead_of_evidence(record.created_at, seen):
            warn(loud, True)
        added = opened.add(record)
        exported = export_records(opened, export, record.stack).written if export else []
        return Stored(record, added, exported, opened.path)


def _newest_file_stamps(stack: str, export: Path | None) -> list[str | None]:
    """The newest export-name stamp of the stack's record files, committed and in --export."""
    out: list[str | None] = []
    for folder in (committed_records_dir() / stack, *([export / stack] if export else [])):
        try:
            names = [p.name for p in folder.iterdir()]
        except OSError:
            continue
        stamps = [m["stamp"] for m in map(EXPORT_NAME.match, names) if m]
        out.append(stamp_time(max(stamps)) if stamps else None)
    return out
