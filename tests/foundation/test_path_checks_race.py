"""Path checks made where arguments are parsed look once (stackgate/path_kind.py).

Stop 44's CI: `builder wheelhouse --to HOUSE` exited 2 ("HOUSE exists and is not a folder")
while tests/helpers/swap.py swapped the folder for a symlink to another folder: the check
asked `exists()` (true) and then `is_dir()` after the racer had moved the folder aside
(false). Every such check is run here thousands of times under the same real racer, the path
always naming a thing of the right kind (the real one or a link to a victim of the same
kind), or nothing for an instant; none may refuse it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from builder.commands.image import _output
from stackgate.cli_paths import folder_arg, output_file_arg
from stackgate.layout import venv_root
from stackgate.settings import folder
from tests.helpers.swap import racing
from validators.core.options import ServeOptions
from validators.gate.cli_args import check_keep_dir

RUN_S = 1.5  # each check runs under the racer this long (thousands of calls)


RACE_VAR = "STACKGATE_TEST_RACE_FOLDER"  # each test sets it to its target


FOLDER_CHECKS: dict[str, Callable[[Path], object]] = {
    "FOLDER flag": lambda p: folder_arg(str(p)),
    "folder from $VAR": lambda _p: folder(RACE_VAR, "a race test"),
    "--venv-root": venv_root,
    "--keep-runs": check_keep_dir,
    "serve log_dir option": lambda p: ServeOptions(log_dir=p),
}
FILE_CHECKS: dict[str, Callable[[Path], object]] = {
    "OUTPUT_FILE flag": lambda p: output_file_arg(str(p)),
    "image --output": lambda p: _output(f"oci-archive:{p}"),
    "serve jsonl option": lambda p: ServeOptions(jsonl=p),
}


def _refusals(check: Callable[[Path], object], target: Path, victim: Path) -> tuple[int, int]:
    refused = 0
    with racing(target, victim) as racer:
        deadline = time.monotonic() + RUN_S
        while time.monotonic() < deadline:
            try:
                check(target)
            except Exception as error:  # each check has its own error type
                refused += 1
                last = error
    assert racer.swaps > 0, "the racer never swapped: the run proved nothing"
    assert refused == 0, f"refused {refused} times under the racer; last: {last!r}"
    return refused, racer.swaps


@pytest.mark.parametrize("name", sorted(FOLDER_CHECKS))
def test_a_folder_swapped_for_a_link_to_a_folder_is_never_refused(
    name: str, tmp_path: Path
) -> None:
    target, victim = tmp_path / "target", tmp_path / "victim"
    target.mkdir()
    victim.mkdir()
    _refusals(FOLDER_CHECKS[name], target, victim)


@pytest.mark.parametrize("name", sorted(FILE_CHECKS))
def test_a_file_swapped_for_a_link_to_a_file_is_never_refused(name: str, tmp_path: Path) -> None:
    target, victim = tmp_path / "target.json", tmp_path / "victim.json"
    target.write_text("{}")
    victim.write_text("{}")
    _refusals(FILE_CHECKS[name], target, victim)


def test_the_checks_still_refuse_what_is_not_of_their_kind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The single look still refuses: a file given as a folder, a folder given as a file."""
    a_file, a_folder = tmp_path / "f", tmp_path / "d"
    a_file.write_text("x")
    a_folder.mkdir()
    monkeypatch.setenv(RACE_VAR, str(a_file))
    for check in FOLDER_CHECKS.values():
        with pytest.raises(Exception):  # noqa: B017 - each check has its own error type
            check(a_file)
    for check in FILE_CHECKS.values():
        with pytest.raises(Exception):  # noqa: B017
            check(a_folder)
