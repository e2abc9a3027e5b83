"""The tiny stack the image tests and benchmarks/images/image_build_times.py build images of, and the
quiet file server its local index is served by (shared here, not in a conftest, so that the
benchmark imports no test fixture module)."""

from __future__ import annotations

import http.server

TINY_MANIFEST = """\
schema_version = 1
name = "tiny"
description = "A two-package stack for image tests"
python = "{python}"

[host]
min_driver = "580"
cuda = "13.0.1"
target_archs = ["12.0a"]

[indexes.local]
url = "{index}"
explicit = false

[packages.tinyapp]
version = "1.0"
index = "local"

[build]
memory_per_job_gb = 1.0
max_jobs = 3

[environment.common]
TINY_STACK_MARK = "from-the-manifest"
CUDA_DEVICE_ORDER = "PCI_BUS_ID"

[validation]
required = ["host"]
"""


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass
