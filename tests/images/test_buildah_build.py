"""A real image, built twice with buildah from the same template the CUDA stacks use.

The base is a parameter (`--base`, pinned by digest): here a local busybox + CPython image,
since no registry is reachable. The build runs RUN steps, a real `uv sync --frozen` of a
lock made by the builder against a real index on 127.0.0.1, then the image is checked: equal
digests across two builds, the labels, a readable OCI archive, the env runs `python -c`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stackgate import proc
from stackgate.containers.run import ENV_PYTHON, run_in_image
from tests.images.conftest import Store, TinyStack

pytestmark = [pytest.mark.buildah]


def _image_cli(stack: TinyStack, store: Store, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = [
        sys.executable, "-m", "builder", "image", str(stack.loaded.path),
        "--engine", "buildah",
        "--lock-dir", str(stack.lock.folder),
        "--base", store.base.pinned,
        "--uv-image", store.uv.pinned,
        "--base-python", store.base.python,
        "--no-tool",
        *store.cli_args(),
        "--json",
        *extra,
    ]
    env = {k: v for k, v in os.environ.items() if k != "SOURCE_DATE_EPOCH"}
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600, check=False)


@pytest.fixture(scope="module")
def built(tiny_stack: TinyStack, buildah_store: Store, tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    archive = tmp_path_factory.mktemp("out") / "tiny.oci.tar"
    done = _image_cli(
        tiny_stack, buildah_store,
        "--tag", "localhost/stackgate-tiny:test",
        "--output", f"oci-archive:{archive}",
        "--check-reproducible",
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    result["_stderr"] = done.stderr
    return result


def test_two_builds_give_one_digest(built: dict[str, object]) -> None:
    repro = built["reproducible"]
    assert isinstance(repro, dict)
    assert repro["identical"] is True, built["_stderr"]
    compared = repro["compared"]
    for name in ("config digest (image id)", "manifest digest", "archive manifest digest"):
        first, second = compared[name]
        assert first is not None and first.startswith("sha256:")
        assert first == second, name
    assert compared["config digest (image id)"][0] == built["image_id"]
    assert "REPRODUCIBLE" in str(built["_stderr"])


def test_labels_say_what_is_inside(built: dict[str, object], tiny_stack: TinyStack) -> None:
    labels = built["labels"]
    assert isinstance(labels, dict)
    assert labels["io.stackgate.stack"] == "tiny"
    import hashlib

    assert labels["io.stackgate.manifest.sha256"] == hashlib.sha256(tiny_stack.loaded.path.read_bytes()).hexdigest()
    assert labels["io.stackgate.lock.sha256"] == hashlib.sha256(tiny_stack.lock.lockfile.read_bytes()).hexdigest()
    assert labels["io.stackgate.tool.version"]
    assert labels["io.stackgate.source.commit"] == labels["org.opencontainers.image.revision"]
    assert labels["org.opencontainers.image.base.digest"].startswith("sha256:")
    assert "io.buildah.version" not in labels  # dropped: the digest must not move with buildah


def test_job_plan_and_timestamp_are_build_args(built: dict[str, object]) -> None:
    args = built["build_args"]
    assert isinstance(args, dict)
    assert args["MAX_JOBS"] in {"1", "2", "3"}  # the manifest caps it at 3
    assert args["SOURCE_DATE_EPOCH"] == str(built["timestamp"])


def test_oci_archive_is_readable(built: dict[str, object]) -> None:
    archive = str(built["archive"])
    out = proc.run(["skopeo", "inspect", f"oci-archive:{archive}"]).stdout
    info = json.loads(out)
    assert info["Digest"] == built["archive_digest"]
    assert info["Labels"]["io.stackgate.stack"] == "tiny"
    raw = json.loads(proc.run(["skopeo", "inspect", "--raw", f"oci-archive:{archive}"]).stdout)
    assert raw["config"]["digest"] == built["image_id"]


def test_env_inside_runs_python(built: dict[str, object], buildah_store: Store) -> None:
    result = run_in_image(
        str(built["tag"]),
        [ENV_PYTHON, "-c", "import os, tinyapp, tinydep; print(tinyapp.__version__, tinydep.__version__, os.environ['TINY_STACK_MARK'])"],
        engine="buildah",
        gpus=False,
        storage=buildah_store.config,
        timeout=120,
    ).check()
    assert result.stdout.split() == ["1.0", "2.0", "from-the-manifest"]


def test_runtime_env_reaches_the_command(built: dict[str, object], buildah_store: Store) -> None:
    result = run_in_image(
        str(built["tag"]),
        ["/bin/sh", "-c", "echo $HF_TOKEN; exit 7"],
        engine="buildah",
        gpus=False,
        env={"HF_TOKEN": "given-at-run-time"},
        storage=buildah_store.config,
        timeout=120,
    )
    assert result.returncode == 7
    assert result.stdout.strip() == "given-at-run-time"


PODMAN_CONF = """\
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]
[engine]
runtime = "runc"
"""


def test_env_runs_under_podman(built: dict[str, object], buildah_store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """podman shares the store. On this CI host it runs containers only with runc and lowered
    ulimits (crun refuses hybrid cgroups; see feasibility.md): a containers.conf says so."""
    import shutil

    if shutil.which("podman") is None or shutil.which("runc") is None:
        pytest.skip("podman or runc not installed (apt-get install podman runc)")
    conf = tmp_path / "containers.conf"
    conf.write_text(PODMAN_CONF)
    monkeypatch.setenv("CONTAINERS_CONF", str(conf))
    result = run_in_image(
        str(built["tag"]),
        [ENV_PYTHON, "-c", "import tinyapp; print(tinyapp.__version__)"],
        engine="podman",
        gpus=False,
        storage=buildah_store.config,
        timeout=120,
    ).check()
    assert result.stdout.strip() == "1.0"


def test_buildah_refuses_gpus(built: dict[str, object], buildah_store: Store) -> None:
    from stackgate.errors import EnvironmentProblem

    with pytest.raises(EnvironmentProblem, match="buildah cannot give a container GPUs"):
        run_in_image(str(built["tag"]), ["true"], engine="buildah", storage=buildah_store.config)


def test_build_names_are_cleaned_up(built: dict[str, object], buildah_store: Store) -> None:
    out = proc.run(["buildah", *buildah_store.global_args(), "images", "--json"]).stdout
    names = [n for image in json.loads(out) for n in (image.get("names") or [])]
    assert "localhost/stackgate-tiny:test" in names
    assert not [n for n in names if ":build-" in n], names
    containers = json.loads(proc.run(["buildah", *buildah_store.global_args(), "containers", "--json"]).stdout or "[]")
    assert containers in ([], None)


@pytest.mark.network
@pytest.mark.slow
def test_tool_inside_the_image_runs_the_validators_cli(tiny_stack: TinyStack, buildah_store: Store) -> None:
    """With the stackgate tool included (its own venv from its own uv.lock, deps from PyPI),
    the validators CLI runs inside the image against the manifest baked into it."""
    argv = [
        sys.executable, "-m", "builder", "image", str(tiny_stack.loaded.path),
        "--engine", "buildah", "--lock-dir", str(tiny_stack.lock.folder),
        "--base", buildah_store.base.pinned, "--uv-image", buildah_store.uv.pinned,
        "--base-python", buildah_store.base.python,
        *buildah_store.cli_args(), "--tag", "localhost/stackgate-tiny:with-tool", "--json",
        "--check-reproducible",
    ]
    # This CI host reaches PyPI through a TLS-intercepting proxy whose CA is only in the host's
    # bundle: mount it for the build (it does not end up in the image).
    bundle = os.environ.get("SSL_CERT_FILE") or os.environ.get("PIP_CERT") or "/etc/ssl/certs/ca-certificates.crt"
    if Path(bundle).is_file():
        argv += ["--ca-bundle", bundle]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["reproducible"]["identical"] is True
    from stackgate.containers.run import IMAGE_STACK_DIR, TOOL_PYTHON

    # Stack names resolve inside the image as on the host (STACKGATE_STACKS_DIR).
    for command in (["validators", "--help"], ["builder", "check", "tiny"], ["builder", "check", f"{IMAGE_STACK_DIR}/tiny.toml"]):
        result = run_in_image(
            "localhost/stackgate-tiny:with-tool",
            [TOOL_PYTHON, "-m", *command],
            engine="buildah",
            gpus=False,
            storage=buildah_store.config,
            timeout=300,
        )
        assert result.returncode == 0, (command, result.stderr[-2000:])


def test_podman_engine_builds_the_same_recipe_reproducibly(
    tiny_stack: TinyStack, buildah_store: Store, tmp_path: Path
) -> None:
    """`--engine podman`: podman build (buildah inside) with the same flags, in the same store."""
    import shutil

    if shutil.which("podman") is None or shutil.which("runc") is None:
        pytest.skip("podman or runc not installed (apt-get install podman runc)")
    conf = tmp_path / "containers.conf"
    conf.write_text(PODMAN_CONF)
    argv = [
        sys.executable, "-m", "builder", "image", str(tiny_stack.loaded.path),
        "--engine", "podman", "--lock-dir", str(tiny_stack.lock.folder),
        "--base", buildah_store.base.pinned, "--uv-image", buildah_store.uv.pinned,
        "--base-python", buildah_store.base.python, "--no-tool", *buildah_store.cli_args(),
        "--tag", "localhost/stackgate-tiny:podman", "--check-reproducible", "--json",
    ]
    env = {k: v for k, v in os.environ.items() if k != "SOURCE_DATE_EPOCH"}
    env["CONTAINERS_CONF"] = str(conf)
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout)
    assert out["engine"] == "podman"
    assert out["reproducible"]["identical"] is True
    assert out["labels"]["io.stackgate.stack"] == "tiny"
