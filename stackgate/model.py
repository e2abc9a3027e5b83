"""The one pydantic base every stackgate model derives from: frozen, unknown keys are errors.

Models that read a format stackgate does not own (uv.lock) relax `extra` on purpose and say
why; manifests additionally turn off coercion (stackgate.manifest.Strict).
"""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from stackgate.errors import BadInput

M = TypeVar("M", bound=BaseModel)


class StrictModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def validation_problems(exc: ValidationError) -> list[str]:
    """Every problem of a model's input at once, one `dotted.path: message` line each, for
    BadInput's details (manifests get richer lines:
    stackgate.manifest.loading.format_validation_errors)."""
    return [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()]


def parsed(model: type[M], data: object, refusal: str, limit: int | None = None) -> M:
    """`data` as a `model`, else BadInput(refusal) with its problems (the first `limit`)."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise BadInput(refusal, details=validation_problems(exc)[:limit]) from None
