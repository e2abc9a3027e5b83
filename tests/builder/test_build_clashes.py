"""A stack whose wheels install the same path builds (exit 0), its build record lists each clash
with whose copy the env holds, and the static group reports it as `static.dists.clashes`: a WARN
by default, accepted or refused by the stack's manifest.

Real wheels on a local PEP 503 index, real `builder lock` and `builder build` (uv), the real
`validators static` CLI on the built env: `alpha` and `beta` both ship `shared_backend.py`
(different bytes) and `nsp/__init__.py` (the same bytes, as the nvidia-* wheels share
`nvidia/__init__.py`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.builder.conftest import ROOT, run_builder
from tests.helpers.interpreter import PY_MINOR, base_python
from tests.helpers.local_manifest import local_manifest
from tests.helpers.wheels import make_index, make_wheel


def _stack(root: Path, validation: str = "") -> Path:
    wheels = root / "wheels"
    built = [
        make_wheel(
            wheels,
            "alpha",
            "1.0",
            files={
                "alpha/__init__.py": "A = 1\n",
                "shared_backend.py": "WHO = 'alpha'\n",
                "nsp/__init__.py": "",
            },
        ),
        make_wheel(
            wheels,
            "beta",
            "2.0",
            files={
                "beta/__init__.py": "B = 2\n",
                "shared_backend.py": "WHO = 'beta'\n",
                "nsp/__init__.py": "",
            },
        ),
    ]
    url = make_index(root / "index", built)
    manifest = root / "stacks" / "clashes.toml"
    manifest.parent.mkdir(parents=True, exist_ok=True)
    manifest.write_text(
        local_manifest(
            name="clashes",
            description="two wheels that install the same files",
            python=PY_MINOR,
            index=url,
            packages={"alpha": "1.0", "beta": "2.0"},
            required=["static"],
            validation=validation,
        )
    )
    return manifest


def _build(root: Path, manifest: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    locks, venvs = root / "locks", root / "envs"
    locked = run_builder(["lock", manifest, "--locks-dir", locks, "--python", base_python()])
    assert locked.returncode == 0, locked.stderr
    done = run_builder(
        ["build", manifest, "--locks-dir", locks, "--venv-root", venvs,
         "--python", base_python(), "--json"]
    )
    return done, venvs


def _static(manifest: Path, env: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "validators", "static", str(manifest), "--env", str(env),
         "--json", *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )


def test_a_clash_builds_is_recorded_and_is_a_static_warning(tmp_path: Path) -> None:
    manifest = _stack(tmp_path)
    done, _venvs = _build(tmp_path, manifest)
    assert done.returncode == 0, done.stderr
    env = Path(json.loads(done.stdout)["env"])
    record = json.loads((env / "stackgate" / "build-record.json").read_text())
    site = f"lib/python{PY_MINOR}/site-packages"
    clashes = {c["path"]: c for c in record["wheel_records"]["clashes"]}
    assert set(clashes) == {f"{site}/shared_backend.py", f"{site}/nsp/__init__.py"}
    backend = clashes[f"{site}/shared_backend.py"]
    assert backend["owners"] == ["alpha-1.0.dist-info", "beta-2.0.dist-info"]
    assert backend["same_bytes"] is False
    # the last owner in the lock's order, whichever copy uv wrote last
    assert (env / site / "shared_backend.py").read_text() == "WHO = 'beta'\n"
    assert backend["holds"] == ["beta-2.0.dist-info"] and backend["chosen"] == "beta-2.0.dist-info"
    namespace = clashes[f"{site}/nsp/__init__.py"]
    assert namespace["same_bytes"] is True and len(namespace["holds"]) == 2
    assert record["wheel_records"]["files_checked"] >= 6
    assert "shared_backend.py is installed by" in done.stderr  # said to the user, not only kept

    checked = _static(manifest, env)
    result = next(r for r in json.loads(checked.stdout)["results"] if r["check"] == "static.dists.clashes")
    assert result["status"] == "PASS" and result["reason"].startswith("WARN: 1 file(s)")
    assert result["evidence"]["severity"] == "WARN"
    assert result["evidence"]["counts"] == {"different_bytes": 1, "same_bytes": 1}
    assert "shared_backend.py" in result["reason"] and "nsp/__init__.py" not in result["reason"]


def test_the_stack_accepts_or_refuses_the_clash(tmp_path: Path) -> None:
    built = _stack(tmp_path / "a")
    done, _ = _build(tmp_path / "a", built)
    assert done.returncode == 0, done.stderr
    env = Path(json.loads(done.stdout)["env"])

    refusing = _stack(
        tmp_path / "r",
        '\n[validation.refused_findings]\n"static.dists.clashes" = "two copies of one module"\n',
    )
    refused = _static(refusing, env)
    assert refused.returncode == 1, refused.stderr
    result = next(r for r in json.loads(refused.stdout)["results"] if r["check"] == "static.dists.clashes")
    assert result["status"] == "FAIL" and "two copies of one module" in result["reason"]
    assert "shared_backend.py" in result["reason"]  # the finding is kept

    accepting = _stack(
        tmp_path / "c",
        '\n[validation.accepted_findings]\n"static.dists.clashes" = "same module, both fine"\n',
    )
    accepted = _static(accepting, env)
    result = next(r for r in json.loads(accepted.stdout)["results"] if r["check"] == "static.dists.clashes")
    assert result["status"] == "PASS" and result["reason"].startswith("accepted by the stack")
    assert result["evidence"]["accepted"] == "same module, both fine"
