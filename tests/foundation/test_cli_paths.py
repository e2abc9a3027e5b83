"""Path flags that name something they cannot be are refused where they are parsed (issue 23
section 5: every path flag given /dev/null, a folder, a FIFO, a name that is not UTF-8).

Found by walking the commands with such values: `builder wheelhouse --to /dev/null` was an
OSError after the lock was read (exit 3, "File exists"); `validators run --out-dir /dev/null`
and `records verify --dir FIFO` went on (exit 0, exit 1 "nothing verified"); `serve-bench
--reference` with a name that is not UTF-8, and `--option targets=<not UTF-8>`, were
UnicodeEncodeError tracebacks inside pydantic; a missing `--reference` was a SKIP after the
server had been launched. The walk below covers every folder flag typed FOLDER; the commands
are run in-process (main_for) on real files, a real FIFO and real device nodes.
"""

from __future__ import annotations

import argparse
import os
import stat
from pathlib import Path

import pytest

from stackgate.cli import build_parser, discover, main_for
from stackgate.cli_paths import FOLDER, OUTPUT_FILE
from stackgate.errors import BadInput
from stackgate.files import atomic_write_text
from tests.helpers.cli_walk import walk_actions

# Every folder flag these commands take.
FOLDER_FLAGS = {
    "builder build": ["--venv-root", "--locks-dir", "--wheelhouse"],
    "builder compile": ["--cwd", "--venv-root"],
    "builder lock": ["--locks-dir"],
    "builder plan": ["--venv-root"],
    "builder verify": ["--venv-root", "--env"],
    "builder wheelhouse": ["--to", "--locks-dir"],
    "validators bisect": ["--work", "--venv-root"],
    "validators compat": ["--cache"],
    "validators fleet submit": ["--jobs-root"],
    "validators mark-good": ["--env", "--export"],
    "validators records": ["--dir"],
    "validators report": ["--env"],
    "validators reproduce": ["--venv-root", "--wheelhouse"],
    "validators run": ["--out-dir"],
    "validators serve-bench": ["--env", "--out-dir"],
    "validators static": ["--cache"],
}


def _folder_actions() -> dict[tuple[str, str], argparse.Action]:
    found: dict[tuple[str, str], argparse.Action] = {}
    for package in ("builder", "validators"):
        commands = discover(package)
        for entry in commands:
            parser = build_parser(package, commands, "", chosen=entry.name)
            for path, action in walk_actions(parser, package):
                for flag in action.option_strings:
                    found[(path, flag)] = action
    return found


@pytest.fixture
def hostile(tmp_path: Path) -> dict[str, str]:
    a_file = tmp_path / "a-file"
    a_file.write_text("x\n")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    return {
        "/dev/null": "/dev/null",
        "a device": "/dev/zero",
        "a FIFO": str(fifo),
        "a file": str(a_file),
        "below a file": str(a_file / "sub"),
        "empty": "",
        "NUL": "x\x00y",
    }


def test_every_folder_flag_is_typed_folder() -> None:
    actions = _folder_actions()
    wrong = [
        f"{command} {flag}"
        for command, flags in FOLDER_FLAGS.items()
        for flag in flags
        if actions[(command, flag)].type is not FOLDER
    ]
    assert not wrong, "type these with stackgate.cli_paths.FOLDER: " + ", ".join(wrong)


def test_every_folder_flag_refuses_what_cannot_be_a_folder(hostile: dict[str, str]) -> None:
    accepted = []
    walked = 0
    for (command, flag), action in _folder_actions().items():
        if action.type is not FOLDER:
            continue
        walked += 1
        for what, value in hostile.items():
            try:
                FOLDER(value)
            except argparse.ArgumentTypeError:
                continue
            accepted.append(f"{command} {flag} {what}")
    assert walked >= sum(len(f) for f in FOLDER_FLAGS.values())
    assert not accepted, accepted


def _run(package: str, *argv: str) -> int:
    return main_for([package], f"python -m {package}", "", list(argv))


