"""The README's commands as typed after its set-up (issue 29 item 1).

The README used to say `uv run stackgate check cu130` right after a set-up that leaves uv only
in `.tools/bin/` (bash: exit 127), and wrote every command as `python -m builder ...`, which the
system Python answers with exit 3. Here every command line of the README's code blocks is
taken as typed and:

- `.tools/bin/uv run stackgate ...`: the words go through stackgate's own parser (the command
  exists and takes those arguments), and the ones that need neither a network, a GPU nor a
  10 GB build run for real through uv, exactly as typed, in a project environment of their
  own (UV_PROJECT_ENVIRONMENT: the checkout's `.venv` is the user's, not the test's);
- `.tools/bin/nox -s ...`: every session named exists (`nox -l`);
- `.ci/bootstrap ...`: the set-up and test commands are the ones `.ci/run` and
  `nox -s fresh-machine` run (benchmarks/fresh_machine/fresh_machine.py runs them on a pristine root).

Where the checkout has no `.tools/bin/uv` (a developer's worktree without the bootstrap) the
uv installed beside this Python (stackgate depends on the `uv` package) stands in for it, and
the test says so in its output; CI runs `.ci/bootstrap` first, so there it is the real one.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from stackgate.cli import build_parser, discover
from tests.helpers.as_typed import (
    TypedShell,
    command_lines,
    stackgate_words,
    typed_shell,
)

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
UV = ".tools/bin/uv"
NOX = ".tools/bin/nox"


def readme_command_lines() -> list[str]:
    """Every command of the README's ```bash and ```console blocks (console: the `$ ` lines),
    comments dropped, continuation lines joined."""
    return command_lines(README)


def test_every_readme_command_starts_with_what_the_set_up_provides() -> None:
    """After `.ci/bootstrap tools` a user has .ci/bootstrap, .tools/bin/uv and .tools/bin/nox;
    `uv`, `nox` or `python -m ...` alone are not on their PATH."""
    commands = readme_command_lines()
    assert len(commands) >= 10, commands
    for command in commands:
        first = shlex.split(command)[0]
        assert first in {".ci/bootstrap", UV, NOX}, command


def test_every_stackgate_command_parses_as_typed() -> None:
    commands = [c for p in ("builder", "validators") for c in discover(p)]
    names = {c.name for c in commands}
    seen = 0
    for command in readme_command_lines():
        words = stackgate_words(command)
        if words is None or words == ["--help"]:
            continue
        assert words[0] in names, command
        parser = build_parser("stackgate", commands, "", words[0])
        try:
            parser.parse_args(words)
        except SystemExit as exc:  # argparse's "error: ..." is on stderr already
            pytest.fail(f"{command}: stackgate's parser refused it (exit {exc.code})")
        seen += 1
    assert seen >= 8


def test_every_nox_session_the_readme_names_exists() -> None:
    nox = ROOT / NOX
    if not nox.is_file():
        nox_bin = shutil.which("nox")
        assert nox_bin is not None or os.environ.get("CI") != "true", "CI runs .ci/bootstrap first"
        if nox_bin is None:
            pytest.skip("no .tools/bin/nox and no nox on PATH (run .ci/bootstrap tools)")
        nox = Path(nox_bin)
    listed = subprocess.run(
        [str(nox), "-l"], cwd=ROOT, capture_output=True, text=True, check=True, timeout=120
    ).stdout
    sessions = set(re.findall(r"^[*-] (\S+)", listed, re.M))
    wanted: set[str] = set()
    for text in re.findall(r"`(\.tools/bin/nox [^`]+)`", README) + readme_command_lines():
        words = text.split("&&")[-1].split()
        if words[0] != NOX or "-s" not in words:
            continue
        for word in words[words.index("-s") + 1 :]:
            if word.startswith("-"):
                break
            wanted.add(word)
    assert {"tests", "lint", "build-cu128"} <= wanted
    assert wanted <= sessions, wanted - sessions
    # docs/*.md write sessions as `nox -s NAME` (their header: typed `.tools/bin/nox -s ...`),
    # in code blocks, their comments and inline spans; a placeholder (serve-bench-STACK) is
    # a usage form
    in_docs: dict[str, str] = {}
    for doc in sorted((ROOT / "docs").glob("*.md")):
        for raw in re.findall(r"\bnox -s (\S+)", doc.read_text(encoding="utf-8")):
            name = raw.rstrip("`.,;:)")
            if name and name != "..." and not re.search(r"[A-Z]", name):
                in_docs[name] = doc.relative_to(ROOT).as_posix()
    assert {"image-cu130", "validate-cu130", "gate-cu130-torch210"} <= set(in_docs), in_docs
    missing = {f"{where}: nox -s {name}" for name, where in in_docs.items() if name not in sessions}
    assert not missing, missing


def test_the_set_up_and_test_commands_are_the_ones_ci_and_fresh_machine_run() -> None:
    sys.path.insert(0, str(ROOT))
    try:
        from benchmarks.fresh_machine import fresh_machine
    finally:
        sys.path.pop(0)
    setup, full, fast = fresh_machine.readme_commands()
    assert setup == ".ci/bootstrap tools"
    assert full in (ROOT / ".ci" / "run").read_text()
    assert fast.startswith(".ci/bootstrap && ")
    bootstrap = [c for c in readme_command_lines() if c.startswith(".ci/bootstrap")]
    assert bootstrap == [setup, full, fast]


@pytest.fixture(scope="module")
def uv_as_typed(tmp_path_factory: pytest.TempPathFactory) -> TypedShell:
    """`.tools/bin/uv` and an environment whose project venv is the test's own."""
    return typed_shell(tmp_path_factory.mktemp("uv-run-venv"))


