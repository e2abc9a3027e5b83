"""The one pydantic base every stackgate model derives from: frozen, unknown keys are errors.

Models that read a format stackgate does not own (uv.lock) relax `extra` on purpose and say
why; manifests additionally turn off coercion (stackgate.manifest.Strict).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
