"""The build facts a validation record keeps, taken from the env's build record.

The build record is read through its model (stackgate.build_record); this module only picks
the fields a record compares (lock, tree, packages, tools, topology) and keeps the whole
record under `raw`.
"""

from __future__ import annotations

from pathlib import Path

from stackgate.build_record import BuildRecord, read_build_record
from validators.records.model import BuildFacts


def build_facts(record: BuildRecord, *, image_digest: str | None = None) -> BuildFacts:
    tools = record.tools.model_dump()
    return BuildFacts(
        lock_inputs_sha256=record.manifest_hash,
        lock_sha256=record.lock_hash,
        env_tree_sha256=record.tree.sha256,
        image_digest=image_digest,
        python=record.tools.python,
        topology=record.topology,
        packages=dict(record.packages),
        tools={k: str(v) for k, v in tools.items() if v is not None},
        raw=record.model_dump(mode="json"),
    )


def read_build_facts(env: Path, *, image_digest: str | None = None) -> BuildFacts:
    """The env's build facts; BadInput when the env has no readable build record."""
    return build_facts(read_build_record(env), image_digest=image_digest)
