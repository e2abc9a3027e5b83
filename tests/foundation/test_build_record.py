"""The build record is one model: what the builder writes, the validators read back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stackgate.build_record import build_record_path, read_build_record
from stackgate.errors import BadInput
from tests.helpers.build_records import sample_build_record, write_sample_env
from validators.records.build_facts import read_build_facts


def test_validators_read_what_the_builder_writes(tmp_path: Path) -> None:
    env = write_sample_env(tmp_path, "cu130", tree="cd" * 32)
    record = read_build_record(env)
    assert record == sample_build_record("cu130", env, tree="cd" * 32)
    facts = read_build_facts(env, image_digest="sha256:00")
    assert facts.env_tree_sha256 == "cd" * 32 and facts.lock_sha256 == "22" * 32
    # the lock-inputs hash is not the manifest file's hash; stored under its old key
    assert facts.lock_inputs_sha256 == record.manifest_hash
    assert facts.model_dump(mode="json")["manifest_sha256"] == record.manifest_hash
    assert facts.env_profile == {"NCCL_PROTO": "LL"} and facts.topology == "pcie"


def test_missing_or_invalid_record_is_bad_input_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="no build record"):
        read_build_record(tmp_path)
    env = write_sample_env(tmp_path, "cu130")
    path = build_record_path(env)
    data = json.loads(path.read_text())
    data["topology"] = "infiniband"
    path.write_text(json.dumps(data))
    with pytest.raises(BadInput) as caught:
        read_build_record(env)
    assert str(path) in caught.value.message
    assert any(d.startswith("topology:") for d in caught.value.details)


def test_venv_root_that_is_a_file_is_bad_input_before_anything_runs(tmp_path: Path) -> None:
    """`builder build --venv-root FILE` and $STACKGATE_VENV_ROOT=FILE: exit 2 naming it."""
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    a_file = tmp_path / "not-a-folder"
    a_file.write_text("x")
    flag = subprocess.run(
        [sys.executable, "-m", "builder", "plan", "cu128", "--venv-root", str(a_file)],
        cwd=root, capture_output=True, text=True,
    )  # fmt: skip
    assert flag.returncode == 2, flag.stderr
    assert str(a_file) in flag.stderr and "--venv-root" in flag.stderr
    env = {**os.environ, "STACKGATE_VENV_ROOT": str(a_file)}
    gate_env = subprocess.run(
        [sys.executable, "-m", "validators", "run", "cu128", "--only", "static"],
        cwd=root, capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert gate_env.returncode == 2, gate_env.stderr
    assert "STACKGATE_VENV_ROOT" in gate_env.stderr
