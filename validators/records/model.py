"""The known-good record (schema_version 1): what was proven, where, with which numbers.

A record is content-addressed: its id is the sha256 of its canonical JSON (every field but
`record_id`), so a record cannot change without changing its id, and every read re-computes
the hash (`Record.verified`). Records are never edited; a new proof is a new record.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AliasChoices,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
)

from stackgate.build_record import BuildRecord
from stackgate.credentials import secrets_in
from stackgate.errors import BadInput
from stackgate.model import StrictModel, parsed
from validators.core.results import Result
from validators.records.gated import MetricFacts

RECORD_SCHEMA_VERSION: Literal[1] = 1
# A Topology (stackgate.topology) when the host has 2+ GPUs; "none" with 0-1 GPU.
Interconnect = Literal["nvlink", "pcie", "none", "unknown"]

# Fields that become file names on export (records/<stack>/<created>-<id12>.json) are held to
# what a name may be, on every read: a record naming stack "../../x" is bad input, not a path.
_STACK_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,99}\Z")
_RECORD_ID_RE = re.compile(r"^(?:[0-9a-f]{64})?\Z")
# The one spelling the tool writes (isoformat of a UTC time): "the newest known-good" is picked
# by comparing this text, and other spellings Python reads (a space for 'T', a week date, basic
# format, "Z") would sort a record out of its place and swap the baseline.
_CREATED_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{6})?\+00:00\Z")


def _stack_name(value: str) -> str:
    if not _STACK_RE.match(value):
        raise ValueError(
            f"{value!r} is not a stack name (lower-case letters, digits, '.', '_', '-'; "
            "starts with a letter or digit; at most 100)"
        )
    return value


def _timestamp(value: str) -> str:
    try:
        stamp = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{value!r} is not an ISO-8601 date and time") from None
    if stamp.tzinfo is None:
        raise ValueError(f"{value!r} has no time zone (records are written in UTC)")
    if stamp.utcoffset() != timedelta(0):
        # The store orders by this text and export names files by its UTC stamp: another
        # offset mis-orders the newest record and can leave the date range (9999 at -05:00).
        raise ValueError(f"{value!r} is not in UTC (+00:00); records are written in UTC")
    if not _CREATED_RE.match(value):
        raise ValueError(
            f"{value!r} is not written as records are (YYYY-MM-DDTHH:MM:SS+00:00); records "
            "are ordered by this text"
        )
    # No clock check here: this runs on every read of a stored record, and a record made on a
    # host whose clock ran ahead would make the whole store unreadable (records/clock.py says
    # where dates are judged).
    return value


def _record_id(value: str) -> str:
    if not _RECORD_ID_RE.match(value):
        raise ValueError("must be 64 lower-case hex digits (the sha256 of the content)")
    return value


StackName = Annotated[str, AfterValidator(_stack_name)]
Timestamp = Annotated[str, AfterValidator(_timestamp)]
RecordId = Annotated[str, AfterValidator(_record_id)]
# One measurement: a real, finite, non-negative number. NaN compares false with everything, so
# a NaN sample would pass any threshold; strings, null and booleans are not numbers.
Sample = Annotated[float, Field(strict=True, allow_inf_nan=False, ge=0)]
# At most MAX_SAMPLES per metric (one per validation run): the gate's bootstrap holds
# resamples x n numbers per side, so a record listing millions of samples of one metric would
# ask numpy for terabytes.
MAX_SAMPLES = 1000
Samples = Annotated[list[Sample], Field(min_length=1, max_length=MAX_SAMPLES)]


class GpuInfo(StrictModel):
    model_config = ConfigDict(allow_inf_nan=False)

    model: str | None = None
    count: int = 0
    compute_capabilities: list[str] = Field(
        default_factory=list, description="Distinct CCs as 'major.minor', e.g. ['12.0']."
    )
    memory_gib: float | None = None


class HostFingerprint(StrictModel):
    """The facts about a host that can change how a stack behaves or performs.

    A field the probe could not tell is None ("unknown"), never a guess. Numbers are finite
    (NaN compares unequal with everything).
    """

    model_config = ConfigDict(allow_inf_nan=False)

    hostname: str | None = None
    gpu: GpuInfo = Field(default_factory=GpuInfo)
    driver: str | None = None
    cuda_driver: str | None = Field(default=None, description="CUDA version the driver supports.")
    nvcc: str | None = None
    interconnect: Interconnect = "unknown"
    cpu_model: str | None = None
    cpu_count: int | None = None
    ram_gib: float | None = None
    swap_gib: float | None = None
    kernel: str | None = None
    source: str = Field(default="probe", description="Where the facts came from.")


class BuildFacts(StrictModel):
    """What the builder wrote into the environment (`<env>/stackgate/build-record.json`)."""

    # Stored under the key "manifest_sha256" (records are content-addressed: renaming the key
    # would change every record id), but it is NOT the manifest file's hash (that is
    # Record.manifest_sha256): it is the build record's manifest_hash, the sha256 of the
    # manifest fields the lock depends on.
    model_config = ConfigDict(
        serialize_by_alias=True, validate_by_name=True, validate_by_alias=True, allow_inf_nan=False
    )

    lock_inputs_sha256: str | None = Field(
        default=None,
        validation_alias=AliasChoices("manifest_sha256", "lock_inputs_sha256"),
        serialization_alias="manifest_sha256",
    )
    lock_sha256: str | None = None
    env_tree_sha256: str | None = None
    image_digest: str | None = None
    python: str | None = None
    topology: str | None = None
    packages: dict[str, str] = Field(default_factory=dict, description="name -> version")
    tools: dict[str, str] = Field(default_factory=dict, description="uv, python, ... versions")
    raw: dict[str, Any] = Field(default_factory=dict, description="The build record as written.")

    @property
    def env_profile(self) -> dict[str, str]:
        """The variables the build applied (the build record's env_profile), {} when unknown."""
        if not self.raw:
            return {}
        try:
            return BuildRecord.model_validate(self.raw).env_profile
        except ValidationError:
            return {}


class Record(StrictModel):
    schema_version: Literal[1] = RECORD_SCHEMA_VERSION
    record_id: RecordId = Field(default="", description="sha256 of the canonical content.")
    kind: Literal["known-good", "candidate"] = "known-good"
    stack: StackName
    created_at: Timestamp
    created_by: str | None = None
    stackgate_version: str
    note: str | None = None
    manifest_sha256: str | None = None
    manifest: dict[str, Any] = Field(
        default_factory=dict, description="The manifest as read (TOML tables), for diffs."
    )
    build: BuildFacts = Field(default_factory=BuildFacts)
    host: HostFingerprint = Field(default_factory=HostFingerprint)
    host_mismatch: list[str] = Field(
        default_factory=list,
        description="Why the host did not match the stack's targets, when accepted anyway.",
    )
    env: dict[str, str] = Field(
        default_factory=dict, description="Environment variables the stack applied."
    )
    runs: int = Field(default=1, ge=1, description="How many validation runs the record merges.")
    checks: list[Result] = Field(default_factory=list)
    metrics: dict[str, Samples] = Field(
        default_factory=dict, description="Benchmark metric -> one sample per repeated run."
    )
    sample_runs: dict[str, list[int]] = Field(
        default_factory=dict,
        description="Metric -> the validation run (0-based) each sample came from; repeats "
        "within a run share it. Absent in records made before it was kept (then one sample per "
        "run is assumed where the counts agree).",
    )
    metric_facts: dict[str, MetricFacts] = Field(
        default_factory=dict,
        description="Metric -> its direction and tolerance class as declared when written "
        "(absent in older records: then derived, records.gated.facts_for).",
    )
    distributions: dict[str, list[Sample]] = Field(
        default_factory=dict, description="Per-request raw samples (ttfts_ms, itls_ms, ...)."
    )
    golden_outputs: dict[str, Any] = Field(
        default_factory=dict, description="Reference outputs of the correctness checks."
    )

    @field_validator("checks")
    @classmethod
    def _one_result_per_check(cls, checks: list[Result]) -> list[Result]:
        """The gate keys results by check id: of [FAIL x, PASS x] it would see only the last, a
        PASS (compose_record keeps the worst status of each check, once)."""
        ids = [c.check for c in checks]
        twice = sorted({i for i in ids if ids.count(i) > 1})
        if twice:
            raise ValueError(f"more than one result for check(s) {', '.join(twice[:5])}")
        return checks

    # -- identity ---------------------------------------------------------------------------
    def content(self) -> dict[str, Any]:
        return self.data(exclude={"record_id"})

    def data(self, exclude: set[str] | None = None) -> dict[str, Any]:
        """The record as JSON data (empty later fields left out: _drop_empty_later_fields)."""
        return self.model_dump(mode="json", exclude=exclude)

    @model_serializer(mode="wrap")
    def _drop_empty_later_fields(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Records made before sample_runs and metric_facts were kept hash, dump and read back
        exactly as they were written: each field appears only when it says something."""
        data: dict[str, Any] = handler(self)
        for name in ("sample_runs", "metric_facts"):
            if not data.get(name):
                data.pop(name, None)
        return data

    def compute_id(self) -> str:
        return content_sha256(self.content())

    def sealed(self) -> Record:
        """This record with its id set from its content."""
        return self.model_copy(update={"record_id": self.compute_id()})

    @property
    def short_id(self) -> str:
        return self.record_id[:12]

    @property
    def created_stamp(self) -> str:
        """created_at as a file-name-safe UTC stamp, e.g. 20260101T120000."""
        stamp = datetime.fromisoformat(self.created_at).astimezone(UTC)
        return stamp.strftime("%Y%m%dT%H%M%S")

    @property
    def label(self) -> str:
        return f"{self.stack}@{self.short_id}"

    def to_json(self) -> str:
        return json.dumps(self.data(), indent=2, sort_keys=True) + "\n"


def canonical_json(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def content_sha256(data: Any) -> str:
    return hashlib.sha256(canonical_json(data).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class StoredBody:
    """A record as the store keeps it: its columns and its body (the canonical JSON of the
    whole record, id included), made where the record was read and verified (load_record),
    so the store takes it without dumping and encoding the record again."""

    record_id: str
    stack: str
    kind: str
    created_at: str
    schema_version: int
    body: str

    def content_text(self) -> str | None:
        """The body without its id: the canonical JSON the id is the hash of; None when the
        body does not hold its id exactly once as a top-level entry of canonical JSON."""
        entry = json.dumps("record_id") + ":" + json.dumps(self.record_id)
        if self.body.count(entry) != 1:  # the id cannot be inside its own preimage
            return None
        for piece in (entry + ",", "," + entry):
            if piece in self.body:
                return self.body.replace(piece, "", 1)
        return self.body.replace(entry, "", 1)  # the only entry: {"record_id":...}

    def hash_matches(self) -> bool:
        text = self.content_text()
        return text is not None and sha256_text(text) == self.record_id


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def canonical_texts(content: dict[str, Any], record_id: str) -> tuple[str, str]:
    """(canonical_json(content), canonical_json of content with record_id): the id's
    preimage and the body the store keeps, from one encoding of the content. Its keys are
    sorted, so the id's entry goes between the keys before "record_id" and those after (a
    record's few scalars: encoded again on their own to find where they start)."""
    text = canonical_json(content)
    tail = canonical_json({k: v for k, v in content.items() if k > "record_id"})[1:-1]
    head = text[1 : len(text) - 1 - len(tail)]
    if head and tail:
        head = head[:-1]  # the comma before the tail
    entry = f'"record_id":{json.dumps(record_id)}'
    return text, "{" + ",".join(p for p in (head, entry, tail) if p) + "}"


def stored_body(record: Record, body: str) -> StoredBody:
    return StoredBody(
        record.record_id, record.stack, record.kind, record.created_at, record.schema_version, body
    )


def refuse_secrets(
    record: Record, *, where: str, text: str | None = None, content: dict[str, Any] | None = None
) -> None:
    """BadInput when a string anywhere in the record holds a credential URL or a recognisable
    token (run evidence, a note, host facts): records go to the store and to git. text and
    content: the record's canonical JSON and content, when the caller has them already."""
    content = record.content() if content is None else content
    found = secrets_in(content, text if text is not None else canonical_json(content))
    if found:
        raise BadInput(
            f"{where}: the record holds secrets (values not shown); records are committed",
            details=[f"{path}: {what}" for path, what in found[:20]],
        )


def load_record(data: Any, *, where: str, secrets: bool = False) -> Record:
    """Parse and verify a record; raise BadInput saying what is wrong and where.

    secrets: also refuse one holding credentials (files about to enter a store or git)."""
    return load_record_body(data, where=where, secrets=secrets)[0]


def load_record_body(data: Any, *, where: str, secrets: bool = False) -> tuple[Record, str]:
    """load_record, and the record's body as the store keeps it (canonical JSON, id
    included: made from the same encoding as the hash, no second dump)."""
    if not isinstance(data, dict):
        raise BadInput(f"{where}: not a record (expected a JSON object)")
    version = data.get("schema_version")
    if isinstance(version, int) and version > RECORD_SCHEMA_VERSION:
        raise BadInput(
            f"{where}: record schema_version {version} is newer than this stackgate reads "
            f"({RECORD_SCHEMA_VERSION}); upgrade stackgate"
        )
    record = parsed(Record, data, f"{where}: invalid record")
    content = record.content()
    text, body = canonical_texts(content, record.record_id)
    expected = sha256_text(text)
    if record.record_id != expected:
        raise BadInput(
            f"{where}: record content does not match its hash (modified after it was written?)",
            details=[f"stored id {record.record_id or '(none)'}", f"content hash {expected}"],
        )
    if secrets:
        refuse_secrets(record, where=where, text=text, content=content)
    return record, body
