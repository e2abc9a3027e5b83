"""The cu130 recipe, rendered for real and checked by its structure (it cannot be built here:
no registry for the CUDA base, no PyTorch index for the lock)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from builder.compile.jobs import plan_jobs
from builder.image.build import ImageRequest, prepare
from builder.image.context import assemble
from builder.image.pins import load_pins
from builder.image.recipe import RecipeInputs, render
from builder.lock.resolve import write_project
from stackgate.containers.base import context_tar
from stackgate.errors import BadInput
from stackgate.layout import LockFiles
from stackgate.lock.state import read_lock
from stackgate.manifest.loading import LoadedStack, load_stack
from stackgate.paths import project_root
from stackgate.resource_limits import HostResources

GIB = 1024**3
# A 2-CPU, 24 GiB host with no swap (this CI machine's kind), fixed so the plan is known.
RESOURCES = HostResources(affinity_cpus=16, mem_available=24 * GIB, mem_total=24 * GIB)


# Only what the image code reads from uv.lock: the git entry of the patched package.
SGLANG_COMMIT = "0" * 40
STAND_IN_LOCK = f"""version = 1
revision = 3
requires-python = "==3.12.*"

[[package]]
name = "sglang"
version = "0.5.9"
source = {{ git = "https://github.com/sgl-project/sglang?subdirectory=python&rev=v0.5.9#{SGLANG_COMMIT}" }}
"""


@pytest.fixture
def cu130_lock(tmp_path: Path) -> Path:
    """The generated uv project for cu130 (the builder's own code) and a uv.lock that stands
    in for the one `uv lock` would write with the PyTorch index reachable."""
    loaded = load_stack("cu130")
    files = LockFiles(tmp_path / "cu130")
    write_project(loaded, files, {})
    files.lockfile.write_text(STAND_IN_LOCK + _registry_pins(loaded))
    return files.folder


def _registry_pins(loaded: LoadedStack) -> str:
    """Lock entries for the manifest's index pins, at the pinned versions (the builder refuses a
    lock that contradicts the manifest, issue 10.5)."""
    out = ""
    for name, pin in sorted(loaded.manifest.packages.items()):
        if pin.version is not None:
            out += f'\n[[package]]\nname = "{name}"\nversion = "{pin.version}"\n'
            out += 'source = { registry = "https://example.invalid/simple" }\n'
    return out


@pytest.fixture
def recipe(cu130_lock: Path) -> tuple[RecipeInputs, str]:
    inputs = prepare(load_stack("cu130"), ImageRequest(lock_dir=cu130_lock, resources=RESOURCES)).inputs
    return inputs, render(inputs)


def _stages(text: str) -> list[str]:
    return re.split(r"^(?=FROM )", text, flags=re.M)[1:]


def test_every_image_is_pinned_by_digest_and_none_is_latest(recipe: tuple[RecipeInputs, str]) -> None:
    _, text = recipe
    refs = re.findall(r"^FROM (\S+)", text, flags=re.M) + re.findall(r"COPY --from=(\S+)", text)
    external = [r for r in refs if r not in ("build",)]
    assert len(external) == 3  # uv, the build base, the runtime base
    for ref in external:
        assert re.fullmatch(r"[a-z0-9./_-]+@sha256:[0-9a-f]{64}", ref), ref
    assert "latest" not in text
    pins = load_pins()
    bases = pins.for_cuda("13.0.1")
    assert f"FROM {bases.devel.ref} AS build" in text
    assert f"COPY --from={pins.uv.ref} /uv /usr/local/bin/uv" in text
    assert "docker.io/nvidia/cuda:13.0.1-devel-ubuntu24.04" in text  # the tag, for people


def test_runtime_keeps_nvcc_because_the_stack_jits(recipe: tuple[RecipeInputs, str]) -> None:
    inputs, text = recipe
    _build, runtime = _stages(text)
    assert runtime.startswith(f"FROM {load_pins().for_cuda('13.0.1').devel.ref} AS runtime")
    assert "min_nvcc_for_jit" in inputs.runtime_note
    assert "COPY --from=build /opt/stackgate/ /opt/stackgate/" in runtime
    assert "uv sync" not in runtime  # nothing resolves or installs in the runtime stage


def test_lock_is_copied_before_the_frozen_sync(recipe: tuple[RecipeInputs, str]) -> None:
    _, text = recipe
    build = _stages(text)[0]
    copy_lock = build.index("COPY stackgate/stack/ /opt/stackgate/stack/")
    assert "WORKDIR /opt/stackgate/stack/locks/cu130" in build
    sync = build.index("uv sync --frozen --no-dev --no-install-project")
    assert copy_lock < sync
    assert "uv lock" not in text and "pip install -r" not in text
    # Python comes from the pinned uv, at the pinned full version.
    python = load_pins().python_for("3.12")
    assert f"uv python install {python}" in build
    assert build.index(f"uv python install {python}") < sync


def test_the_job_plan_reaches_the_source_build(recipe: tuple[RecipeInputs, str]) -> None:
    inputs, text = recipe
    build = _stages(text)[0]
    plan = plan_jobs(load_stack("cu130").manifest.build, resources=RESOURCES)
    assert inputs.plan_args == {**plan.env(), "TORCH_CUDA_ARCH_LIST": "12.0a"}  # [build] cuda_archs
    for name in inputs.plan_args:
        assert re.search(rf"^ARG {name}$", build, flags=re.M), name
    args = inputs.build_args(1700000000)
    assert args["MAX_JOBS"] == str(plan.jobs)
    assert args["TORCH_CUDA_ARCH_LIST"] == "12.0a"
    assert args["SOURCE_DATE_EPOCH"] == "1700000000"
    # sglang is a patched git source: left out of the sync, built from the patched tree,
    # after the ARGs so MAX_JOBS & co. are in its environment.
    assert "--no-install-package sglang" in build
    source = build.index("COPY stackgate/sources/sglang/ /opt/stackgate/src/sglang/")
    assert build.index("ARG MAX_JOBS") < source
    assert "uv pip install --python /opt/stackgate/env/bin/python --no-deps" in build
    assert "/opt/stackgate/src/sglang/python" in build
    assert "0000-placeholder-local-patches.patch" in build
    assert f"locked commit {SGLANG_COMMIT}" in build


def test_no_secrets_and_no_unpinned_downloads(recipe: tuple[RecipeInputs, str]) -> None:
    _, text = recipe
    for word in ("TOKEN", "SECRET", "PASSWORD", "--mount=type=secret"):
        assert word not in text.upper(), word
    for fetch in ("ADD ", "curl", "wget", "apt-get", "git clone", "pip download"):
        assert fetch not in text, fetch
    assert 'FLASHINFER_CUDA_ARCH_LIST="12.0a"' in text  # the manifest's common environment
    assert "NCCL_PROTO" not in text  # topology profiles are chosen at run time


def test_labels(recipe: tuple[RecipeInputs, str]) -> None:
    inputs, text = recipe
    for key in (
        "io.stackgate.stack", "io.stackgate.manifest.sha256", "io.stackgate.lock.sha256",
        "io.stackgate.tool.version", "io.stackgate.source.commit",
        "org.opencontainers.image.revision", "org.opencontainers.image.base.digest",
    ):
        assert f"{key}=" in text, key
    assert inputs.labels["io.stackgate.stack"] == "cu130"


def test_credentials_in_the_environment_are_refused(tmp_path: Path, cu130_lock: Path) -> None:
    text = (project_root() / "stacks" / "cu130.toml").read_text()
    text = text.replace('[environment.common]\n', '[environment.common]\nHF_TOKEN = "hf_abcdefghijklmnopqrstuvwxyz"\n')
    # a copy, not a symlink: patch files must resolve inside the manifest's folder
    shutil.copytree(project_root() / "stacks" / "patches", tmp_path / "patches")
    path = tmp_path / "cu130.toml"
    path.write_text(text)
    # refused when the manifest is read (before any lock, venv, image or record holds it)
    with pytest.raises(BadInput) as err:
        load_stack(path)
    assert err.value.error_id == "manifest-invalid"
    assert "environment.common.HF_TOKEN" in " ".join(err.value.details)
    assert "hf_abcdefghijklmnopqrstuvwxyz" not in " ".join(err.value.details)


def test_unpinned_base_override_is_refused(cu130_lock: Path) -> None:
    with pytest.raises(BadInput, match="pinned by digest"):
        prepare(load_stack("cu130"), ImageRequest(lock_dir=cu130_lock, base="nvidia/cuda:13.0.1-devel-ubuntu24.04", resources=RESOURCES))


def test_stale_lock_is_refused(tmp_path: Path) -> None:
    files = LockFiles(tmp_path / "cu130")
    write_project(load_stack("cu128"), files, {})  # a lock of another manifest
    files.lockfile.write_text("version = 1\n")
    with pytest.raises(BadInput):
        prepare(load_stack("cu130"), ImageRequest(lock_dir=files.folder, resources=RESOURCES))


def test_context_holds_only_named_files(tmp_path: Path, cu130_lock: Path, recipe: tuple[RecipeInputs, str]) -> None:
    inputs, text = recipe
    source = tmp_path / "sglang-src"
    (source / "python").mkdir(parents=True)
    (source / "python" / "pyproject.toml").write_text("[project]\nname='sglang'\n")
    (source / ".git").mkdir()
    (cu130_lock / ".venv").mkdir()  # must not ride along
    context = tmp_path / "ctx"
    loaded = load_stack("cu130")
    state = read_lock(loaded, LockFiles(cu130_lock))
    containerfile = assemble(context, inputs, loaded, state, tool_root=project_root(), sources={"sglang": source})
    assert containerfile.read_text() == text
    files = {str(p.relative_to(context)) for p in context.rglob("*") if p.is_file()}
    tops = {f.split("/")[1] for f in files if f.startswith("stackgate/")}
    assert tops == {"stack", "sources", "tool"}
    assert "stackgate/stack/cu130.toml" in files
    assert "stackgate/stack/rules.toml" in files
    assert {"stackgate/stack/locks/cu130/uv.lock", "stackgate/stack/locks/cu130/pyproject.toml"} <= files
    assert "stackgate/stack/patches/cu130/0000-placeholder-local-patches.patch" in files
    assert "stackgate/sources/sglang/python/pyproject.toml" in files
    assert not [f for f in files if "/.git/" in f or "/.venv" in f or "__pycache__" in f]
    assert "stackgate/tool/uv.lock" in files and "stackgate/tool/stackgate/containers/run.py" in files
    # The docker SDK gets it as a tar with a stable order and metadata.
    assert context_tar(context, 0) == context_tar(context, 0)


def test_hostile_source_fields_cannot_add_instructions(recipe: tuple[RecipeInputs, str]) -> None:
    """The loader refuses control characters (tests/foundation/test_manifest_hostile.py); if one
    got past it, the renderer still keeps comments one line and RUN arguments one word."""
    inputs, _ = recipe
    evil = inputs.source_packages[0].model_copy(update={
        "git": "https://x.invalid/r.git\nRUN touch /pwned-git",
        "ref": "v1\rRUN touch /pwned-ref",
        "subdirectory": "python $(touch /pwned-sub) ; touch /pwned-sub2",
        "patches": ["a.patch\nRUN touch /pwned-patch"],
    })  # fmt: skip
    text = render(inputs.model_copy(update={
        "description": "ok\nRUN touch /pwned-description", "source_packages": [evil],
    }))  # fmt: skip
    assert not re.search(r"^\s*RUN touch", text, flags=re.M)
    for line in text.splitlines():
        if "pwned" in line:
            assert line.lstrip().startswith("#") or "'" in line, line
    assert "'/opt/stackgate/src/sglang/python $(touch /pwned-sub) ; touch /pwned-sub2'" in text
