"""The tiny stack the image tests and benchmarks/images/image_build_times.py build images of, and the
quiet file server its local index is served by (shared here, not in a conftest, so that the
benchmark imports no test fixture module)."""

from __future__ import annotations

import http.server

from tests.helpers.local_manifest import local_manifest

TINY_MANIFEST = local_manifest(  # a template: .format(python=..., index=...)
    name="tiny",
    description="A two-package stack for image tests",
    python="{python}",
    index="{index}",
    packages={"tinyapp": "1.0"},
    host=("580", "13.0.1", "12.0a"),
    sections=(
        "[build]\nmemory_per_job_gb = 1.0\nmax_jobs = 3\n\n[environment.common]\n"
        'TINY_STACK_MARK = "from-the-manifest"\nCUDA_DEVICE_ORDER = "PCI_BUS_ID"\n\n'
    ),
)


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass
