"""The report's host block (Report.host), typed: what the host group measured, by check id.

The wire format stays `{check id: evidence}` of the host group (`"host.gpus": {"count": 8,
...}`), so older reports load unchanged. The parts other tools read are typed here (the
record's host fingerprint: validators/records/fingerprint.py); the rest of each check's
evidence stays as written. A field of the wrong type is bad input naming the field.

It lives in core/, not beside the host group in preflight/: core/ imports no group package.

`fingerprint`: a host fingerprint given whole by whoever ran the validators (a collector of
runs made elsewhere); validated where it is read (records.model.HostFingerprint).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StrictInt,
    StrictStr,
    model_serializer,
)

from stackgate.topology import Topology

# Strict: "8" or 8.0 for a count is not what the host group writes; refused, not coerced.
Count = Annotated[StrictInt, Field(ge=0)]


class _AsWritten(BaseModel):
    """Dumped as it was given: a field never set is left out, not written as its default (a
    report read and written again is the same JSON)."""

    @model_serializer(mode="wrap")
    def _as_written(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for name, info in type(self).model_fields.items():
            if name not in self.model_fields_set:
                data.pop(info.alias or name, None)
                data.pop(name, None)
        return data


class _Evidence(_AsWritten):
    """A check's evidence: the typed fields, and whatever else the check wrote beside them."""

    model_config = ConfigDict(extra="allow", frozen=True)


class GpusEvidence(_Evidence):
    count: Count
    models: list[StrictStr] = Field(default_factory=list)
    ccs: list[tuple[StrictInt, StrictInt]] = Field(
        default_factory=list, description="(major, minor)"
    )
    targets: list[StrictStr] = Field(default_factory=list)


class DriverEvidence(_Evidence):
    driver: StrictStr | None = None
    driver_cuda: StrictStr | None = Field(default=None, description="CUDA the driver supports")
    min_driver: StrictStr | None = None
    cuda: StrictStr | None = None


class InterconnectEvidence(_Evidence):
    detected: Topology | None = None
    env_profile: Topology | None = None


class NvccEvidence(_Evidence):
    nvcc: StrictStr | None = Field(default=None, description="full version, e.g. 13.0.88")
    path: StrictStr | None = None
    needed: StrictStr | None = None


class MemoryEvidence(_Evidence):
    """/proc/meminfo in bytes (every key of it), the swap devices and the cgroup's limit."""

    MemTotal: Count | None = None
    MemAvailable: Count | None = None
    SwapTotal: Count | None = None
    cgroup_memory_max: Count | None = None


class DiskEvidence(_Evidence):
    path: StrictStr | None = None
    free: Count | None = None
    total: Count | None = None
    needed: bool | None = None


class HostFacts(_AsWritten):
    """Report.host. Other host checks' evidence (host.p2p, host.rules, host.rule.<id>) is kept
    as written."""

    model_config = ConfigDict(
        extra="allow", frozen=True, populate_by_name=True, serialize_by_alias=True
    )

    gpus: GpusEvidence | None = Field(default=None, alias="host.gpus")
    driver: DriverEvidence | None = Field(default=None, alias="host.driver")
    interconnect: InterconnectEvidence | None = Field(default=None, alias="host.interconnect")
    nvcc: NvccEvidence | None = Field(default=None, alias="host.nvcc")
    memory: MemoryEvidence | None = Field(default=None, alias="host.memory")
    disk: DiskEvidence | None = Field(default=None, alias="host.disk")
    fingerprint: dict[str, Any] | None = None

    @classmethod
    def of_evidence(cls, evidence: Mapping[str, Mapping[str, Any]]) -> HostFacts:
        """The host group's {check id: evidence} as the report's block (empty ones left out)."""
        return cls.model_validate({check: ev for check, ev in evidence.items() if ev})

    @property
    def empty(self) -> bool:
        """No host group ran (or it measured nothing)."""
        return not self.model_dump(exclude_none=True)
