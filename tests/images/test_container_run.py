"""run_in_image: per-engine GPU flags, the one engine order, and what happens without one."""

from __future__ import annotations

from pathlib import Path

import pytest

from stackgate.containers.base import CDI_ALL_GPUS, ENGINES, RunSpec, gpu_args, mount_target
from stackgate.containers.buildah import Podman, StorageConfig
from stackgate.containers.docker import docker_socket_problem
from stackgate.containers.run import ENV_PYTHON, TOOL_PYTHON, run_in_image
from stackgate.errors import EnvironmentProblem


def test_gpu_flags_per_engine() -> None:
    assert gpu_args("docker") == ["--gpus", "all"]
    assert gpu_args("podman") == ["--device", "nvidia.com/gpu=all"] == ["--device", CDI_ALL_GPUS]


def test_mounts_are_read_only_unless_marked_rw() -> None:
    """The one reading of RunSpec.mounts that the CLI engines' --volume and docker's binds use."""
    assert mount_target("/models") == ("/models", "ro")
    assert mount_target("/out:rw") == ("/out", "rw")


def test_layout_is_stable() -> None:
    assert ENV_PYTHON == "/opt/stackgate/env/bin/python"
    assert TOOL_PYTHON == "/opt/stackgate/tool/bin/python"


def test_one_order_for_builds_and_runs() -> None:
    assert ENGINES == ("docker", "buildah", "podman")


def test_socket_problems(tmp_path: Path) -> None:
    assert docker_socket_problem(f"unix://{tmp_path}/none.sock") == f"no socket at {tmp_path}/none.sock"
    (tmp_path / "file.sock").write_text("")
    assert "file.sock" in str(docker_socket_problem(f"unix://{tmp_path}/file.sock"))
    assert docker_socket_problem("tcp://127.0.0.1:2375") is None  # not checked: the SDK tries


def test_no_engine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/docker.sock")
    with pytest.raises(EnvironmentProblem, match="no container engine usable") as caught:
        run_in_image("localhost/x@sha256:" + "0" * 64, ["true"])
    # GPUs asked for: buildah is passed over with the reason, the others were not found
    assert "buildah cannot give a container GPUs (no NVIDIA hook or CDI)" in caught.value.details
    with pytest.raises(EnvironmentProblem, match="engine 'docker' is not usable"):
        run_in_image("localhost/x", ["true"], engine="docker")
    with pytest.raises(EnvironmentProblem, match="engine 'podman' is not usable"):
        run_in_image("localhost/x", ["true"], engine="podman")


def test_podman_argv_carries_cdi_gpus_env_and_mounts(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A fake `podman` on PATH stands in for the real one (podman cannot run containers on
    this CI host without runc and lowered ulimits); it records the argv it was given."""
    seen = tmp_path / "argv.txt"
    fake = tmp_path / "podman"
    fake.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {seen}\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    spec = RunSpec("img", [ENV_PYTHON, "-V"], env={"HF_TOKEN": "x"},
                   mounts={"/models": "/models", "/out": "/out:rw"})  # fmt: skip
    result = Podman(StorageConfig(root=tmp_path / "root")).run(spec)
    cli = seen.read_text().splitlines()
    assert result.returncode == 0 and result.engine == "podman"
    assert cli[:3] == ["--root", str(tmp_path / "root"), "run"]
    assert cli[cli.index("--device") + 1] == "nvidia.com/gpu=all"
    assert "--rm" in cli and "--network=host" in cli
    assert "HF_TOKEN=x" in cli
    assert "/models:/models:ro" in cli and "/out:/out:rw" in cli
    assert cli[-3:] == ["img", ENV_PYTHON, "-V"]
