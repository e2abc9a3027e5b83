"""The schedulers a fleet run can go through, one class each behind one Protocol, and the
registry `--scheduler` and the spec's `scheduler` name them from.

What differs between them lives on the class: whose paths the spec holds (this machine's,
made absolute, or the pods'), the checkout and interpreter the nodes use by default, whether
every element is pinned to its node, which nodes to leave out before submitting, what the job
folder holds and which commands submit it. Adding a scheduler: a class here, its name in
SchedulerName (the spec's field and the CLI's choices follow), its tests.
"""

from __future__ import annotations

import json
import logging
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, get_args

from stackgate.errors import BadInput, EnvironmentProblem, StackgateError
from stackgate.files import atomic_write_text
from stackgate.paths import project_root
from stackgate.proc import run
from validators.fleet import kube
from validators.fleet.elements import SUBMISSION_FILENAME, Submission
from validators.fleet.slurm import hostlist, limits, pin, states, submission, templates
from validators.fleet.spec import FleetSpec, SchedulerName

log = logging.getLogger("stackgate.fleet")

SCRIPTS_DIR = "slurm"
KUBE_CHECKOUT = "/opt/stackgate"  # fleet/kubernetes/Containerfile
KUBE_PYTHON = f"{KUBE_CHECKOUT}/.venv/bin/python"
MANIFEST_FILENAME = "kubernetes.json"

# finish(record): write submission.json into the partial folder and rename it into place.
Finish = Callable[[Submission], None]


class Scheduler(Protocol):
    @property
    def name(self) -> SchedulerName: ...

    @property
    def local_paths(self) -> bool:
        """Whether the spec's paths are this machine's (made absolute at submit) or the
        scheduler's workers' own (a pod's mount)."""

    def default_checkout(self) -> str: ...

    def default_python(self) -> str: ...

    def node_names(self, items: list[str]) -> list[str]:
        """`--nodes` items (hostlist form) as node names, in order (validators.fleet.slurm.hostlist)."""

    def pins(self, spec: FleetSpec) -> bool:
        """Whether each element runs on the node it is for (its index names the node)."""

    def element_job(self, submission: Submission, index: int) -> str | None:
        """The scheduler's id of the job that was to run element `index` (a node's status
        must name it), None where the scheduler gives elements no id of their own."""

    def array_limit(self) -> int:
        """The most elements one submission may hold (asked of the scheduler where it can)."""

    def with_available_nodes(self, spec: FleetSpec, *, dry_run: bool) -> FleetSpec:
        """The spec without the nodes the scheduler would not start an element on."""

    def plan(self, spec: FleetSpec, max_array: int) -> tuple[dict[str, str], list[list[str]]]:
        """(files of the job folder by relative path, the commands that submit it)."""

    def submit(
        self, spec: FleetSpec, commands: list[list[str]], partial: Path, finish: Finish
    ) -> Submission:
        """Submit from the partial folder, calling finish(record) once it may become the job
        folder; returns what submission.json records."""