# Every stackgate command the README and docs/*.md show (code blocks, and inline spans that
# are whole commands), by its words after `stackgate`. HERE: run as typed from the checkout on a
# host without a GPU, (exit code, the start of stderr's last line: the verdict). NOT_HERE: what
# it needs that a test host lacks; it is parsed by stackgate's parser only. A command a doc adds
# must be put in one of the two (the test says which is missing).
HERE: dict[str, tuple[int, str]] = {
    "check cu128": (0, "OK stacks/cu128.toml: 0 error(s), 3 warning(s)"),
    "check cu130": (0, "OK stacks/cu130.toml: 0 error(s), 3 warning(s)"),
    "check h200-transformers": (0, "OK stacks/h200-transformers.toml: 0 error(s), 0 warning(s)"),
    "check docs/examples/h200-transformers.toml": (
        0,
        "OK docs/examples/h200-transformers.toml: 0 error(s), 0 warning(s)",
    ),
    "static h200-transformers": (2, "REFUSED static: bad input, nothing was changed (exit 2)"),
    "run h200-transformers": (2, "REFUSED run: bad input, nothing was changed (exit 2)"),
    "check cu130-torch210": (1, "REFUSED stacks/cu130-torch210.toml: 1 error(s), 3 warning(s)"),
    "check docs/examples/bad.toml": (2, "REFUSED check: bad input, nothing was changed (exit 2)"),
    "show cu128": (0, "OK cu128: resolved manifest printed on stdout"),
    "--help": (0, ""),  # stdout only; its last line is asserted below
    "plan cu130": (0, "OK cu130: "),
    "diff cu130 cu130-torch210": (
        0,
        "OK diff stack cu130 -> stack cu130-torch210: 1 package version(s), 0 environment "
        "variable(s), 2 manifest value(s) differ",
    ),
    "preflight cu130": (3, "INCOMPLETE preflight cu130: 8 checks, 4 passed, 0 failed"),
    "serve-bench cu130 --profile kimi-k25-tp8 --topology pcie --dry-run": (
        0,
        "OK serve-bench cu130 --profile kimi-k25-tp8: dry run, nothing started; "
        "the launch script on stdout",
    ),
    # A fresh checkout has no envs/, no records store and no reference file: each of these
    # stops before any work, saying what to do first.
    "run cu128": (2, "REFUSED run: bad input, nothing was changed (exit 2)"),
    "mark-good cu130 --env envs/cu130/current --export records/": (
        3,
        "REFUSED mark-good: environment problem (exit 3)",
    ),
    "gate cu130-torch210 --env envs/cu130-torch210/current --baseline cu130": (
        2,
        "REFUSED gate: bad input, nothing was changed (exit 2)",
    ),
    "report cu130 --out report.html": (2, "REFUSED report: bad input, nothing was changed"),
    "serve-bench cu130 --profile kimi-k25-tp8 --reference "
    "stacks/references/cu130-kimi-k25-tp8.json": (
        2,
        "REFUSED serve-bench: bad input, nothing was changed (exit 2)",
    ),
    "serve-bench cu130 --profile kimi-k25-tp8-eagle3 --reference "
    "stacks/references/cu130-kimi-k25-tp8.json": (
        2,
        "REFUSED serve-bench: bad input, nothing was changed (exit 2)",
    ),
    "build cu130 --wheelhouse /mnt/wheelhouse": (
        2,
        "REFUSED build: bad input, nothing was changed (exit 2)",
    ),
    "gate benchmarks/h200_sglang/results/machine2/gate-equal/run-01.json --run "
    "benchmarks/h200_sglang/results/machine2/gate-equal/run-02.json --baseline "
    "records/h200-sglang/20261202T011853-034d1e7a9e43.json": (1, "UNDERPOWERED: within noise"),
    "gate benchmarks/h200_sglang/results/machine2/gate-mrr15/run-01.json --run "
    "benchmarks/h200_sglang/results/machine2/gate-mrr15/run-02.json --baseline "
    "records/h200-sglang/20261202T011853-034d1e7a9e43.json": (1, "INCONCLUSIVE: looks worse"),
}
# Their verdicts above are a host's without a GPU. The two committed gates have 2 runs a side
# against the record's 3: the family-wise rule decides neither (exit 1).
GPU_DECIDES = {"preflight cu130", "mark-good cu130 --env envs/cu130/current --export records/"}
NETWORK = "resolves or downloads from PyPI and the PyTorch/SGLang indexes"
NOT_HERE: dict[str, str] = {
    "lock cu128": NETWORK,
    "lock ~/mine.toml": NETWORK + " (and a manifest in the user's home)",
    "lock cu130 --index-map pytorch-cu130=https://mirror.example/whl/cu130 --index-map "
    "sgl-kernel-cu130=/srv/wheels/sgl-kernel-cu130": "the example's mirror and wheel folder",
    "static cu128 --lock": NETWORK + " (byte ranges of the locked wheels, unless cached)",
    "build cu128": "a ~10 GB install of the lock",
    "static h200-transformers --lock": NETWORK + " (tests/gate/test_user_journeys.py runs it)",
    "wheelhouse cu130 --to /mnt/wheelhouse": NETWORK,
    "compile cu130 -- make -C sgl-kernel build": "sgl-kernel's source tree",
    "image cu130": "a container engine and the base image's registry",
    "image cu130 --engine docker --tag registry.example/stackgate-cu130:1": "a docker daemon",
    "image cu130 --engine buildah --output oci-archive:cu130.oci.tar --check-reproducible": (
        "buildah and the base image's registry"
    ),
    "serve-bench cu130 --profile kimi-k25-tp8 --record-reference "
    "stacks/references/cu130-kimi-k25-tp8.json": "the built env and 8 GPUs (it writes the file)",
    "fleet submit fleetsmoke --wheelhouse $T/wheelhouse --nodes 'n[1-5]' --jobs-root $T/jobs "
    '--local-root "$T/local/{node}" --runs 2 --throttle 3 --build-python $PY '
    "--allow-host-mismatch --store $T/team.sqlite --fleet-id ci-run": (
        "a Slurm cluster and the test's $T and $PY (tests/fleet/test_slurm.py runs it)"
    ),
}
# A usage form, not a command: placeholders (STACK, PATH, <name>), options in [...], choices.
SYNOPSIS = re.compile(r"[\[\]|<>]|\.\.\.|\b[A-Z][A-Z_0-9]{2,}\b|path/to")
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@dataclass(frozen=True)
class DocCommand:
    where: str  # the file it is shown in
    words: str  # after `stackgate`, whitespace collapsed
    shown: tuple[str, ...] = ()  # a console block's output lines (stderr's, as the doc shows)
    shown_exit: int | None = None  # a console block's `echo $?`
    package: str | None = None  # `python -m builder|validators`: only that package's commands


