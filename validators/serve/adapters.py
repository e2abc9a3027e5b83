"""A serving profile becomes an engine command: argv, environment, and how to tell it is ready.

The engine itself (argv, profile checks, ready line, default port) is a module of the
stackgate.engines registry; this module adds what every launch shares: the environment and
the LaunchSpec lifecycle runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from stackgate.engines import ENGINES
from stackgate.errors import BadInput
from stackgate.manifest import Manifest, ServingProfile
from stackgate.topology import Topology

DEFAULT_PORTS: dict[str, int] = {
    name: e.default_port for name, e in ENGINES.items() if e.default_port is not None
}

# Variables every launch gets: unbuffered logs (readiness and hang detection read them live)
# and no usage telemetry from the engine.
BASE_ENV: dict[str, str] = {
    "PYTHONUNBUFFERED": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}


@dataclass(frozen=True)
class LaunchSpec:
    """Everything lifecycle needs to start and judge one server."""

    engine: str
    argv: list[str]
    env: dict[str, str]
    host: str
    port: int
    model: str  # the name requests must send in `model`
    ready_pattern: str | None
    health_path: str
    notes: list[str] = field(default_factory=list)  # profile fields this engine cannot take

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"


def served_name(profile: ServingProfile) -> str:
    return profile.served_model_name or profile.model_path


def launch_env(
    manifest: Manifest, profile: ServingProfile, topology: Topology | None
) -> dict[str, str]:
    """Stack env (common + the topology's NCCL profile) < profile env; both over BASE_ENV."""
    env = dict(BASE_ENV)
    env.update(manifest.env_for(topology))
    env.update(profile.env)
    return env


def build_launch(
    manifest: Manifest,
    profile: ServingProfile,
    *,
    python: str,
    host: str,
    port: int,
    topology: Topology | None = None,
) -> LaunchSpec:
    """The launch of `profile` on host:port with the environment's interpreter `python`."""
    env = launch_env(manifest, profile, topology)
    engine = ENGINES[profile.engine]
    problems = engine.problems(profile, env)
    if problems:
        raise BadInput(f"serving profile cannot start {engine.name}", details=problems)
    argv, notes = engine.argv(profile, python, host, port)
    default_ready = engine.ready_pattern
    return LaunchSpec(
        engine=profile.engine,
        argv=argv,
        env=env,
        host=host,
        port=port,
        model=served_name(profile),
        ready_pattern=profile.ready_log_pattern or default_ready,
        health_path=profile.health_path,
        notes=notes,
    )
