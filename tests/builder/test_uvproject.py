"""The generated uv project: what it pins, and which manifest changes make a lock stale."""

from __future__ import annotations

import tomllib

import pytest

from builder.lock.uvproject import parse_index_map, render_pyproject
from stackgate.errors import BadInput
from stackgate.lock.state import LOCK_FIELDS, manifest_hash
from stackgate.manifest.loading import load_stack


def test_cu130_project_pins_cuda_packages_to_their_indexes() -> None:
    manifest = load_stack("cu130").manifest
    text = render_pyproject(manifest, "stacks/cu130.toml")
    assert text.startswith("# DO NOT EDIT") and "nox -s lock-cu130" in text.splitlines()[1]
    data = tomllib.loads(text)
    uv = data["tool"]["uv"]
    assert uv["sources"]["torch"] == {"index": "pytorch-cu130"}
    assert uv["sources"]["sgl-kernel"] == {"index": "sgl-kernel-cu130"}
    assert uv["sources"]["sglang"]["git"] == "https://github.com/sgl-project/sglang"
    assert "torch==2.9.1+cu130" in uv["override-dependencies"]
    assert uv["environments"] == ["sys_platform == 'linux' and platform_machine == 'x86_64'"]
    assert data["project"]["requires-python"] == "==3.12.*"
    indexes = {i["name"]: i for i in uv["index"]}
    assert indexes["pytorch-cu130"]["explicit"] is True
    assert indexes["pypi"].get("default") is True and "explicit" not in indexes["pypi"]
    assert data["tool"]["stackgate"]["manifest_hash"] == manifest_hash(manifest)


def test_only_lock_fields_change_the_hash() -> None:
    manifest = load_stack("cu130").manifest
    same = manifest.model_copy(update={"description": "changed", "serving": {}})
    assert manifest_hash(same) == manifest_hash(manifest)
    moved = manifest.model_copy(update={"overrides": [*manifest.overrides, "numpy<3"]})
    assert manifest_hash(moved) != manifest_hash(manifest)
    assert set(LOCK_FIELDS) == {"name", "python", "platform", "indexes", "packages", "overrides"}


def test_index_map_remaps_indexes_and_git_sources(tmp_path: object) -> None:
    manifest = load_stack("cu130").manifest
    mapping = parse_index_map(
        ["pytorch-cu130=https://mirror.example/cu130", "sglang=file:///srv/git/sglang.git"],
        manifest,
    )
    data = tomllib.loads(render_pyproject(manifest, "x", index_map=mapping))
    urls = {i["name"]: i["url"] for i in data["tool"]["uv"]["index"]}
    assert urls["pytorch-cu130"] == "https://mirror.example/cu130"
    assert data["tool"]["uv"]["sources"]["sglang"]["git"] == "file:///srv/git/sglang.git"
    assert data["tool"]["stackgate"]["index_map"]["pytorch-cu130"] == "https://mirror.example/cu130"


@pytest.mark.parametrize("item", ["nosuch=https://x", "pypi", "pypi=ftp://x"])
def test_bad_index_maps_are_bad_input(item: str) -> None:
    with pytest.raises(BadInput):
        parse_index_map([item], load_stack("cu130").manifest)
