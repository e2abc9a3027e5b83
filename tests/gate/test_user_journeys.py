"""The user's three journeys, as docs/gate-and-records.md types them, on the committed stacks,
records and run reports: every line of its journey-commands block runs as typed through
`.tools/bin/uv run stackgate`, in order, and its verdict line and exit code are asserted.

1. build -> static -> run of the h200-transformers example over a base site (`--base-site
   "$BASE_SITE"`): on this host without a GPU `run` ends INCOMPLETE, naming the checks that
   decide and why they were skipped, not OK and not a crash read as FAILED;
2. gate of machine 2's committed run reports against the committed h200-sglang record, at the
   policy the record and its stack state: 2 runs against 3 decide neither (the equal
   candidate UNDERPOWERED, mrr15 INCONCLUSIVE: no refusal is reachable at the 1% family goal);
3. reproduce of the committed h200-transformers record on this new host with `--no-validate`:
   the env rebuilt to its recorded tree hash, DIFFERS for the host's GPUs alone.

`$BASE_SITE` is a stand-in (tests/helpers/base_sites.py) for the lent machine's image
site-packages: the METADATA of the distributions the record says it held, which exists only
there. The h200-sglang record's reproduce up to the GPU is tests/gate/test_record_journeys.py
(~600 MB of wheels, marked slow); the README's own commands: tests/foundation/test_readme_commands.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stackgate.cli import build_parser, discover
from tests.helpers.as_typed import (
    ROOT,
    TypedShell,
    command_lines,
    last_line,
    stackgate_words,
    typed_shell,
)
from tests.helpers.base_sites import record_base_site

DOC = ROOT / "docs" / "gate-and-records.md"
RECORD = ROOT / "records" / "h200-transformers" / "20261130T221413-ea68e04fe20d.json"

# Per line of the block, in order: the words that name it, the verdict line's start, the exit.
EXPECTED = [
    (["check", "h200-transformers"], "OK stacks/h200-transformers.toml: 0 error(s)", 0),
    (["static", "h200-transformers", "--lock"], "OK static checks before install", 0),
    (["build", "h200-transformers"], "OK h200-transformers built", 0),
    (["static", "h200-transformers"], "OK static checks", 0),
    (["run", "h200-transformers"], "INCOMPLETE h200-transformers", 3),
    (["gate", "benchmarks/h200_sglang/results/machine2/gate-equal/run-01.json"], "UNDERPOWERED", 1),
    (["gate", "benchmarks/h200_sglang/results/machine2/gate-mrr15/run-01.json"], "INCONCLUSIVE", 1),
    (["reproduce", str(RECORD.relative_to(ROOT))], "DIFFERS h200-transformers@ea68e04fe20d", 1),
]


def journey_lines() -> list[str]:
    return command_lines(DOC.read_text(), "journey-commands")


def test_every_journey_line_is_one_the_test_expects_and_parses() -> None:
    lines = journey_lines()
    assert len(lines) == len(EXPECTED), lines
    commands = [c for p in ("builder", "validators") for c in discover(p)]
    for line, (head, _, _) in zip(lines, EXPECTED, strict=True):
        words = stackgate_words(line)
        assert words is not None and words[: len(head)] == head, line
        build_parser("stackgate", commands, "", words[0]).parse_args(words)


@pytest.fixture(scope="module")
def shell(tmp_path_factory: pytest.TempPathFactory) -> TypedShell:
    return typed_shell(tmp_path_factory.mktemp("uv-run-venv"))


@pytest.mark.network  # static --lock reads byte ranges of the locked wheels; build installs them
def test_the_three_journeys_run_as_typed(shell: TypedShell, tmp_path: Path) -> None:
    """The verdicts of a host without a GPU (CI's, this one's)."""
    site = record_base_site(RECORD, tmp_path / "base")
    envs = tmp_path / "envs"
    variables = {
        "BASE_SITE": str(site),
        "STACKGATE_VENV_ROOT": str(envs),
        "STACKGATE_STATE_DIR": str(tmp_path / "state"),
    }
    outputs: dict[str, subprocess.CompletedProcess[str]] = {}
    for line, (head, verdict, code) in zip(journey_lines(), EXPECTED, strict=True):
        done = shell.run(line, timeout=1200, **variables)
        assert last_line(done).startswith(verdict), (line, done.stderr[-3000:])
        assert done.returncode == code, (line, done.returncode, done.stderr[-3000:])
        outputs[" ".join(head[:2])] = done
    # 1. The env is layered over the base site given, and `run` says why it decided nothing.
    pth = envs / "h200-transformers" / "current" / "lib" / "python3.12" / "site-packages"
    assert str(site) in (pth / "_stackgate_base_site.pth").read_text()
    ran = last_line(outputs["run h200-transformers"])
    assert "0 failed" in ran and "serve-bench.launch" in ran
    assert "(not decided: " in ran and "serve-bench.launch skipped (" in ran
    # 3. Identical env; the verdict rests on the host's GPUs alone, and says so.
    reproduced = outputs[f"reproduce {RECORD.relative_to(ROOT)}"]
    assert "         env: env tree identical" in reproduced.stderr
    recorded = json.loads(RECORD.read_text())["build"]["env_tree_sha256"]
    assert f"recorded {recorded[:16]}, built {recorded[:16]} (equal)" in reproduced.stderr
    heads = last_line(reproduced).split("reason(s) above (", 1)[1].rstrip(")").split(", ")
    assert heads == ["host gpu.compute_capabilities", "host gpu.count"], heads


@pytest.mark.parametrize(
    ("words", "says"),
    [
        (["h200-transformers"], "no --env given and no built environment at {envs}/h200-transformers/current"),
        ([], "static: give --env PATH, --lock [UV_LOCK] or a stack that has been built"),
    ],
)  # fmt: skip
def test_static_without_a_built_env_says_what_to_do(
    tmp_path: Path, words: list[str], says: str
) -> None:
    """`static STACK` judges the stack's built env, as `run` does; none built: exit 2."""
    done = subprocess.run(
        [sys.executable, "-m", "validators", "static", *words],
        cwd=ROOT, env={**os.environ, "STACKGATE_VENV_ROOT": str(tmp_path)},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert says.format(envs=tmp_path) in done.stderr
    assert not any(tmp_path.iterdir())
