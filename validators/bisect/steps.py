"""One evaluated intermediate stack (a step) and the file that keeps them across runs.

Steps are keyed by the sha256 of the intermediate's manifest and lock: a bisect interrupted
(Ctrl-C, SIGKILL, a lost machine) and run again answers every finished step from the file
and repeats no gate; the builder's content-addressed envs mean no finished build is repeated
either. The file is rewritten atomically after each step.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from stackgate.errors import BadInput
from stackgate.files import atomic_write_text, parse_json_text, read_text_bounded

Verdict = Literal["REGRESSED", "SAME", "FAIL_BEFORE_INSTALL"]


class MetricNumber(BaseModel):
    key: str
    status: str
    ratio: float | None = None
    low: float | None = None
    high: float | None = None


class Step(BaseModel):
    key: str
    stack: str
    applied: list[str]  # unit ids
    lock_sha256: str
    attempt: int = 1  # 2: the same stack gated again (the whole candidate, after a pass)
    verdict: Verdict
    reasons: list[str] = Field(default_factory=list)
    metrics: list[MetricNumber] = Field(default_factory=list)
    env: str | None = None
    gate_json: str | None = None  # the full gate result, kept beside the state file
    refused_gate: str | None = None  # --bad GATE.json: the verdict is that gate's, not ours
    seconds: float = 0.0

    @property
    def regressed(self) -> bool:
        return self.verdict != "SAME"


class StepFile(BaseModel):
    schema_version: Literal[1] = 1
    steps: dict[str, Step] = Field(default_factory=dict)


class StepStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.data = StepFile()
        if path.is_file():
            try:
                data = parse_json_text(read_text_bounded(path), where=str(path))
                self.data = StepFile.model_validate(data)
            except (BadInput, ValueError, ValidationError) as exc:
                raise BadInput(
                    f"{path}: not a bisect state file ({str(exc).splitlines()[0]}); "
                    "remove it or give another --work folder"
                ) from None

    def get(self, key: str) -> Step | None:
        return self.data.steps.get(key)

    def put(self, step: Step) -> None:
        self.data.steps[step.key] = step
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.path, self.data.model_dump_json(indent=1))
