"""The one list of skips allowed under CI=true; every other skip fails there.

CI (`.ci/run`) runs on a machine like the developers': no GPU, no Docker daemon, root. Each
entry names a reason a test may still skip there and why nothing in `.ci/bootstrap` can cure it.
A skip whose reason matches no entry is turned into a failure under CI=true, so a tool that
`.ci/bootstrap` should install (podman, gcc, c++filt, uv, Python 3.12, tmpfs, cgroups, ...)
can never go missing quietly. The allowed skips are printed at the end of every run.
"""

from __future__ import annotations

import re
from typing import NamedTuple


class AllowedSkip(NamedTuple):
    pattern: str  # a regex searched in the skip reason
    why: str


ALLOWED_SKIPS: tuple[AllowedSkip, ...] = (
    AllowedSkip(r"no NVIDIA GPU", "CI machines have no GPU; `gpu` tests run on the lent H200"),
    AllowedSkip(r"no Docker daemon", "CI has the docker CLI but no daemon; buildah/podman run instead"),
    AllowedSkip(r"root reads mode-000", "CI runs as root, which reads mode-000 files"),
)


def allowed(reason: str) -> AllowedSkip | None:
    """The entry that allows a skip with this reason under CI, or None."""
    return next((a for a in ALLOWED_SKIPS if re.search(a.pattern, reason)), None)