# How a doc runs stackgate (longest first): the README's form, the any-folder shim, an
# installed `stackgate`, and the package entry points docs/commands.md names (the builder's
# or the validators' commands only).
PREFIXES: dict[str, str | None] = {
    f"{UV} run python -m builder": "builder",
    f"{UV} run python -m validators": "validators",
    f"{UV} run stackgate": None,
    ".tools/bin/stackgate": None,
    "python -m stackgate": None,
    "python -m builder": "builder",
    "python -m validators": "validators",
    "stackgate": None,
}


def _stackgate_tail(line: str) -> str | None:
    """The words after `stackgate` of a line that runs it, as typed in the README's form or
    the docs' (`stackgate ...`, typed from the checkout as `.tools/bin/uv run stackgate ...`)."""
    found = _prefixed(line)
    return None if found is None else found[0]


def _prefixed(line: str) -> tuple[str, str | None] | None:
    """(the words after the prefix, the package the prefix runs, None: stackgate, either)."""
    for prefix, package in PREFIXES.items():
        if line == prefix:
            return "", package
        if line.startswith(prefix + " "):
            return " ".join(line[len(prefix) :].split()), package
    return None


def doc_commands() -> list[DocCommand]:
    found: list[DocCommand] = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        where = doc.relative_to(ROOT).as_posix()
        for lang, body in re.findall(r"```(bash|console)\n(.*?)```", text, re.S):
            lines = body.replace("\\\n", " ").splitlines()
            if lang == "bash":
                for line in lines:
                    hit = _prefixed(line.split("#", 1)[0].strip())
                    if hit is not None:
                        found.append(DocCommand(where, hit[0], package=hit[1]))
                continue
            for i, line in enumerate(lines):  # console: `$ ` lines, their output after them
                hit = _prefixed(line.removeprefix("$ ").strip())
                if not line.startswith("$ ") or hit is None:
                    continue
                tail = hit[0]
                rest = lines[i + 1 :]
                shown = tuple(
                    rest[: next((j for j, x in enumerate(rest) if x.startswith("$ ")), len(rest))]
                )
                after = rest[len(shown) :]
                code = int(after[1]) if after[:1] == ["$ echo $?"] and len(after) > 1 else None
                found.append(DocCommand(where, tail, shown, code, hit[1]))
        for span in re.findall(r"`([^`\n]+)`", text):
            hit = _prefixed(span)
            if hit is not None:
                found.append(DocCommand(where, hit[0], package=hit[1]))
    return found


