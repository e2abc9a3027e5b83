"""The docker engine, driven through the docker SDK against a real Engine API.

- A Docker daemon, where one answers (none on this CI host: skipped with the reason).
- podman's Docker-compatible service (`podman system service`), which this host can run:
  the same SDK calls (build streaming, inspect, tag, save, remove) against a real API
  server, and the full stack recipe built through it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from stackgate.containers.base import BuildSpec, unique_tag
from stackgate.containers.docker import DockerConfig, docker_socket_problem
from stackgate.containers.select import open_engine
from tests.images.conftest import Store, TinyStack

PODMAN_CONF = """\
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]
[engine]
runtime = "runc"
"""


def _scratch_context(tmp_path: Path) -> Path:
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    (ctx / "hello.txt").write_text("hello\n")
    (ctx / "Containerfile").write_text('FROM scratch\nCOPY hello.txt /hello.txt\nLABEL io.stackgate.stack="scratch-test"\n')
    return ctx


def _exercise(config: DockerConfig, tmp_path: Path) -> None:
    ctx = _scratch_context(tmp_path)
    with open_engine("docker", docker=config) as engine:
        assert engine.name == "docker"
        spec = BuildSpec(ctx, ctx / "Containerfile", unique_tag("scratch-test"), {"X": "1"}, 0)
        built = engine.build(spec)
        assert built.image_id.startswith("sha256:")
        assert built.labels["io.stackgate.stack"] == "scratch-test"
        digest = engine.export_oci(built, tmp_path / "out.tar")
        assert digest.startswith("sha256:")
        client = engine.client  # type: ignore[attr-defined]
        assert client.images.get(spec.tag).id == built.image_id
    # Leaving the engine removed the uniquely named build.
    import docker

    with pytest.raises(docker.errors.ImageNotFound):
        client.images.get(spec.tag)


def test_docker_daemon(tmp_path: Path) -> None:
    problem = docker_socket_problem()
    if problem is not None:
        pytest.skip(f"no Docker daemon answers ({problem}); the docker SDK path runs where one does")
    _exercise(DockerConfig(), tmp_path)


@pytest.fixture(scope="module")
def podman_service(buildah_store: Store, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """podman's Docker-compatible API on a unix socket, over the buildah store of the tests."""
    if shutil.which("podman") is None or shutil.which("runc") is None:
        pytest.skip("podman or runc not installed (apt-get install podman runc)")
    folder = tmp_path_factory.mktemp("podman-service")
    conf = folder / "containers.conf"
    conf.write_text(PODMAN_CONF)
    sock = folder / "api.sock"
    env = {**os.environ, "CONTAINERS_CONF": str(conf)}
    log = folder / "service.log"
    with log.open("wb") as sink:
        service = subprocess.Popen(
            ["podman", *buildah_store.global_args(), "system", "service", "--time=0", f"unix://{sock}"],
            env=env, stdout=subprocess.DEVNULL, stderr=sink,
        )
    try:
        deadline = time.monotonic() + 20
        while docker_socket_problem(f"unix://{sock}") is not None:
            if service.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"podman service did not start: {log.read_text()[-2000:]}")
            time.sleep(0.2)
        yield f"unix://{sock}"
    finally:
        service.terminate()
        try:
            service.wait(timeout=20)
        except subprocess.TimeoutExpired:
            service.kill()
            service.wait()


@pytest.mark.buildah
def test_sdk_against_podman_api(podman_service: str, tmp_path: Path) -> None:
    _exercise(DockerConfig(base_url=podman_service), tmp_path)


@pytest.mark.buildah
@pytest.mark.slow
def test_stack_image_through_the_sdk(
    podman_service: str, tiny_stack: TinyStack, buildah_store: Store, tmp_path: Path
) -> None:
    """The same recipe as the buildah test, built by the docker engine code path."""
    done = subprocess.run(
        [
            sys.executable, "-m", "builder", "image", str(tiny_stack.loaded.path),
            "--engine", "docker", "--docker-host", podman_service, "--build-network", "host",
            "--lock-dir", str(tiny_stack.lock.folder),
            "--base", buildah_store.base.pinned, "--uv-image", buildah_store.uv.pinned,
            "--base-python", buildah_store.base.python, "--no-tool",
            "--tag", "localhost/stackgate-tiny:sdk", "--check-reproducible", "--json",
        ],
        capture_output=True, text=True, timeout=600, check=False,
    )
    out = json.loads(done.stdout)
    assert out["engine"] == "docker", done.stderr
    assert out["labels"]["io.stackgate.stack"] == "tiny"
    repro = out["reproducible"]
    print(json.dumps({"seconds": out["seconds"], **repro}))  # shown with -s: the numbers for the record
    # The classic builder API stamps wall-clock times: the tool must say so, not claim equality.
    assert repro["note"].startswith("the docker SDK drives the classic builder")
    assert done.returncode == (0 if repro["identical"] else 1)
