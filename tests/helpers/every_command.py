"""Every command of `stackgate --help`, each with the inputs a newcomer would type on a host
without a GPU: the cases of the verdict-line test (tests/foundation/test_every_command.py)
and of its survey script (benchmarks/first_hour/every_command.py).

A case names the command's argv (with {work}, {mine}, {env} and {record} filled in by the
runner), the exit code it must end with on such a host and the verdict its last line starts
with. {mine} is a tiny real stack (two wheels, a local index) in a folder outside the
checkout; {env} its built env; {record} a record shipped in records/.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# A verdict line: one of the four words, then what was judged. An error line ("error: ...")
# is not one: a refusal says REFUSED and why.
VERDICT = re.compile(r"^(OK|FAILED|REFUSED|INCOMPLETE)\b")


@dataclass(frozen=True)
class Case:
    name: str  # the command as its row in the table shows it
    argv: Sequence[str]  # after `stackgate`
    exit_code: int
    verdict: str  # OK / FAILED / REFUSED / INCOMPLETE
    slow: bool = False  # real downloads or builds beyond the tiny stack's


RECORD = "records/h200-transformers/20261130T221413-ea68e04fe20d.json"

CASES: tuple[Case, ...] = (
    Case("check", ("check", "cu128"), 0, "OK"),
    Case("check (a known-bad stack)", ("check", "cu130-torch210"), 1, "REFUSED"),
    Case("show", ("show", "cu128"), 0, "OK"),
    Case("schema", ("schema",), 0, "OK"),
    Case("image-pins", ("image-pins",), 0, "OK"),
    Case("plan", ("plan", "cu128"), 0, "OK"),
    Case("lock (a manifest elsewhere)", ("lock", "{mine}"), 0, "OK"),
    Case("static --lock", ("static", "h200-transformers", "--lock"), 0, "OK"),
    Case("build", ("build", "{mine}", "--venv-root", "{work}/envs"), 0, "OK"),
    Case("verify", ("verify", "{mine}", "--venv-root", "{work}/envs"), 0, "OK"),
    Case("wheelhouse", ("wheelhouse", "{mine}", "--to", "{work}/wheelhouse"), 0, "OK"),
    Case("compile", ("compile", "--venv-root", "{work}/envs", "{mine}", "--", "true"), 0, "OK"),
    Case("static --env", ("static", "{mine}", "--env", "{env}"), 0, "OK"),
    Case(
        "kernels (an env the builder built)",
        ("kernels", "{mine}", "--env", "{env}", "--kernels", "{work}/request.json"),
        2,
        "REFUSED",
    ),
    Case("preflight", ("preflight", "cu128"), 3, "INCOMPLETE"),
    Case("run", ("run", "{mine}", "--env", "{env}"), 3, "INCOMPLETE"),
    Case(
        "serve-bench",
        ("serve-bench", "cu130", "--env", "{env}", "--profile", "kimi-k25-tp8"),
        3,
        "INCOMPLETE",
    ),
    Case(
        "serve-bench --dry-run",
        ("serve-bench", "cu130", "--profile", "kimi-k25-tp8", "--topology", "pcie", "--dry-run"),
        0,
        "OK",
    ),
    Case("mark-good", ("mark-good", "{mine}", "--env", "{env}"), 3, "REFUSED"),
    Case("gate", ("gate", "{mine}", "--env", "{env}", "--baseline", "{mine}"), 2, "REFUSED"),
    Case("diff (two stacks)", ("diff", "cu130", "cu128"), 0, "OK"),
    Case(
        "report",
        ("report", "{mine}", "--env", "{env}", "--out", "{work}/report.html"),
        2,
        "REFUSED",
    ),
    Case("records list", ("records", "list"), 0, "OK"),
    Case("records import", ("records", "import", "records/"), 0, "OK"),
    Case("records show", ("records", "show", RECORD), 0, "OK"),
    Case(
        "records show (a typo)", ("records", "show", "20261130T221413-ea68e04fe20x"), 2, "REFUSED"
    ),
    Case("records export", ("records", "export", "--dir", "{work}/exported"), 0, "OK"),
    Case("records verify", ("records", "verify"), 0, "OK"),
    Case(
        "diff (two records)",
        ("diff", RECORD, "records/h200-sglang/20261202T011853-034d1e7a9e43.json"),
        0,
        "OK",
    ),
    Case("reproduce", ("reproduce", RECORD, "--venv-root", "{work}/envs"), 2, "REFUSED"),
    Case("compat --lock", ("compat", "--lock", "stacks/locks/cu128/uv.lock"), 0, "OK", slow=True),
    Case(
        "fleet submit --dry-run",
        (
            "fleet",
            "submit",
            "{mine}",
            "--wheelhouse",
            "{work}/wheelhouse",
            "--nodes",
            "node[01-02]",
            "--jobs-root",
            "{work}/jobs",
            "--dry-run",
        ),
        0,
        "OK",
    ),
    Case("image --render", ("image", "cu128", "--render", "{work}/image"), 0, "OK"),
    Case(
        "bisect",
        ("bisect", "--good", "cu130", "--bad", "cu130-torch210", "--work", "{work}/bisect"),
        2,
        "REFUSED",
    ),
)


@dataclass(frozen=True)
class Outcome:
    case: Case
    argv: Sequence[str]
    exit_code: int
    last_line: str
    lines: int
    longest_line: int


def fill(argv: Sequence[str], values: Mapping[str, str]) -> list[str]:
    return [word.format(**values) for word in argv]


def run_case(
    case: Case, stackgate: Sequence[str], values: Mapping[str, str], cwd: Path,
    env: Mapping[str, str] | None = None, timeout: float = 900,
) -> Outcome:  # fmt: skip
    """Run one case piped (stdout and stderr into one pipe, as `2>&1 | tail -1` sees it)."""
    argv = [*stackgate, *fill(case.argv, values)]
    done = subprocess.run(
        argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        env=dict(env if env is not None else os.environ), timeout=timeout, check=False,
    )  # fmt: skip
    text = done.stdout.decode("utf-8", "replace")
    lines = [line for line in text.splitlines() if line.strip()]
    return Outcome(
        case, argv, done.returncode, lines[-1] if lines else "",
        len(lines), max((len(line) for line in lines), default=0),
    )  # fmt: skip


def stackgate_argv() -> list[str]:
    """The CLI as installed beside this interpreter (the checkout's .venv under the tests)."""
    return [sys.executable, "-m", "stackgate"]


def newcomer_workspace(work: Path) -> dict[str, str]:
    """A local index and a newcomer's own manifest kept outside the checkout; the values the
    cases' placeholders ({work}, {mine}, {env}) are filled with."""
    from tests.helpers.tiny_stack import tiny_index, tiny_manifest

    url = tiny_index(work)
    mine = work / "elsewhere" / "mine.toml"
    mine.parent.mkdir()
    mine.write_text(
        tiny_manifest("mine", url, description="a newcomer's own stack",
                      required=["host", "static", "runtime"]),
        encoding="utf-8",
    )  # fmt: skip
    return {"work": str(work), "mine": str(mine), "env": str(work / "envs/mine/current")}
