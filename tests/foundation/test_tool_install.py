"""What the wheel carries: `uv tool install .` gives a stackgate that works outside the checkout.

A real `uv tool install` of this checkout into a temporary tool folder, run from a folder that
is no checkout, with no STACKGATE_ROOT: a manifest kept there is checked, shown, preflighted
and hinted with commands that name the installed script (the stack rules come with the wheel);
what needs the checkout (a stack by name, the records store, the schemas, envs/) is refused
with exit 2 naming STACKGATE_ROOT, and nothing is ever written into the tool's site-packages
(it used to put envs/ and .state/ there). With STACKGATE_ROOT set to the checkout, the same
tool runs the README's offline commands with their verdicts. Each command's last line and exit
code are asserted.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Machine 2's gate-equal run reports (copied from benchmarks/h200_sglang/results/machine2).
EQUAL = ROOT / "tests" / "data" / "h200_sglang" / "gate-equal"
RECORD = ROOT / "records" / "h200-sglang" / "20261202T011853-034d1e7a9e43.json"
# The gate's family-wise rule adds two undecided refusals (exit 1): INCONCLUSIVE, UNDERPOWERED.
VERDICT_EXITS = {
    "OK": {0},
    "FAILED": {1},
    "REFUSED": {1, 2},
    "INCONCLUSIVE": {1},
    "UNDERPOWERED": {1},
    "INCOMPLETE": {3},
}


@dataclass(frozen=True)
class Tool:
    script: Path  # the tool's `stackgate` on its bin folder
    python: Path  # the tool environment's interpreter
    site: Path  # its site-packages (nothing may be written there)
    elsewhere: Path  # a folder that is no checkout, holding mine.toml
    env: dict[str, str]


@pytest.fixture(scope="module")
def tool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tool]:
    from stackgate.uvbin import uv_bin

    base = tmp_path_factory.mktemp("tool-install")
    env = {**os.environ, "UV_TOOL_DIR": str(base / "tools"), "UV_TOOL_BIN_DIR": str(base / "bin")}
    for name in ("VIRTUAL_ENV", "STACKGATE_ROOT", "STACKGATE_STACKS_DIR", "STACKGATE_VENV_ROOT"):
        env.pop(name, None)
    done = subprocess.run(
        [uv_bin(), "tool", "install", "--python", sys.executable, str(ROOT)],
        env=env, capture_output=True, text=True, check=False, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    python = base / "tools" / "stackgate" / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-I", "-c", "import stackgate, pathlib; "
             "print(pathlib.Path(stackgate.__file__).parent.parent)"],
            env=env, capture_output=True, text=True, check=True, timeout=60,
        ).stdout.strip()
    )  # fmt: skip
    elsewhere = base / "elsewhere"
    elsewhere.mkdir()
    text = (ROOT / "stacks" / "cu128.toml").read_text(encoding="utf-8")
    (elsewhere / "mine.toml").write_text(text.replace('name = "cu128"', 'name = "mine"', 1))
    # PATH: the tool's bin folder first; no .tools/bin of a checkout.
    path = [str(base / "bin")] + [
        p for p in env.get("PATH", "").split(os.pathsep) if ".tools" not in p
    ]
    env["PATH"] = os.pathsep.join(path)
    yield Tool(base / "bin" / "stackgate", python, site, elsewhere, env)


def _run(tool: Tool, *words: str, root: Path | None = None) -> tuple[int, str, str]:
    env = dict(tool.env)
    if root is not None:
        env["STACKGATE_ROOT"] = str(root)
    done = subprocess.run(
        [str(tool.script), *words],
        cwd=tool.elsewhere, env=env, capture_output=True, text=True, check=False, timeout=600,
    )  # fmt: skip
    lines = done.stderr.strip().splitlines()
    last = lines[-1] if lines else ""
    # Every command ends with one verdict line, its word matching the exit code.
    word = last.split(" ", 1)[0].rstrip(":")
    assert done.returncode in VERDICT_EXITS.get(word, set()), (words, done.stderr[-2000:])
    return done.returncode, last, done.stderr


def _has_gpu() -> bool:
    return shutil.which("nvidia-smi") is not None and Path("/dev/nvidia0").exists()


@pytest.mark.network
def test_a_manifest_kept_elsewhere_works_without_a_checkout(tool: Tool) -> None:
    code, last, _ = _run(tool, "check", "mine.toml")
    assert (code, last) == (0, "OK mine.toml: 0 error(s), 3 warning(s)")
    code, last, _ = _run(tool, "show", "mine.toml")
    assert (code, last) == (0, "OK mine: resolved manifest printed on stdout")
    code, last, err = _run(tool, "preflight", "mine.toml")
    if not _has_gpu():  # what decides (driver, GPUs) was skipped: INCOMPLETE, exit 3
        assert code == 3 and last.startswith("INCOMPLETE preflight mine: "), err[-2000:]
    # A hint names what the user can type here: the installed script, with its stack.
    code, last, err = _run(tool, "static", "mine.toml", "--lock")
    assert (code, last) == (2, "REFUSED static: bad input, nothing was changed (exit 2)")
    assert f"run `{tool.script} lock mine.toml` first" in err or (
        "run `stackgate lock mine.toml` first" in err  # the tool's bin folder is on PATH
    ), err
    version = subprocess.run(
        [str(tool.script), "--version"], cwd=tool.elsewhere, env=tool.env,
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert version.returncode == 0 and version.stdout.startswith("stackgate "), version
    assert sorted(p.name for p in tool.elsewhere.iterdir()) == ["mine.toml"]


@pytest.mark.network
@pytest.mark.parametrize(
    "words",
    [
        ["check", "cu128"],
        ["show", "cu130"],
        ["schema"],
        ["records", "list"],
        ["diff", "cu128", "cu130"],
        ["plan", "mine.toml"],
        ["gate", str(EQUAL / "run-01.json"), "--baseline", str(RECORD)],
    ],
)
def test_what_needs_the_checkout_is_refused_naming_stackgate_root(
    tool: Tool, words: list[str]
) -> None:
    code, last, err = _run(tool, *words)
    assert code == 2, err[-2000:]
    assert last == f"REFUSED {words[0]}: bad input, nothing was changed (exit 2)", err[-2000:]
    assert "no stackgate checkout here" in err and "STACKGATE_ROOT" in err, err[-2000:]
    # The old fallback wrote envs/, .state/ and stacks/ into the tool's site-packages.
    assert not {p.name for p in tool.site.iterdir()} & {"envs", ".state", "stacks", "records"}


@pytest.mark.network
def test_with_stackgate_root_the_tool_runs_the_readme_commands_from_anywhere(tool: Tool) -> None:
    code, last, _ = _run(tool, "check", "cu128", root=ROOT)
    assert (code, last) == (0, f"OK {ROOT / 'stacks' / 'cu128.toml'}: 0 error(s), 3 warning(s)")
    code, last, _ = _run(tool, "schema", root=ROOT)
    assert (code, last) == (0, "OK schemas are current")
    code, last, _ = _run(tool, "diff", "cu128", "cu130", root=ROOT)
    assert code == 0 and last.startswith("OK diff stack cu128 -> stack cu130: "), last
    code, last, err = _run(
        tool, "gate", str(EQUAL / "run-01.json"), "--run", str(EQUAL / "run-02.json"),
        "--baseline", str(RECORD), root=ROOT,
    )  # fmt: skip
    # 2 runs against the record's 3: the family-wise rule cannot decide the equal candidate.
    assert code == 1 and last.startswith("UNDERPOWERED: "), (last, err)
    # python -m stackgate: the ecosystem's fallback, in the tool's own interpreter.
    done = subprocess.run(
        [str(tool.python), "-m", "stackgate", "check", "mine.toml"],
        cwd=tool.elsewhere, env=tool.env, capture_output=True, text=True, check=False,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr.strip().splitlines()[-1] == "OK mine.toml: 0 error(s), 3 warning(s)"
