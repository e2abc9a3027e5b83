"""What commands print under --json where another process reads it: one model per output,
produced and parsed with the same class (a reader calls model_validate, never .get())."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class ErrorOutput(BaseModel):
    """Every command's --json output when it refuses or fails (exit != 0): stackgate/cli.py."""

    model_config = ConfigDict(extra="forbid")

    ok: Literal[False] = False
    exit_code: int
    error: str
    details: list[str] = Field(default_factory=list)
    error_id: str = ""  # stable, for scripts: match it, never the prose (stackgate/errors.py)
    hint: str = ""  # what to do about it


class MarkGoodOutput(BaseModel):
    """`validators mark-good --json` when the runs made a known-good record (exit 0); the
    fleet's node step reads it."""

    model_config = ConfigDict(extra="forbid")

    ok: Literal[True] = True
    record_id: str
    stack: str
    added: bool
    store: str
    exported: list[str] = Field(default_factory=list)
    metrics: list[str] = Field(default_factory=list)
    runs: int


class MarkGoodRefusal(BaseModel):
    """`validators mark-good --json` when the runs cannot make a record (exit 1): every reason."""

    model_config = ConfigDict(extra="forbid")

    ok: Literal[False] = False
    stack: str
    refused: list[str]
