"""A wrong kernels request is refused before anything is built: exit 2, the file and the field
named (`builder build --kernels`, `builder kernels`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.builder.conftest import ROOT, run_builder

STACK = ROOT / "stacks" / "h200-sglang.toml"  # target_archs = ["9.0a"]
GOOD = {"engine": "flashinfer", "call": "flashinfer.jit.norm:gen_norm_module"}


@pytest.mark.parametrize(
    ("request_json", "says"),
    [
        ({"arch": "12.0a", "kernels": [GOOD]}, "arch: 12.0a is not one of the stack's"),
        ({"arch": "nine", "kernels": [GOOD]}, "arch"),
        ({"arch": "9.0a", "kernels": []}, "kernels"),
        ({"arch": "9.0a", "kernels": [{**GOOD, "engine": "vllm"}]}, "kernels.0.engine"),
        ({"arch": "9.0a", "kernels": [{**GOOD, "call": "flashinfer.jit.norm"}]}, "kernels.0.call"),
        ({"arch": "9.0a", "kernels": [{**GOOD, "extra": 1}]}, "kernels.0.extra"),
        ("not json", "quant.json"),
    ],
)
def test_a_wrong_request_is_refused_naming_file_and_field(
    tmp_path: Path, request_json: object, says: str
) -> None:
    request = tmp_path / "quant.json"
    text = request_json if isinstance(request_json, str) else json.dumps(request_json)
    request.write_text(text, encoding="utf-8")
    venvs = tmp_path / "envs"
    done = run_builder(["build", STACK, "--venv-root", venvs, "--kernels", request])
    assert done.returncode == 2, done.stderr
    assert str(request) in done.stderr and says in done.stderr, done.stderr
    assert not venvs.exists()


def test_kernels_options_need_a_request(tmp_path: Path) -> None:
    done = run_builder(["build", STACK, "--venv-root", tmp_path / "v", "--kernels-required"])
    assert done.returncode == 2 and "need --kernels" in done.stderr


def test_builder_kernels_refuses_an_env_the_builder_built(tmp_path: Path) -> None:
    env = tmp_path / "env"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").symlink_to("/usr/bin/python3")
    (env / "stackgate").mkdir()
    (env / "stackgate" / "build-record.json").write_text("{}")
    request = tmp_path / "r.json"
    request.write_text(json.dumps({"arch": "9.0a", "kernels": [GOOD]}))
    done = run_builder(["kernels", STACK, "--env", env, "--kernels", request])
    assert done.returncode == 2 and "builder build h200-sglang --kernels" in done.stderr
