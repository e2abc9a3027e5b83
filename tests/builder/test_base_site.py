"""`builder build --base-site`: a locked venv layered over another Python's site-packages (a
host's preinstalled PyTorch, where no index is reachable). The venv's own packages win, the
rest imports from the base, and the build record lists what came from there."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.builder.conftest import PY_MINOR, LocalStack


def _host_site(root: Path) -> Path:
    """A site-packages folder shaped like a host's: a 'transformers' the lock does not have and
    a 'numpy' the lock also pins (the lock's must win)."""
    site = root / "host" / "lib" / f"python{PY_MINOR}" / "site-packages"
    site.mkdir(parents=True)
    for name, version, body in (
        ("transformers", "5.17.0", "WHERE = 'host'\n"),
        ("numpy", "1.0.0", "WHERE = 'host'\n"),
    ):
        (site / name).mkdir()
        (site / name / "__init__.py").write_text(body)
        info = site / f"{name}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n"
        )
    return site


def test_layered_env_imports_the_host_and_says_so(local_stack: LocalStack) -> None:
    assert local_stack.lock().returncode == 0
    site = _host_site(local_stack.root)
    done = local_stack.build("--base-site", site, "--json")
    assert done.returncode == 0, done.stderr
    env = Path(json.loads(done.stdout)["env"])
    record = json.loads((env / "stackgate" / "build-record.json").read_text())
    assert record["base_site"]["path"] == str(site.resolve())
    assert record["base_site"]["packages"] == {"numpy": "1.0.0", "transformers": "5.17.0"}
    # What the lock installed is still all that `packages` claims.
    assert "transformers" not in record["packages"] and record["packages"]["numpy"] == "2.0.0"
    code = "import transformers, numpy; print(transformers.WHERE, numpy.__file__)"
    out = subprocess.run(
        [env / "bin" / "python", "-c", code],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
        check=True,
    ).stdout.split()
    assert out[0] == "host"
    assert out[1].startswith(str(env)), "the lock's numpy must shadow the host's"


def test_a_base_site_of_another_python_is_refused_before_anything_is_built(
    local_stack: LocalStack,
) -> None:
    assert local_stack.lock().returncode == 0
    other = local_stack.root / "py39" / "lib" / "python3.9" / "site-packages"
    other.mkdir(parents=True)
    done = local_stack.build("--base-site", other)
    assert done.returncode == 2, done.stderr
    assert "not a python" in done.stderr and "python3.9" in done.stderr
    # Nothing touched: no venv made and thrown away, no build lock, no build.log (the old
    # code installed the whole lock into a .partial first and refused after `verify`).
    assert "done venv" not in done.stderr and "done install" not in done.stderr
    assert not local_stack.venvs.exists(), sorted(local_stack.venvs.rglob("*"))
    missing = local_stack.build("--base-site", local_stack.root / "nope")
    assert missing.returncode == 2 and "no such folder" in missing.stderr
    assert not local_stack.venvs.exists()
