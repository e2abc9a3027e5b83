"""The CLI contract, run as a user runs it: real processes, real exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from stackgate.cli_output import ErrorOutput
from stackgate.manifest.schema import schema_dir, schemas

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "builder", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )


def test_check_refuses_torch_210_with_exit_1() -> None:
    done = _cli("check", "stacks/cu130-torch210.toml")
    assert done.returncode == 1, done.stderr
    assert "torch 2.10.0" in done.stderr and "sgl-kernel 0.3.21" in done.stderr


def test_check_known_good_exit_0() -> None:
    for stack in ("stacks/cu130.toml", "stacks/cu128.toml"):
        done = _cli("check", stack)
        assert done.returncode == 0, (stack, done.stderr)


def test_check_json() -> None:
    done = _cli("check", "cu130-torch210", "--json")
    payload = json.loads(done.stdout)
    assert payload["ok"] is False
    assert payload["findings"][0]["rule"] == "sgl-kernel-0.3.21-needs-torch-2.9"


def test_bad_manifest_exit_2_json(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('schema_version = 1\nname = "bad"\n')
    done = _cli("check", str(bad), "--json")
    assert done.returncode == 2
    payload = json.loads(done.stdout)
    assert payload["exit_code"] == 2 and any("bad.toml: host" in d for d in payload["details"])
    # The one model of a refusal, which readers (validators/gate/reproduce.py) parse it with.
    refused = ErrorOutput.model_validate_json(done.stdout)
    assert refused.exit_code == 2 and refused.error == payload["error"]
    assert "bad.toml: description: required field is missing" in done.stderr


def test_bad_arguments_exit_2() -> None:
    assert _cli("check").returncode == 2
    assert _cli("no-such-command").returncode == 2
    done = _cli("check", "cu13")
    assert done.returncode == 2 and "did you mean 'cu130'" in done.stderr


def test_schema_is_current() -> None:
    for filename, text in schemas().items():
        committed = schema_dir() / filename
        # Compared as JSON documents: pydantic versions print 0 or 0.0 for the same bound.
        assert json.loads(committed.read_text()) == json.loads(text), (
            f"run `python -m builder schema --write` ({filename})"
        )
    assert _cli("schema").returncode == 0


def test_show_resolves_topology_env_and_extends() -> None:
    done = _cli("show", "cu130", "--topology", "nvlink", "--json")
    payload = json.loads(done.stdout)
    assert done.returncode == 0
    assert "NCCL_PROTO" not in payload["resolved_environment"]["vars"]
    assert payload["serving"]["kimi-k25-tp8-eagle3"]["attention_backend"] == "flashinfer"


def test_a_command_with_a_missing_library_does_not_break_the_others(tmp_path: Path) -> None:
    # A real package whose commands/ holds one importable and one broken command module.
    pkg = tmp_path / "fakepkg"
    (pkg / "commands").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "commands" / "__init__.py").write_text("")
    (pkg / "commands" / "good.py").write_text(
        "NAME = 'good'\nHELP = 'works'\n"
        "def add_arguments(parser):\n    pass\n"
        "def run(args):\n    print('good ran')\n    return 0\n"
    )
    (pkg / "commands" / "broken.py").write_text("import no_such_library_anywhere\n")
    code = (
        "import sys; from stackgate.cli import main_for; "
        "sys.exit(main_for(['fakepkg'], 'fake', 'd', sys.argv[1:]))"
    )
    env_path = f"{tmp_path}"
    good = subprocess.run(
        [sys.executable, "-c", code, "good"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": env_path},
    )
    assert good.returncode == 0 and "good ran" in good.stdout, good.stderr
    broken = subprocess.run(
        [sys.executable, "-c", code, "broken"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": env_path},
    )
    assert broken.returncode == 3
    assert "no_such_library_anywhere" in broken.stderr


def test_an_unexpected_oserror_says_where_it_was_raised(tmp_path: Path) -> None:
    """A real ENOENT without a file name (the cwd removed under the command): exit 3, and the
    one error line names the file, line and function that raised it (seen on a lent GPU
    machine as a bare '[Errno 2] No such file or directory' from a child run)."""
    pkg = tmp_path / "fakepkg2"
    (pkg / "commands").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "commands" / "__init__.py").write_text("")
    (pkg / "commands" / "gone.py").write_text(
        "import os, tempfile\nNAME = 'gone'\nHELP = 'cwd removed'\n"
        "def add_arguments(parser):\n    pass\n"
        "def run(args):\n    d = tempfile.mkdtemp()\n    os.chdir(d)\n    os.rmdir(d)\n"
        "    return len(os.getcwd())\n"
    )
    code = (
        "import sys; from stackgate.cli import main_for; "
        "sys.exit(main_for(['fakepkg2'], 'fake', 'd', sys.argv[1:]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, "gone"],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": f"{tmp_path}:{Path.cwd()}"},
    )
    assert done.returncode == 3, done.stderr
    assert "No such file or directory" in done.stderr
    assert "gone.py:10 in run" in done.stderr, done.stderr
