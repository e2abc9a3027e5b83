"""How a newcomer starts the CLI: lazy discovery, missing dependencies, uv from its package."""

from __future__ import annotations

import importlib
import json
import os
import pty
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from stackgate.cli import DEPENDENCY_MODULES, discover

ROOT = Path(__file__).resolve().parents[2]


def _run(argv: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False, env=env)


def _imported_after(*words: str) -> set[str]:
    """Modules a real `python -m builder WORDS` process has imported when main returns, less
    those the interpreter had before it ran any of our code (site hooks: Debian's python3
    imports its sitecustomize at start-up, a fresh machine's interpreter)."""
    code = (
        "import sys, json; before = set(sys.modules); from stackgate.cli import main_for\n"
        "code = main_for(['builder', 'validators'], 'stackgate', 'd', sys.argv[1:])\n"
        "sys.stdout = sys.__stderr__\n"
        "print('MODULES=' + json.dumps(sorted(set(sys.modules) - before)), file=sys.__stdout__)\n"
    )
    done = _run([sys.executable, "-c", code, *words])
    line = next(x for x in done.stdout.splitlines() if x.startswith("MODULES="))
    return set(json.loads(line.removeprefix("MODULES=")))


def test_help_imports_no_command_module_and_lists_every_command() -> None:
    modules = _imported_after("--help")
    assert not [m for m in modules if ".commands." in m]
    assert "rich" not in modules and "pydantic" not in modules
    done = _run([sys.executable, "-m", "validators", "--help"])
    assert done.returncode == 0
    assert "serve-bench" in done.stdout and "start a serving profile" in done.stdout


def test_a_command_imports_only_its_own_module() -> None:
    modules = _imported_after("check", "cu130")
    assert [m for m in modules if ".commands." in m] == ["builder.commands.check"]


# What validating a manifest needs: pydantic (and what it imports), packaging for versions and
# specifiers. Anything else third-party in `check` is start-up time paid for nothing.
CHECK_LIBRARIES = {
    "pydantic", "pydantic_core", "typing_extensions", "typing_inspection", "annotated_types",
    "packaging",
}  # fmt: skip


@pytest.mark.parametrize("stack", ["cu130", "cu130-torch210"])
def test_check_imports_no_library_it_does_not_need(stack: str) -> None:
    """Not a timing assert: the libraries a real piped `check` imports (issue 13 item 11:
    rich alone was ~25 ms of ~250 ms, benchmarks/startup/results/startup.md)."""
    modules = _imported_after("check", stack)
    ours = {"stackgate", "builder", "validators"}
    third_party = (
        {m.split(".")[0] for m in modules if m.split(".")[0] not in sys.stdlib_module_names}
        - ours
        - {"__main__"}
    )
    third_party = {m for m in third_party if not m.startswith("_sysconfigdata_")}
    assert third_party <= CHECK_LIBRARIES, third_party - CHECK_LIBRARIES
    assert {"pydantic", "packaging"} <= third_party  # the probe sees the real imports
    assert not [m for m in modules if m.startswith("validators.")]
    assert "stackgate.output" not in modules and "stackgate.manifest.schema" not in modules


def test_check_on_a_terminal_still_colours_through_rich() -> None:
    """The plain writer is for pipes only: on a real pseudo-terminal the verdict is coloured."""
    env = {k: v for k, v in os.environ.items()
           if k not in {"CI", "NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE"}}  # fmt: skip
    env["TERM"] = "xterm-256color"
    leader, follower = pty.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "builder", "check", "cu130-torch210"],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=follower, env=env, check=False,
        )  # fmt: skip
        os.close(follower)
        follower = -1
        seen = b""
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the child's side is closed and everything was read
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)
    assert done.returncode == 1
    text = seen.decode()
    assert "\x1b[1;31mREFUSED\x1b[0m" in text, text
    assert "sgl-kernel-0.3.21-needs-torch-2.9" in text


def test_every_command_module_name_and_help_match_what_discovery_reads() -> None:
    for package in ("builder", "validators"):
        for entry in discover(package):
            module = importlib.import_module(entry.module)
            assert entry.name == module.NAME, entry.module
            assert entry.help == module.HELP, entry.module


@pytest.mark.parametrize("package", ["builder", "validators"])
def test_without_dependencies_exit_3_with_the_fix_and_no_traceback(package: str) -> None:
    # A real interpreter without stackgate's dependencies, as `python -m builder` in a fresh
    # checkout: -s -E drop the user site and PYTHON* variables; -m puts the checkout on the path.
    bare = str(Path(sys.base_prefix) / "bin" / "python3")  # the interpreter under our venv
    probe = _run([bare, "-s", "-E", "-c", "import rich"])
    if probe.returncode == 0:
        pytest.skip(f"{bare} has rich installed; no bare interpreter here")
    # Commands that import rich at start (the probe's module): `check` no longer does when
    # piped, and where the base interpreter has pydantic and packaging it would simply run.
    done = _run(
        [bare, "-s", "-E", "-m", package, "show" if package == "builder" else "static", "cu130"]
    )
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    assert "No module named" in done.stderr
    assert f"uv run python -m {package}" in done.stderr
    assert "uv tool install ." in done.stderr


def test_dependency_modules_cover_pyproject() -> None:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = {d.split(">")[0].split("=")[0].split("<")[0].strip().lower() for d in deps}
    import_name = {"pyelftools": "elftools", "nvidia-ml-py": "pynvml"}
    assert {import_name.get(n, n) for n in names} == set(DEPENDENCY_MODULES)


