"""The one pydantic base every stackgate model derives from: frozen, unknown keys are errors.

Models that read a format stackgate does not own (uv.lock) relax `extra` on purpose and say
why; manifests additionally turn off coercion (stackgate.manifest.Strict).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, ValidationError


class StrictModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def validation_problems(exc: ValidationError) -> list[str]:
    """Every problem of a model's input at once, one `dotted.path: message` line each, for
    BadInput's details (manifests get richer lines: stackgate.loading.format_validation_errors)."""
    return [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()]
