"""Engine plumbing: version probes on recorded real outputs, cleanup, selection, exit 3."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from builder.image.build import _compare
from stackgate.containers.base import (
    ENGINES,
    KEEP_ENV,
    BuildSpec,
    BuiltImage,
    ContainerEngine,
    RunResult,
    RunSpec,
    parse_version,
    require_version,
)
from stackgate.containers.buildah import StorageConfig
from stackgate.containers.docker import DockerConfig
from stackgate.containers.select import ENGINE_CHOICES, ENGINE_CLASSES, open_engine
from stackgate.errors import EnvironmentProblem

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize(
    ("engine", "fixture", "version"),
    [
        ("buildah", "buildah-version-1.28.2.json", "1.28.2"),
        ("podman", "podman-version-4.3.1.json", "4.3.1"),
        ("docker", "engine-api-version-podman-4.3.1.json", "1.41"),
    ],
)
def test_version_from_recorded_output(engine: str, fixture: str, version: str) -> None:
    assert parse_version(engine, (DATA / fixture).read_text()) == version  # type: ignore[arg-type]


def test_version_too_old_says_need_and_found() -> None:
    with pytest.raises(EnvironmentProblem, match=r"buildah: need >= 1.28, found 1.27.3"):
        require_version("buildah", "1.27.3", "1.28")
    require_version("podman", "4.3.1", "4.3")
    require_version("buildah", "1.33.0-dev", "1.28")


def test_version_output_not_json() -> None:
    with pytest.raises(EnvironmentProblem, match="not JSON"):
        parse_version("buildah", "buildah version 1.28.2 (image-spec 1.1.0-rc2)")


class _Recording(ContainerEngine):
    """A stand-in engine (no container tool involved) to test the cleanup contract."""

    name = "buildah"
    minimum = "1.0"

    def __init__(self) -> None:
        super().__init__()
        self.removed: list[str] = []

    @classmethod
    def configured(cls, storage: StorageConfig, docker: DockerConfig) -> ContainerEngine:
        return cls()

    def probe_version(self) -> str:
        return "1.2"

    def build(self, spec: BuildSpec) -> BuiltImage:
        self.track(spec.tag)
        if "boom" in spec.tag:
            raise RuntimeError("build failed")
        return BuiltImage("buildah", spec.tag, "sha256:x", None)

    def tag(self, image: BuiltImage, ref: str) -> None:
        self.track(ref)

    def export_oci(self, image: BuiltImage, path: Path) -> str:
        return "sha256:y"

    def remove(self, ref: str) -> None:
        self.removed.append(ref)

    def run(self, spec: RunSpec) -> RunResult:
        raise NotImplementedError("the cleanup tests build only")


def _spec(tag: str) -> BuildSpec:
    return BuildSpec(Path("."), Path("Containerfile"), tag, {}, 0)


def test_everything_made_is_removed_even_when_a_build_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEEP_ENV, raising=False)
    engine = _Recording()
    with pytest.raises(RuntimeError), engine:
        built = engine.build(_spec("localhost/a:build-1"))
        engine.tag(built, "localhost/a:mine")
        engine.keep("localhost/a:mine")
        engine.build(_spec("localhost/a:build-boom"))
    assert engine.removed == ["localhost/a:build-boom", "localhost/a:build-1"]


def test_keep_env_keeps_builds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEEP_ENV, "1")
    engine = _Recording()
    with engine:
        engine.build(_spec("localhost/a:build-2"))
    assert engine.removed == []


def test_compare_reports_a_difference() -> None:
    a = BuiltImage("buildah", "a", "sha256:1", "sha256:m")
    b = BuiltImage("buildah", "b", "sha256:2", "sha256:m")
    check = _compare(a, b, ("sha256:o", "sha256:o"))
    assert check.identical is False
    assert check.compared["config digest (image id)"] == ["sha256:1", "sha256:2"]
    assert _compare(a, a, None).identical is True


def test_no_docker_daemon_is_an_environment_problem() -> None:
    with pytest.raises(EnvironmentProblem, match="engine 'docker' is not usable") as err, open_engine(
        "docker", docker=DockerConfig(base_url="unix:///nonexistent/docker.sock")
    ):
        pass
    assert err.value.details[0].startswith("docker: no daemon answers (")


def test_no_engine_at_all_exits_3_naming_what_was_tried(tmp_path: Path, repo_root: Path) -> None:
    """The real CLI with an empty PATH and a Docker socket that does not exist."""
    env = {**os.environ, "PATH": str(tmp_path), "DOCKER_HOST": f"unix://{tmp_path}/docker.sock"}
    done = subprocess.run(
        [sys.executable, "-m", "builder", "image", "cu128", "--json"],
        capture_output=True, text=True, env=env, cwd=repo_root, timeout=120, check=False,
    )
    assert done.returncode == 3, done.stderr
    out = json.loads(done.stdout)
    assert out["error"] == "no container engine usable"
    tried = "\n".join(out["details"])
    assert "docker: no daemon answers" in tried
    assert "buildah not found on PATH" in tried
    assert "podman not found on PATH" in tried


def test_compare_needs_some_digest() -> None:
    a = BuiltImage("docker", "a", "sha256:1", None)
    assert _compare(a, a, None).identical is True
    unknown = BuiltImage.__new__(BuiltImage)
    object.__setattr__(unknown, "image_id", None)
    object.__setattr__(unknown, "manifest_digest", None)
    assert _compare(unknown, unknown, None).identical is False


def test_unpullable_base_is_explained() -> None:
    from stackgate.containers.buildah import _explain
    from stackgate.errors import CommandFailed

    # Recorded from `python -m builder image cu128 --engine buildah` on this host (no registry).
    stderr = (
        "Trying to pull docker.io/nvidia/cuda@sha256:520292dbb4f755fd360766059e62956e9379485d9e073bbd2f6e3c20c270ed66...\n"
        "Error: creating build container: initializing source docker://nvidia/cuda@sha256:520292dbb4f755fd"
        "360766059e62956e9379485d9e073bbd2f6e3c20c270ed66: pinging container registry registry-1.docker.io: "
        'Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io on 10.255.255.53:53: no such host\n'
    )
    err = _explain(CommandFailed(["buildah", "build"], 125, "", stderr))
    assert isinstance(err, EnvironmentProblem)
    assert err.message == (
        "cannot pull nvidia/cuda@sha256:520292dbb4f755fd360766059e62956e9379485d9e073bbd2f6e3c20c270ed66"
        " (no registry reachable?)"
    )
    other = CommandFailed(["buildah", "build"], 1, "", "RUN failed")
    assert _explain(other) is other


def test_the_registry_holds_every_engine_and_its_capabilities() -> None:
    """One list of names (base.EngineName, in auto order), one class per name; what an engine
    can do is asked of its class, so a run needing GPUs passes over exactly those that cannot."""
    assert tuple(ENGINE_CLASSES) == ENGINES == ENGINE_CHOICES[1:]
    for name, cls in ENGINE_CLASSES.items():
        engine = cls.configured(StorageConfig(), DockerConfig())
        assert engine.name == name and isinstance(engine, cls)
    no_gpus = [name for name, cls in ENGINE_CLASSES.items() if not cls.can_run_gpus]
    assert no_gpus == ["buildah"]
    for name in no_gpus:
        with (
            pytest.raises(EnvironmentProblem, match="cannot give a container GPUs"),
            open_engine(name, gpus=True),
        ):
            pass