@pytest.mark.parametrize(
    "argv",
    [
        ["builder", "wheelhouse", "cu128", "--to", "/dev/null"],
        ["builder", "wheelhouse", "cu128", "--to", "{file}/wh"],
        ["validators", "run", "cu128", "--only", "host", "--out-dir", "{fifo}"],
        ["validators", "records", "verify", "--dir", "{fifo}"],
        ["validators", "records", "export", "--dir", "/dev/null"],
        ["validators", "serve-bench", "cu128", "--dry-run", "--out-dir", "{file}"],
        ["validators", "serve-bench", "cu128", "--dry-run", "--reference", "{missing}"],
        ["validators", "serve-bench", "cu128", "--dry-run", "--reference", "{fifo}"],
        ["validators", "serve-bench", "cu128", "--dry-run", "--reference", "{not_utf8}"],
        ["validators", "serve-bench", "cu128", "--dry-run", "--record-reference", "{file}/r.json"],
        ["validators", "serve-bench", "cu128", "--dry-run", "--jsonl", "{fifo}"],
        ["validators", "run", "cu128", "--only", "host", "--option", "targets={not_utf8_word}"],
        ["validators", "run", "cu128", "--only", "host", "--option", "reference={not_utf8}"],
    ],
)
def test_the_commands_refuse_them_exit_2_without_a_traceback(
    argv: list[str], tmp_path: Path, capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setenv("STACKGATE_STATE_DIR", str(tmp_path / "state"))
    (tmp_path / "a-file").write_text("x\n")
    os.mkfifo(tmp_path / "fifo")
    values = {
        "file": str(tmp_path / "a-file"),
        "fifo": str(tmp_path / "fifo"),
        "missing": str(tmp_path / "missing.json"),
        "not_utf8": os.fsdecode(bytes(tmp_path / "ref") + b"\xff.json"),
        "not_utf8_word": os.fsdecode(b"9.0a\xff"),
    }
    words = [w.format(**values) for w in argv]
    before = sorted(p.name for p in tmp_path.iterdir())
    code = _run(words[0], *words[1:])
    err = capfd.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and "UnicodeEncodeError" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing made (state too)


# Output files: written by atomic rename, which put a regular file in place of whatever was
# there. `validators run --junit /dev/null` run as root replaced the machine's /dev/null with a
# regular file (found by this wave's walk, on the shared test machine, and repaired by hand).
OUTPUT_FLAGS = {
    "validators run": ["--junit"],
    "validators report": ["--out"],
    "validators compat": ["--html"],
    "validators bisect": ["--html"],
    "validators gate": ["--html"],
    "validators fleet collect": ["--html"],
    "validators fleet verdict": ["--html"],
}


def _special_files(tmp_path: Path) -> list[Path]:
    """A FIFO and a folder; as root also a character device node (1, 3: what /dev/null is)."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    folder = tmp_path / "folder"
    folder.mkdir()
    found = [fifo, folder]
    if os.geteuid() == 0:
        node = tmp_path / "null-node"
        os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        found.append(node)
    return found


def test_every_output_flag_is_typed_and_refuses_special_files(tmp_path: Path) -> None:
    actions = _folder_actions()
    untyped = [f"{c} {f}" for c, flags in OUTPUT_FLAGS.items() for f in flags
               if actions[(c, f)].type is not OUTPUT_FILE]  # fmt: skip
    assert not untyped, untyped
    for path in [*_special_files(tmp_path), Path("/dev/null"), tmp_path / "a-file" / "x"]:
        (tmp_path / "a-file").touch()
        with pytest.raises(argparse.ArgumentTypeError):
            OUTPUT_FILE(str(path))


def test_the_atomic_writer_never_replaces_a_device_fifo_or_folder(tmp_path: Path) -> None:
    for path in _special_files(tmp_path):
        kind = stat.S_IFMT(path.lstat().st_mode)
        with pytest.raises(BadInput, match="exists and is not a regular file"):
            atomic_write_text(path, "x\n")
        assert stat.S_IFMT(path.lstat().st_mode) == kind  # still what it was
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "fifo")
    atomic_write_text(link, "x\n")  # the link is replaced, never written through
    assert link.read_text() == "x\n" and stat.S_ISFIFO((tmp_path / "fifo").lstat().st_mode)


def test_junit_to_a_special_file_is_exit_2_and_leaves_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("STACKGATE_STATE_DIR", str(tmp_path / "state"))
    for path in _special_files(tmp_path):
        kind = stat.S_IFMT(path.lstat().st_mode)
        code = _run("validators", "run", "cu128", "--only", "host", "--junit", str(path))
        assert code == 2, capfd.readouterr().err
        assert stat.S_IFMT(path.lstat().st_mode) == kind


def test_gate_env_that_is_not_an_environment_is_refused_before_any_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """`gate cu128 --env FIFO` (or an empty folder) went on to 8 validation runs of nothing."""
    monkeypatch.setenv("STACKGATE_STATE_DIR", str(tmp_path / "state"))
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "empty").mkdir()
    for env in (tmp_path / "fifo", tmp_path / "empty"):
        code = _run("validators", "gate", "cu128", "--env", str(env))
        err = capfd.readouterr().err
        assert code == 2 and f"--env {env}: not an environment (no bin/python)" in err, err
        assert "validation run" not in err
