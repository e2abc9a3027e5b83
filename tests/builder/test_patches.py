"""Source packages from git with patches: sha256-checked, `git apply --check`-ed before anything
is built, built with the job plan's environment, installed at the locked commit."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from tests.builder.conftest import PY_MINOR, base_python, run_builder

# A PEP 517 backend inside the repository (no build requirements, so it builds offline). It
# records MAX_JOBS from its environment into the wheel: proof that the plan reaches the build.
BACKEND = '''
import base64, hashlib, os, zipfile
NAME, VERSION = "demo", "0.5.9"
def _files():
    out = {}
    for root, _, names in os.walk("demo"):
        for n in names:
            if n.endswith(".py") or n.endswith(".txt"):
                p = os.path.join(root, n)
                out[p] = open(p, "rb").read()
    out["demo/_build_env.py"] = ("MAX_JOBS = %r\\n" % os.environ.get("MAX_JOBS")).encode()
    return out
def _meta():
    return f"Metadata-Version: 2.1\\nName: {NAME}\\nVersion: {VERSION}\\n".encode()
def get_requires_for_build_wheel(config_settings=None): return []
def prepare_metadata_for_build_wheel(d, config_settings=None):
    info = os.path.join(d, f"{NAME}-{VERSION}.dist-info"); os.makedirs(info)
    open(os.path.join(info, "METADATA"), "wb").write(_meta())
    return os.path.basename(info)
def build_wheel(d, config_settings=None, metadata_directory=None):
    info = f"{NAME}-{VERSION}.dist-info"
    files = _files()
    files[info + "/METADATA"] = _meta()
    files[info + "/WHEEL"] = b"Wheel-Version: 1.0\\nGenerator: t\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"
    rec = []
    for k, v in files.items():
        h = base64.urlsafe_b64encode(hashlib.sha256(v).digest()).rstrip(b"=").decode()
        rec.append(f"{k},sha256={h},{len(v)}")
    rec.append(info + "/RECORD,,")
    files[info + "/RECORD"] = ("\\n".join(rec) + "\\n").encode()
    name = f"{NAME}-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(d, name), "w") as z:
        for k in sorted(files): z.writestr(k, files[k])
    return name
'''

PYPROJECT = """[build-system]
requires = []
build-backend = "backend"
backend-path = ["."]

[project]
name = "demo"
version = "0.5.9"
"""


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                   env={"PATH": "/usr/bin:/bin", "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
                        "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t", "HOME": str(repo)})


def _repo(root: Path) -> Path:
    repo = root / "upstream"
    pkg = repo / "python" / "demo"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("VALUE = 'upstream'\n")
    (repo / "python" / "backend.py").write_text(BACKEND)
    (repo / "python" / "pyproject.toml").write_text(PYPROJECT)
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "v0.5.9")
    _git(repo, "tag", "v0.5.9")
    return repo


GOOD = """--- a/python/demo/__init__.py
+++ b/python/demo/__init__.py
@@ -1 +1,2 @@
 VALUE = 'upstream'
+PATCHED = True
"""
BAD = GOOD.replace("VALUE = 'upstream'", "VALUE = 'something else'")


def _stack(root: Path, repo: Path, patch_text: str, *, pin: str | None = None) -> Path:
    stacks = root / "stacks"
    (stacks / "patches").mkdir(parents=True, exist_ok=True)
    patch = stacks / "patches" / "0001-demo.patch"
    patch.write_text(patch_text)
    sha = pin or hashlib.sha256(patch.read_bytes()).hexdigest()
    manifest = stacks / "gitstack.toml"
    manifest.write_text(f"""schema_version = 1
name = "gitstack"
description = "a git source with a patch"
python = "{PY_MINOR}"

[host]
min_driver = "580"
cuda = "13.0"
target_archs = ["12.0a"]

[packages.demo]
git = "{repo.as_uri()}"
ref = "v0.5.9"
subdirectory = "python"
patches = [{{ path = "patches/0001-demo.patch", sha256 = "{sha}" }}]

[build]
max_jobs = 1

[validation]
required = ["host"]
""")
    return manifest


def _lock_and_build(root: Path, manifest: Path) -> tuple[subprocess.CompletedProcess[str], ...]:
    py = base_python()
    lock = run_builder(["lock", manifest, "--locks-dir", root / "locks", "--python", py])
    build = run_builder(["build", manifest, "--locks-dir", root / "locks", "--venv-root",
                         root / "envs", "--python", py, "--json"])
    return lock, build


@pytest.mark.slow
def test_patched_git_source_is_built_with_the_plan(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    lock, build = _lock_and_build(tmp_path, _stack(tmp_path, repo, GOOD))
    assert lock.returncode == 0, lock.stderr
    assert build.returncode == 0, build.stderr
    out = json.loads(build.stdout)
    env = Path(out["env"])
    probe = subprocess.run(
        [env / "bin" / "python", "-c",
         "import demo, demo._build_env as b; print(demo.PATCHED, b.MAX_JOBS)"],
        capture_output=True, text=True, check=True)
    assert probe.stdout.split() == ["True", "1"]  # max_jobs = 1 reached the build
    assert out["record"]["job_plan"]["jobs"] == 1
    record = out["record"]
    assert record["patches"][0]["sha256"] == hashlib.sha256(GOOD.encode()).hexdigest()
    assert record["packages"]["demo"] == "0.5.9"
    assert "compile" in record["timings_s"]


@pytest.mark.slow
def test_patch_that_does_not_apply_exits_2_and_builds_nothing(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    lock, build = _lock_and_build(tmp_path, _stack(tmp_path, repo, BAD))
    assert lock.returncode == 0, lock.stderr
    assert build.returncode == 2, build.stderr
    assert "does not apply" in build.stderr and "nothing was built" in build.stderr
    stack_dir = tmp_path / "envs" / "gitstack"
    assert not [p for p in stack_dir.iterdir() if p.name.startswith("gitstack-")]


def test_patch_with_a_wrong_sha256_is_refused_before_anything(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    manifest = _stack(tmp_path, repo, GOOD, pin="0" * 64)
    done = run_builder(["build", manifest, "--locks-dir", tmp_path / "locks", "--venv-root",
                        tmp_path / "envs"])
    assert done.returncode == 2 and "sha256" in done.stderr
    assert not (tmp_path / "envs").exists()


def test_unreachable_git_source_exits_3_naming_the_package(tmp_path: Path) -> None:
    manifest = _stack(tmp_path, tmp_path / "no-such-repo", GOOD)
    done = run_builder(["lock", manifest, "--locks-dir", tmp_path / "locks", "--python",
                        base_python()])
    assert done.returncode == 3, done.stderr
    assert "git source of package 'demo'" in done.stderr and "--index-map demo=" in done.stderr
