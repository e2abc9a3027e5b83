"""Build records made through the model the builder writes and the validators read.

Stands for `python -m builder build` output where a test needs an env's record but not its
contents (the builder and reproduce tests build real ones).
"""

from __future__ import annotations

from pathlib import Path

from stackgate.build_record import BuildHost, BuildRecord, JobPlan, ToolVersions, TreeHash
from stackgate.envtree import compute_tree, write_listing
from stackgate.resource_limits import HostResources
from stackgate.topology import Topology

_RESOURCES = HostResources(affinity_cpus=2, mem_available=20 << 30, mem_total=24 << 30)


def sample_build_record(
    stack: str,
    env: Path,
    *,
    tree: str = "ab" * 32,
    topology: Topology | None = "pcie",
    packages: dict[str, str] | None = None,
) -> BuildRecord:
    return BuildRecord(
        stack=stack,
        manifest_path=f"stacks/{stack}.toml",
        manifest_hash="11" * 32,
        lock_hash="22" * 32,
        env_name=env.name,
        env_path=str(env),
        created_at="2026-01-01T00:00:00+00:00",
        host=BuildHost(
            hostname="test", kernel="6.1", machine="x86_64", os_release="Debian GNU/Linux 12",
            usable_cpus=2, mem_total_bytes=24 << 30, swap_bytes=0, cgroup_version="v2",
        ),
        tools=ToolVersions(stackgate="0.1.0", uv="0.9", python="3.12.1",
                           python_path="/usr/bin/python3.12"),
        timings_s={"install": 1.0},
        topology=topology,
        topology_source="flag" if topology else "none",
        env_profile={"NCCL_PROTO": "LL"},
        job_plan=JobPlan(
            jobs=1, nvcc_threads=1, limited_by="cpu", usable_cpus=2,
            usable_memory_bytes=20 << 30, memory_margin_bytes=0, memory_budget_bytes=20 << 30,
            memory_per_job_bytes=4 << 30, memory_per_job_source="manifest", swap_bytes=0,
            resources=_RESOURCES, reasons=[],
        ),
        packages=packages if packages is not None else {"torch": "2.9.1", "sgl-kernel": "0.3.21"},
        tree=TreeHash(sha256=tree, files=3, bytes=100),
    )  # fmt: skip


def write_sample_env(folder: Path, stack: str, *, tree: str = "ab" * 32) -> Path:
    """An env folder holding only a build record."""
    env = folder / f"{stack}-env"
    env.mkdir(parents=True)
    sample_build_record(stack, env, tree=tree).write(env)
    return env


def write_hashed_sample_env(folder: Path, stack: str, *, seed: str = "ab" * 32) -> Path:
    """An env folder holding one stand-in installed file (its content from `seed`, so two
    seeds give two tree hashes), the per-file listing and a build record whose tree hash is
    the folder's real one: mark-good and the gate hash envs again before using them."""
    env = folder / f"{stack}-env"
    site = env / "lib" / "python3.12" / "site-packages"
    site.mkdir(parents=True)
    (site / "standin.py").write_text(f"SEED = {seed!r}\n")
    real = compute_tree(env)
    write_listing(env, real)
    record = sample_build_record(stack, env, tree=real.sha256)
    tree = TreeHash(sha256=real.sha256, files=real.files, bytes=real.bytes, scheme=real.scheme)
    record.model_copy(update={"tree": tree}).write(env)
    return env
