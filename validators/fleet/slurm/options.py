"""What a fleet asks of Slurm: the spec's `slurm` options, and the parts of a fleet spec
(validators.fleet.spec.FleetSpec) that planning and submitting its jobs read."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal, Protocol

from pydantic import Field, field_validator

from stackgate.model import StrictModel

PinWith = Literal["auto", "libslurm", "scontrol"]
# Values that end up on `#SBATCH` lines are not shell-quoted there.
_SAFE = re.compile(r"^[A-Za-z0-9_.:,=+/@%-]*\Z")


class SlurmOptions(StrictModel):
    partition: str | None = None
    collect_partition: str | None = Field(
        default=None, description="partition for the collector (a CPU one); default: partition"
    )
    time: str | None = Field(default=None, description="--time of one element, e.g. 03:00:00")
    gres: str | None = Field(default=None, description="e.g. gpu:8")
    account: str | None = None
    throttle: int | None = Field(default=None, ge=1, description="%K: elements at once")
    pin: bool = Field(
        default=True,
        description="pin element i to node i (submit held, set each element's NodeList, "
        "release); without it Slurm places elements and two may share a node",
    )
    pin_with: PinWith = Field(
        default="auto",
        description="how the pins reach Slurm: libslurm (one update RPC per element, a helper "
        "compiled against the host's Slurm headers), scontrol (two RPCs per element), or auto "
        "(libslurm where the helper builds, else scontrol)",
    )
    cc: str | None = Field(
        default=None,
        description="the C compiler that builds the libslurm pin helper, an absolute path; "
        "default: the first of /usr/bin/cc, /usr/bin/gcc, /usr/bin/clang (PATH is not searched)",
    )

    @field_validator("cc")
    @classmethod
    def _absolute_cc(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("/"):
            raise ValueError(f"{value!r}: the compiler must be named by an absolute path")
        return value

    @field_validator("partition", "collect_partition", "time", "gres", "account")
    @classmethod
    def _safe(cls, value: str | None) -> str | None:
        if value is not None and not _SAFE.match(value):
            raise ValueError(f"{value!r}: only letters, digits and _.:,=+/@%- are allowed")
        return value


class SlurmFleet(Protocol):
    """A fleet spec as the Slurm side reads it (the templates read its other fields too)."""

    @property
    def targets(self) -> list[str]: ...
    @property
    def folder(self) -> Path: ...
    @property
    def slurm(self) -> SlurmOptions: ...