def test_every_doc_command_is_run_here_or_says_what_it_needs() -> None:
    names = {c.name for p in ("builder", "validators") for c in discover(p)}
    unclassified: list[str] = []
    seen: set[str] = set()
    for command in doc_commands():
        words = command.words.split()
        if not words or words[0] not in names | {"--help", "..."}:
            if words and not words[0].isupper():
                pytest.fail(f"{command.where}: `stackgate {command.words}`: no such command")
            continue
        if command.package is not None and words[0] not in {
            c.name for c in discover(command.package)
        } | {"--help", "..."}:
            pytest.fail(f"{command.where}: `python -m {command.package} {command.words}`: no such")
        # quoted text is literal ('n[1-5]' is a node list, not an optional part)
        if SYNOPSIS.search(re.sub(r"'[^']*'", "", command.words)) or len(words) == 1:
            continue  # a usage form or a command's name: its options are the parser's
        if command.words not in HERE and command.words not in NOT_HERE:
            unclassified.append(f"{command.where}: {command.words}")
        seen.add(command.words)
        if words[0] == "--help":
            continue
        parser = build_parser(
            "stackgate", [c for p in ("builder", "validators") for c in discover(p)], "", words[0]
        )
        said = io.StringIO()
        try:
            with contextlib.redirect_stderr(said):
                parser.parse_args(shlex.split(command.words))
        except SystemExit as exc:
            named_only = not any(w.startswith("-") for w in words)
            if named_only and "the following arguments are required" in said.getvalue():
                # a sub-command's name (`fleet submit`), not a command
                if unclassified[-1:] == [f"{command.where}: {command.words}"]:
                    unclassified.pop()
                seen.discard(command.words)
                continue
            pytest.fail(
                f"{command.where}: stackgate {command.words}: the parser refused it ({exc.code}): "
                + said.getvalue().strip().splitlines()[-1]
            )
    assert not unclassified, "put each in HERE or NOT_HERE:\n" + "\n".join(unclassified)
    assert not set(HERE) & set(NOT_HERE)
    # and no entry outlives its doc line
    assert (set(HERE) | set(NOT_HERE)) - {"--help"} <= seen, (set(HERE) | set(NOT_HERE)) - seen


