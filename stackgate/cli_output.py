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