class Slurm:
    name: SchedulerName = "slurm"
    local_paths = True

    def default_checkout(self) -> str:
        return str(project_root())

    def default_python(self) -> str:
        return sys.executable

    def node_names(self, items: list[str]) -> list[str]:
        return hostlist.expand(items, ask_slurm=True)  # Slurm's own names where it answers

    def pins(self, spec: FleetSpec) -> bool:
        return spec.slurm.pin

    def element_job(self, submission: Submission, index: int) -> str | None:
        return submission.element_of(index)  # `<array>_<task>`

    def array_limit(self) -> int:
        """Slurm's MaxArraySize where Slurm answers; its default where not (a dry run)."""
        try:
            return limits.limits().max_array_size
        except StackgateError:
            return limits.DEFAULT_MAX_ARRAY_SIZE

    def with_available_nodes(self, spec: FleetSpec, *, dry_run: bool) -> FleetSpec:
        """With pinning: leave out the nodes Slurm would not start a job on (slurm/submission.py says why
        an element pinned to one would hold back the others). A dry run where Slurm cannot be
        asked prints the plan for every node."""
        if not spec.slurm.pin:
            return spec
        try:
            skipped = states.probe_unavailable(spec.nodes)
        except StackgateError as exc:
            if dry_run:  # printing the plan needs no cluster; the real submit asks again
                log.warning("node states not checked (%s): every node is in the plan", exc.message)
                return spec
            raise
        if len(skipped) == len(spec.nodes):
            raise EnvironmentProblem(
                "no node of the set is available to Slurm",
                details=[f"{n}: {why}" for n, why in skipped.items()],
            )
        return spec.model_copy(update={"skipped": skipped})

    def plan(self, spec: FleetSpec, max_array: int) -> tuple[dict[str, str], list[list[str]]]:
        files = {f"{SCRIPTS_DIR}/{name}": text for name, text in templates.render(spec).items()}
        # The arrays' size depends on the pin way; planning only looks, it compiles nothing.
        with pin.choose_pin_way(
            spec.slurm.pin, spec.slurm.pin_with, spec.slurm.cc, build=False
        ) as way:
            commands = submission.plan_commands(
                spec, spec.folder / SCRIPTS_DIR, max_array=max_array, way=way
            )
        return files, commands

    def submit(
        self, spec: FleetSpec, commands: list[list[str]], partial: Path, finish: Finish
    ) -> Submission:
        folder = spec.folder
        records: list[Submission] = []

        def held(done: submission.Submitted) -> None:
            # The scripts were read by sbatch from the partial folder; say where they live now.
            moved = [[a.replace(str(partial), str(folder)) for a in argv] for argv in done.commands]
            records.append(
                Submission(
                    scheduler="slurm",
                    arrays=done.arrays,
                    offsets=done.offsets,
                    max_array_size=done.max_array_size,
                    pinned_with=done.pinned_with,
                    collector_job=done.collector_job,
                    commands=moved,
                )
            )
            finish(records[0])

        try:
            done = submission.submit(spec, partial / SCRIPTS_DIR, before_release=held)
        except BaseException:
            if not partial.exists() and folder.exists():  # renamed, then the release failed
                shutil.rmtree(folder, ignore_errors=True)
            raise
        release = [a.replace(str(partial), str(folder)) for a in done.commands[-1]]
        record = records[0].model_copy(update={"commands": [*records[0].commands, release]})
        atomic_write_text(folder / SUBMISSION_FILENAME, record.to_json())
        return record


class Kubernetes:
    name: SchedulerName = "kubernetes"
    local_paths = False  # the paths are the pods' (the claim's mount), not this machine's

    def default_checkout(self) -> str:
        return KUBE_CHECKOUT  # the image's, never this machine's path

    def default_python(self) -> str:
        return KUBE_PYTHON

    def node_names(self, items: list[str]) -> list[str]:
        return hostlist.expand(items, ask_slurm=False)

    def pins(self, spec: FleetSpec) -> bool:
        return True  # an Indexed Job's pod N is placed on node N

    def element_job(self, submission: Submission, index: int) -> str | None:
        return None  # the pods of one Indexed Job; a status names its pod, not checked here

    def array_limit(self) -> int:
        return 1  # one Indexed Job; no array to split

    def with_available_nodes(self, spec: FleetSpec, *, dry_run: bool) -> FleetSpec:
        return spec

    def plan(self, spec: FleetSpec, max_array: int) -> tuple[dict[str, str], list[list[str]]]:
        if spec.kubernetes is None:
            raise BadInput("--scheduler kubernetes needs --image (the stackgate image)")
        doc = kube.as_list(kube.manifests(spec))
        files = {MANIFEST_FILENAME: json.dumps(doc, indent=2) + "\n"}
        return files, [["kubectl", "apply", "-f", str(spec.folder / MANIFEST_FILENAME)]]

    def submit(
        self, spec: FleetSpec, commands: list[list[str]], partial: Path, finish: Finish
    ) -> Submission:
        record = Submission(scheduler="kubernetes", commands=commands)
        finish(record)
        for argv in commands:
            run(argv)
        return record


SCHEDULERS: dict[SchedulerName, Scheduler] = {s.name: s for s in (Slurm(), Kubernetes())}
if sorted(SCHEDULERS) != sorted(get_args(SchedulerName)):  # pragma: no cover - import guard
    raise RuntimeError("validators.fleet.schedulers: SCHEDULERS and SchedulerName disagree")


def scheduler_of(spec: FleetSpec) -> Scheduler:
    return SCHEDULERS[spec.scheduler]