def test_every_doc_command_runs_as_typed_with_its_verdict(
    uv_as_typed: TypedShell, tmp_path: Path
) -> None:
    """Each command of HERE, as typed from the checkout: its exit code and stderr's last line
    (the verdict); where a doc shows its output (a console block), the doc's last line is the
    one printed and its `echo $?` the exit code. Nothing is left behind in the checkout."""
    # On a GPU host what decides preflight and mark-good runs: there only the verdict's word
    # and the exit code must agree.
    gpu = shutil.which("nvidia-smi") is not None and Path("/dev/nvidia0").exists()
    state = str(tmp_path / "state")  # an empty records store
    shown = {c.words: c for c in doc_commands() if c.shown or c.shown_exit is not None}
    before = _untracked()
    wrong: list[str] = []
    for words, (code, last) in HERE.items():
        done = uv_as_typed.run(f"{UV} run stackgate {words}", STACKGATE_STATE_DIR=state)
        lines = (done.stdout if words == "--help" else done.stderr).strip().splitlines()
        got = lines[-1] if lines else ""
        if words == "--help":
            last = "  more tools: "
        if gpu and words in GPU_DECIDES:
            word = got.split(" ", 1)[0].rstrip(":")
            code = {"OK": 0, "FAILED": 1, "REFUSED": done.returncode, "INCOMPLETE": 3}.get(word, -1)
            last = word
        if done.returncode != code or not got.startswith(last):
            wrong.append(
                f"stackgate {words}: exit {done.returncode}, last line {got!r}; "
                f"want exit {code}, {last!r}"
            )
        doc = shown.get(words)
        if doc is not None and doc.shown and doc.shown[-1] != got:
            wrong.append(f"{doc.where} shows {doc.shown[-1]!r} for stackgate {words}: got {got!r}")
        if doc is not None and doc.shown_exit is not None and doc.shown_exit != done.returncode:
            wrong.append(f"{doc.where}: echo $? shows {doc.shown_exit}, got {done.returncode}")
    assert not wrong, "\n".join(wrong)
    assert _untracked() == before
    assert not (ROOT / "report.html").exists()


def _untracked() -> set[str]:
    done = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return set(done.stdout.splitlines())


def test_the_bad_manifest_example_says_what_the_readme_shows(
    uv_as_typed: TypedShell,
) -> None:
    block = README.split("<!-- bad-manifest-example -->")[1].split("```console")[1].split("```")[0]
    lines = block.strip().splitlines()
    done = uv_as_typed.run(lines[0].removeprefix("$ "))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == lines[1:]
