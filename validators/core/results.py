"""Check results and reports: every check returns a Result; a Report is JSON first.

Status is PASS / FAIL / SKIP / ERROR. A SKIP always carries the reason ("no GPU", "host is
SM90, stack targets 12.0a"). ERROR means the check itself could not run (a truncated ELF, a
missing interpreter), which is not the same as the stack failing it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Any, Literal
from xml.etree import ElementTree as ET

from pydantic import BaseModel, ConfigDict, Field, Strict, field_validator, model_validator

from stackgate.model import StrictModel
from validators.core.checks import CheckId, FamilyId, is_known
from validators.core.host_facts import HostFacts

Status = Literal["PASS", "FAIL", "SKIP", "ERROR"]
Better = Literal["higher", "lower", "none"]
Sample = Annotated[float, Strict(), Field(ge=0, allow_inf_nan=False)]


class Measurement(StrictModel):
    """One number (or one list of per-request samples) a check measured, with its unit and
    which way is better, declared where it is measured (validators/serve/bench_client.py's
    METRICS). A record files it under `<check>/<name>[@c<concurrency>]` (records/metrics.py);
    `better: none` is reported, never gated. A sample is a finite non-negative number: a NaN
    compares false with every threshold and would pass any gate."""

    name: str = Field(min_length=1, pattern=r"^[^/@]+$", description="bench_serving field name")
    unit: str = Field(min_length=1, description="e.g. tok/s, ms, requests")
    better: Better
    concurrency: int | None = Field(default=None, ge=1, description="the level it was taken at")
    value: Sample | None = Field(default=None, description="one number of this run")
    samples: list[Sample] | None = Field(default=None, description="per-request samples")

    @model_validator(mode="after")
    def _one_of(self) -> Measurement:
        if (self.value is None) == (self.samples is None):
            raise ValueError(f"{self.name}: give a value or samples, exactly one")
        return self


class Result(StrictModel):
    """One check's outcome. `evidence` holds what a person needs to believe the verdict."""

    check: str = Field(description="dotted id, e.g. 'static.abi.sgl_kernel.common_ops'")
    group: str = Field(description="host / static / runtime / serve-bench")
    status: Status
    reason: str
    evidence: dict[str, Any] = Field(default_factory=dict)
    duration_s: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    # Left out of the JSON when empty: records (whose ids hash their checks) and reports
    # written before measurements read and write the same bytes.
    measurements: list[Measurement] = Field(default_factory=list, exclude_if=lambda v: not v)

    @model_validator(mode="after")
    def _skip_says_why(self) -> Result:
        if self.status in ("SKIP", "ERROR", "FAIL") and not self.reason.strip():
            raise ValueError(f"a {self.status} result must say why")
        return self


class Report(BaseModel):
    """A validation run: the results of the groups that ran, with context for records."""

    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1] = 1
    stack: str
    manifest_sha256: str | None = None
    env_path: str | None = None
    env_tree_sha256: str | None = Field(
        default=None,
        description="The tree hash in the env's build record when the run started: which build "
        "the runs judged, even if the path (a `current` link) later names another.",
    )
    started_at: str
    duration_s: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    groups_run: list[str] = Field(default_factory=list)
    groups_skipped: dict[str, str] = Field(default_factory=dict)
    host: HostFacts = Field(
        default_factory=HostFacts,
        description="What the host group measured (validators/core/host_facts.py).",
    )
    results: list[Result] = Field(default_factory=list)

    @field_validator("started_at")
    @classmethod
    def _a_time(cls, value: str) -> str:
        # Run sets are told apart and dated by it: "yesterday" or a time without a zone is
        # not a time this tool wrote (pipeline.py writes datetime.now(UTC).isoformat()).
        try:
            stamp = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"{value!r} is not an ISO-8601 date and time") from None
        if stamp.tzinfo is None:
            raise ValueError(f"{value!r} has no time zone (runs are dated in UTC)")
        return value

    @property
    def failed(self) -> bool:
        return any(r.status in ("FAIL", "ERROR") for r in self.results)

    def counts(self) -> dict[str, int]:
        out = {"PASS": 0, "FAIL": 0, "SKIP": 0, "ERROR": 0}
        for r in self.results:
            out[r.status] += 1
        return out


def make_result(
    check: CheckId | FamilyId,
    status: Status,
    reason: str,
    evidence: dict[str, Any] | None = None,
    seconds: float = 0.0,
    *,
    group: str,
    measurements: Sequence[Measurement] = (),
) -> Result:
    """The one Result factory the groups share (each binds its group with functools.partial).

    The id must be one validators.core.checks registers: a validator cannot emit an id the gate,
    reports and tests do not know."""
    if not is_known(check):
        raise ValueError(f"check id {check!r} is not in validators.core.checks; register it there")
    return Result(
        check=check,
        group=group,
        status=status,
        reason=reason,
        evidence=evidence or {},
        duration_s=round(seconds, 4),
        measurements=list(measurements),
    )


def to_junit(report: Report) -> str:
    """JUnit XML: one testsuite per group; FAIL -> failure, ERROR -> error, SKIP -> skipped."""
    root = ET.Element("testsuites", name=f"stackgate:{report.stack}")
    groups: dict[str, list[Result]] = {}
    for r in report.results:
        groups.setdefault(r.group, []).append(r)
    for group, results in groups.items():
        suite = ET.SubElement(
            root,
            "testsuite",
            name=group,
            tests=str(len(results)),
            failures=str(sum(r.status == "FAIL" for r in results)),
            errors=str(sum(r.status == "ERROR" for r in results)),
            skipped=str(sum(r.status == "SKIP" for r in results)),
            time=f"{sum(r.duration_s for r in results):.3f}",
        )
        for r in results:
            case = ET.SubElement(
                suite,
                "testcase",
                classname=f"{report.stack}.{group}",
                name=r.check,
                time=f"{r.duration_s:.3f}",
            )
            tag = {"FAIL": "failure", "ERROR": "error", "SKIP": "skipped"}.get(r.status)
            if tag is not None:
                ET.SubElement(case, tag, message=r.reason[:500]).text = r.reason
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"
