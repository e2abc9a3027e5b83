"""run_in_image: per-engine GPU flags and what happens without an engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from stackgate import container_run
from stackgate.container_run import (
    CDI_ALL_GPUS,
    ENV_PYTHON,
    TOOL_PYTHON,
    docker_socket_problem,
    gpu_args,
    run_in_image,
)
from stackgate.errors import EnvironmentProblem, ToolNotFound


def test_gpu_flags_per_engine() -> None:
    assert gpu_args("docker") == ["--gpus", "all"]
    assert gpu_args("podman") == ["--device", "nvidia.com/gpu=all"] == ["--device", CDI_ALL_GPUS]


def test_layout_is_stable() -> None:
    assert ENV_PYTHON == "/opt/stackgate/env/bin/python"
    assert TOOL_PYTHON == "/opt/stackgate/tool/bin/python"


def test_socket_problems(tmp_path: Path) -> None:
    assert docker_socket_problem(f"unix://{tmp_path}/none.sock") == f"no socket at {tmp_path}/none.sock"
    (tmp_path / "file.sock").write_text("")
    assert "file.sock" in str(docker_socket_problem(f"unix://{tmp_path}/file.sock"))
    assert docker_socket_problem("tcp://127.0.0.1:2375") is None  # not checked: the SDK tries


def test_no_engine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/docker.sock")
    with pytest.raises(EnvironmentProblem, match="no container engine to run the image"):
        run_in_image("localhost/x@sha256:" + "0" * 64, ["true"])
    with pytest.raises(EnvironmentProblem, match="docker: no daemon answers"):
        run_in_image("localhost/x", ["true"], engine="docker")
    with pytest.raises(ToolNotFound):
        run_in_image("localhost/x", ["true"], engine="podman")


def test_podman_argv_carries_cdi_gpus_env_and_mounts(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []

    def fake_run_cli(engine: str, cli: list[str], argv: list[str], container: str, timeout: float | None) -> container_run.RunResult:
        # Stands in for the podman process (podman cannot run containers on this CI host
        # without runc and lowered ulimits); only the argv we would give it is checked.
        seen.append(cli)
        return container_run.RunResult(engine, argv, 0, "", "", container)

    monkeypatch.setattr(container_run, "_run_cli", fake_run_cli)
    monkeypatch.setattr(container_run, "_pick", lambda engine: ("podman", None))
    run_in_image("img", [ENV_PYTHON, "-V"], env={"HF_TOKEN": "x"}, mounts={"/models": "/models", "/out": "/out:rw"})
    [cli] = seen
    assert cli[:2] == ["podman", "run"]
    assert cli[cli.index("--device") + 1] == "nvidia.com/gpu=all"
    assert "--rm" in cli and "--network=host" in cli
    assert "HF_TOKEN=x" in cli
    assert "/models:/models:ro" in cli and "/out:/out:rw" in cli
    assert cli[-3:] == ["img", ENV_PYTHON, "-V"]
