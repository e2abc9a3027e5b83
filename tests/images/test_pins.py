"""images/base-images.toml: digests with their tags, every problem at once, refresh in place."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.image.pins import load_pins, refresh_pins
from stackgate.errors import BadInput

D1 = "sha256:" + "1" * 64
D2 = "sha256:" + "2" * 64


def test_the_shipped_pins_load_and_cover_the_stacks() -> None:
    pins = load_pins()
    assert pins.uv.tag.startswith("ghcr.io/astral-sh/uv:0.")
    assert pins.uv.digest.startswith("sha256:")
    bases = pins.for_cuda("13.0.1")
    assert bases.devel.tag.endswith(":13.0.1-devel-ubuntu24.04")
    assert bases.runtime.tag.endswith(":13.0.1-runtime-ubuntu24.04")
    assert pins.for_cuda("12.8").version == "12.8.1"  # cu128 says 12.8: the x.y.z pin serves
    assert pins.python_for("3.12").startswith("3.12.")


def test_unknown_cuda_names_the_pinned_ones() -> None:
    with pytest.raises(BadInput) as err:
        load_pins().for_cuda("11.8")
    assert "13.0.1" in " ".join(err.value.lines())


def _write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "pins.toml"
    path.write_text(body)
    return path


GOOD = f"""\
[uv]
image = "ghcr.io/astral-sh/uv@{D1}"  # ghcr.io/astral-sh/uv:0.13.0
python = {{ "3.12" = "3.12.12" }}

[cuda."13.0.1"]
devel = "docker.io/nvidia/cuda@{D1}"  # docker.io/nvidia/cuda:13.0.1-devel-ubuntu24.04
runtime = "docker.io/nvidia/cuda@{D2}"  # docker.io/nvidia/cuda:13.0.1-runtime-ubuntu24.04
"""


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    bad = f"""\
[uv]
image = "ghcr.io/astral-sh/uv:0.13.0"
python = {{ "3.12" = "3.13.1" }}

[cuda."13.0.1"]
devel = "docker.io/nvidia/cuda@{D1}"  # docker.io/nvidia/cuda:latest
runtime = "docker.io/nvidia/cuda@{D2}"
"""
    with pytest.raises(BadInput) as err:
        load_pins(_write(tmp_path, bad))
    text = "\n".join(err.value.details)
    assert "uv.image: 'ghcr.io/astral-sh/uv:0.13.0' is not pinned by digest" in text
    assert "uv.python" in text
    assert "cuda.13.0.1.devel: tag 'latest'" in text
    assert "cuda.13.0.1.runtime: no '# repository:tag' comment" in text


def test_tag_on_another_repository_is_refused(tmp_path: Path) -> None:
    body = GOOD.replace("# docker.io/nvidia/cuda:13.0.1-devel", "# docker.io/other/cuda:13.0.1-devel")
    with pytest.raises(BadInput, match="1 problem"):
        load_pins(_write(tmp_path, body))


def test_refresh_rewrites_only_moved_digests(tmp_path: Path) -> None:
    path = _write(tmp_path, "# header kept\n" + GOOD)
    new = "sha256:" + "3" * 64
    # Stands in for `skopeo inspect --raw docker://TAG` against a registry (none reachable here).
    moved = {"docker.io/nvidia/cuda:13.0.1-devel-ubuntu24.04": new}

    def resolver(tag: str) -> str:
        return moved.get(tag, {"ghcr.io/astral-sh/uv:0.13.0": D1}.get(tag, D2))

    changes = refresh_pins(path, resolver)
    assert changes == [f"docker.io/nvidia/cuda:13.0.1-devel-ubuntu24.04: {D1} -> {new}"]
    text = path.read_text()
    assert text.startswith("# header kept\n")
    assert f'devel = "docker.io/nvidia/cuda@{new}"  # docker.io/nvidia/cuda:13.0.1-devel-ubuntu24.04' in text
    assert load_pins(path).for_cuda("13.0.1").devel.digest == new
    assert refresh_pins(path, lambda tag: moved.get(tag, load_pins(path).uv.digest if "uv" in tag else D2)) == []