def test_uv_comes_from_the_uv_package_not_path(tmp_path: Path) -> None:
    # PATH holds no uv at all: the builder still finds the one the uv package installed.
    code = "from stackgate.uvbin import uv_bin; print(uv_bin())"
    env = {**os.environ, "PATH": str(tmp_path)}
    env.pop("STACKGATE_UV", None)
    done = _run([sys.executable, "-c", code], env=env)
    assert done.returncode == 0, done.stderr
    found = Path(done.stdout.strip())
    assert found.parent == Path(sys.executable).parent and found.name == "uv"


@pytest.mark.parametrize("downloads", ["never", "automatic"])
def test_the_interpreter_finder_asks_uv_and_lets_it_download_where_allowed(
    tmp_path: Path, downloads: str
) -> None:
    # No python3.12 and no pyenv on PATH (not even uv: it comes from its package), and no
    # active venv (uv would offer nox's: under `tests-fast-3.12` that one is a 3.12).
    outer = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
    env = {
        **outer,
        "PATH": str(tmp_path),
        "UV_PYTHON_DOWNLOADS": downloads,
        "UV_PYTHON_INSTALL_DIR": str(tmp_path / "pythons"),
        "UV_OFFLINE": "1",
    }
    done = _run(
        [
            sys.executable,
            "-m",
            "builder",
            "lock",
            "cu128",
            "--locks-dir",
            str(tmp_path / "locks"),
            "--json",
        ],
        env=env,
    )
    assert done.returncode == 3, done.stderr
    payload = json.loads(done.stdout)
    tried = " | ".join(payload["details"])
    assert "python find --managed-python 3.12" in tried or "python install 3.12" in tried
    if downloads == "never":
        assert "UV_PYTHON_DOWNLOADS=never" in payload["error"]
        assert "python install" not in tried
    else:  # it tried to fetch one (offline here, so that failed) instead of refusing
        assert "python install 3.12" in tried
        assert "UV_PYTHON_DOWNLOADS" not in payload["error"]
        # and said so before the wait (a failing download took 55 s without a line)
        assert "uv python install 3.12 ..." in done.stderr.splitlines()[0]
    assert not (tmp_path / "locks").exists()


def test_stackgate_uv_overrides(tmp_path: Path) -> None:
    fake = tmp_path / "uv"
    fake.write_text("#!/bin/sh\necho 'uv 9.9.9'\n")
    fake.chmod(0o755)
    code = "from stackgate.uvbin import uv_bin; print(uv_bin())"
    done = _run([sys.executable, "-c", code], env={**os.environ, "STACKGATE_UV": str(fake)})
    assert done.stdout.strip() == str(fake)
    done = _run(
        [sys.executable, "-m", "builder", "lock", "cu128"],
        env={**os.environ, "STACKGATE_UV": str(tmp_path / "nope")},
    )
    assert done.returncode == 3 and "STACKGATE_UV" in done.stderr


@pytest.mark.network
def test_stackgate_installs_as_a_tool_and_finds_the_checkout_and_its_uv(tmp_path: Path) -> None:
    from stackgate.uvbin import uv_bin

    env = {
        **os.environ,
        "UV_TOOL_DIR": str(tmp_path / "tools"),
        "UV_TOOL_BIN_DIR": str(tmp_path / "bin"),
    }
    env.pop("VIRTUAL_ENV", None)
    done = _run([uv_bin(), "tool", "install", "--python", sys.executable, str(ROOT)], env=env)
    assert done.returncode == 0, done.stderr
    tool = tmp_path / "bin" / "stackgate"
    # Run from a folder inside the checkout, with a PATH that has neither uv nor python.
    inside = subprocess.run(
        [str(tool), "check", "cu130"],
        cwd=ROOT / "docs",
        capture_output=True,
        text=True,
        check=False,
        env={**env, "PATH": str(tmp_path / "bin")},
    )
    assert inside.returncode == 0, inside.stderr
    assert "OK " in inside.stderr and "cu130.toml" in inside.stderr
    tool_python = tmp_path / "tools" / "stackgate" / "bin" / "python"
    found = _run(
        [str(tool_python), "-c", "from stackgate.uvbin import uv_bin; print(uv_bin())"],
        env={**env, "PATH": str(tmp_path / "bin")},
    )
    assert found.stdout.strip() == str(tmp_path / "tools" / "stackgate" / "bin" / "uv")


def test_a_stack_name_outside_a_checkout_says_where_stacks_are_looked_for(tmp_path: Path) -> None:
    """Outside a checkout (a tool install run from elsewhere) the answer was "unknown stack
    'cu130'; known stacks: " with nothing after it."""
    env = {**os.environ, "STACKGATE_ROOT": str(tmp_path)}
    env.pop("STACKGATE_STACKS_DIR", None)
    done = _run([sys.executable, "-m", "builder", "check", "cu130"], env=env)
    assert done.returncode == 2, done.stderr
    assert f"no stacks/ folder at {tmp_path / 'stacks'}" in done.stderr
    assert "STACKGATE_ROOT" in done.stderr and "known stacks" not in done.stderr
    (tmp_path / "stacks").mkdir()
    done = _run([sys.executable, "-m", "builder", "check", "cu130"], env=env)
    assert done.returncode == 2, done.stderr
    assert "holds no stack manifest" in done.stderr
