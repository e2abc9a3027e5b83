"""Lock and build against local PEP 503 indexes: explicit index pinning, +cu130 local versions,
overrides of upstream exact pins, --index-map, stale locks, unreachable indexes."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

from tests.builder.conftest import LocalStack, base_python, read_lock_packages, write_manifest


def registry(url: str) -> dict[str, str]:
    """How uv.lock records a file:// index: as a plain path."""
    return {"registry": url.removeprefix("file://")}


def test_lock_pins_indexes_local_versions_and_overrides(local_stack: LocalStack) -> None:
    done = local_stack.lock()
    assert done.returncode == 0, done.stderr
    folder = local_stack.locks / "localstack"
    project = tomllib.loads((folder / "pyproject.toml").read_text())
    assert (folder / "pyproject.toml").read_text().startswith("# DO NOT EDIT")
    assert project["tool"]["uv"]["sources"]["torch"] == {"index": "pytorch-cu130"}
    assert project["tool"]["stackgate"]["manifest_hash"]
    pkgs = read_lock_packages(folder / "uv.lock")
    # +cu130 torch from the explicit CUDA index, not PyPI's plain 2.9.1 that sglang pins.
    assert pkgs["torch"]["version"] == "2.9.1+cu130"
    assert pkgs["torch"]["source"] == registry(local_stack.cuda_url)
    assert pkgs["sgl-kernel"]["version"] == "0.3.21+cu130"
    assert pkgs["sgl-kernel"]["source"] == registry(local_stack.kernel_url)
    # The override beat sglang's exact flashinfer-python==0.6.3.
    assert pkgs["flashinfer-python"]["version"] == "0.6.4"
    # The explicit index's numpy 9.9.9 is never considered: numpy is not pinned to it.
    assert pkgs["numpy"]["version"] == "2.0.0"
    assert pkgs["numpy"]["source"] == registry(local_stack.pypi_url)


def test_without_overrides_the_upstream_pin_conflicts(local_stack: LocalStack) -> None:
    manifest = write_manifest(
        local_stack.root / "other",
        "localstack",
        {
            "pypi": local_stack.pypi_url,
            "cuda": local_stack.cuda_url,
            "kernel": local_stack.kernel_url,
        },
        overrides="",
    )
    done = local_stack.cli(
        "lock", manifest, "--locks-dir", local_stack.locks, "--python", base_python()
    )
    assert done.returncode == 2, done.stderr
    assert "no resolution" in done.stderr
    assert not (local_stack.locks / "localstack" / "uv.lock").exists()


def test_build_installs_exactly_the_lock(local_stack: LocalStack) -> None:
    assert local_stack.lock().returncode == 0
    done = local_stack.build("--topology", "pcie", "--json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    env = Path(out["env"])
    assert env.name.startswith("localstack-") and env.is_dir()
    assert (local_stack.stack_dir / "current").resolve() == env.resolve()
    record = json.loads((env / "stackgate" / "build-record.json").read_text())
    assert record["packages"]["torch"] == "2.9.1+cu130"
    assert record["packages"]["flashinfer-python"] == "0.6.4"
    assert record["topology"] == "pcie" and record["topology_source"] == "flag"
    assert record["env_profile"]["NCCL_PROTO"] == "LL"
    assert record["job_plan"]["jobs"] >= 1
    # The profile reaches every process started from the env, and its children.
    import subprocess

    probe = subprocess.run(
        [
            env / "bin" / "python",
            "-c",
            "import os,subprocess,sys; print(subprocess.run([sys.executable,'-c',"
            "'import os;print(os.environ[\"NCCL_PROTO\"])'],capture_output=True,text=True).stdout"
            ".strip(), os.environ['STACKGATE_TOPOLOGY'])",
        ],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
        check=True,
    )
    assert probe.stdout.split() == ["LL", "pcie"]


def test_second_build_of_one_lock_reuses_the_env(local_stack: LocalStack) -> None:
    assert local_stack.lock().returncode == 0
    first = json.loads(local_stack.build("--json").stdout)
    second = local_stack.build("--json")
    assert second.returncode == 0, second.stderr
    out = json.loads(second.stdout)
    assert out["reused"] is True and out["env"] == first["env"]


def test_tree_hash_is_independent_of_folder_and_install_path(local_stack: LocalStack) -> None:
    assert local_stack.lock().returncode == 0
    a = json.loads(local_stack.build("--json", "--topology", "pcie").stdout)
    other = local_stack.root / "envs-b"
    wheelhouse = local_stack.root / "wh"
    assert (
        local_stack.cli(
            "wheelhouse", local_stack.manifest, "--locks-dir", local_stack.locks, "--to", wheelhouse
        ).returncode
        == 0
    )
    done = local_stack.cli(
        *local_stack.build_args(
            "--topology", "pcie", "--wheelhouse", wheelhouse, "--json", venvs=other
        )
    )
    assert done.returncode == 0, done.stderr
    b = json.loads(done.stdout)
    assert b["record"]["offline"] is True
    assert a["record"]["tree"]["sha256"] == b["record"]["tree"]["sha256"]
    assert a["env"] != b["env"]


def test_stale_lock_exits_2_with_the_refresh_command(local_stack: LocalStack) -> None:
    assert local_stack.lock().returncode == 0
    text = local_stack.manifest.read_text().replace('version = "0.6.4"', 'version = "0.6.3"')
    local_stack.manifest.write_text(text.replace('"flashinfer-python==0.6.4", ', ""))
    done = local_stack.build()
    assert done.returncode == 2
    assert "stale" in done.stderr
    # the hint is a command the user can type here: stackgate's lock of this manifest
    (hint,) = [line for line in done.stderr.splitlines() if "refresh it with: " in line]
    assert hint.endswith(f"stackgate lock {local_stack.manifest}"), hint
    assert not local_stack.stack_dir.exists() or not any(local_stack.stack_dir.glob("localstack-*"))


def test_missing_lock_exits_2(local_stack: LocalStack) -> None:
    done = local_stack.build()
    assert done.returncode == 2 and "no lock" in done.stderr


def test_unreachable_index_exits_3_naming_it(local_stack: LocalStack) -> None:
    dead = "http://127.0.0.1:9/simple"
    manifest = write_manifest(
        local_stack.root / "dead",
        "localstack",
        {"pypi": local_stack.pypi_url, "cuda": dead, "kernel": local_stack.kernel_url},
    )
    args = ["lock", manifest, "--locks-dir", local_stack.locks, "--python", base_python()]
    online = {"UV_OFFLINE": ""}  # loopback only: the dead index is on 127.0.0.1
    done = local_stack.cli(*args, env=online)
    assert done.returncode == 3, done.stderr
    assert "pytorch-cu130" in done.stderr and dead in done.stderr
    assert "--index-map" in done.stderr
    # The same manifest locks when the index is remapped to a reachable copy.
    mapped = local_stack.cli(
        *args, "--index-map", f"pytorch-cu130={local_stack.cuda_url}", env=online
    )
    assert mapped.returncode == 0, mapped.stderr
    pkgs = read_lock_packages(local_stack.locks / "localstack" / "uv.lock")
    assert pkgs["torch"]["source"] == registry(local_stack.cuda_url)


def test_index_map_at_build_time_reads_a_mirror(local_stack: LocalStack) -> None:
    assert local_stack.lock().returncode == 0
    mirror = local_stack.root / "mirror-cuda"
    shutil.copytree(local_stack.root / "idx-cuda", mirror)
    shutil.rmtree(local_stack.root / "idx-cuda")  # the original index is gone
    plain = local_stack.build()
    assert plain.returncode == 3, plain.stderr
    done = local_stack.build(
        "--index-map", f"pytorch-cu130={(mirror / 'simple').as_uri()}", "--json"
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["record"]["packages"]["torch"] == "2.9.1+cu130"


def test_bad_index_map_is_bad_input(local_stack: LocalStack) -> None:
    done = local_stack.cli(
        "lock",
        local_stack.manifest,
        "--locks-dir",
        local_stack.locks,
        "--index-map",
        "nosuch=file:///tmp",
    )
    assert done.returncode == 2 and "no index or git package 'nosuch'" in done.stderr


def test_hash_mismatch_exits_3_and_keeps_the_previous_env(local_stack: LocalStack) -> None:
    from tests.helpers.wheels import make_wheel

    assert local_stack.lock().returncode == 0
    first = json.loads(local_stack.build("--json").stdout)
    # Move to a new lock (other flashinfer) whose wheel the index then swaps for another file.
    text = local_stack.manifest.read_text()
    local_stack.manifest.write_text(text.replace("0.6.4", "0.6.3"))
    assert local_stack.lock().returncode == 0
    served = local_stack.root / "idx-pypi" / "simple" / "flashinfer-python"
    tampered = make_wheel(
        local_stack.root / "tampered",
        "flashinfer-python",
        "0.6.3",
        requires=["torch"],
        files={"flashinfer/__init__.py": "EVIL = 1\n"},
    )
    (served / tampered.name).write_bytes(tampered.read_bytes())
    # A fresh uv cache, so the tampered file is really fetched.
    done = local_stack.build(env={"UV_CACHE_DIR": str(local_stack.root / "fresh-cache")})
    assert done.returncode == 3, done.stderr
    assert "hash mismatch" in done.stderr.lower()
    assert (local_stack.stack_dir / "current").resolve() == Path(first["env"]).resolve()
    assert not list(local_stack.stack_dir.glob("*.partial"))


def test_missing_interpreter_exits_3(local_stack: LocalStack) -> None:
    assert local_stack.lock().returncode == 0
    done = local_stack.cli(*local_stack.build_args(python="/nonexistent/python3"))
    assert done.returncode == 3 and "not a working Python" in done.stderr


def test_another_topology_gets_its_own_env_and_neither_is_touched(local_stack: LocalStack) -> None:
    assert local_stack.lock().returncode == 0
    pcie = json.loads(local_stack.build("--topology", "pcie", "--json").stdout)
    nvlink = local_stack.build("--topology", "nvlink", "--json")
    assert nvlink.returncode == 0, nvlink.stderr
    other = json.loads(nvlink.stdout)
    assert other["reused"] is False and other["env"] != pcie["env"]
    assert (
        other["record"]["topology"] == "nvlink"
        and "NCCL_PROTO" not in other["record"]["env_profile"]
    )
    again = json.loads(local_stack.build("--topology", "pcie", "--json").stdout)
    assert again["reused"] is True and again["env"] == pcie["env"]
    assert (local_stack.stack_dir / "current").resolve() == Path(pcie["env"]).resolve()
