"""The product-text lint (`nox -s lint` runs .ci/product_text.py): it refuses tracker
references and dead repository paths in a planted tree, and the repository itself is clean."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT = ROOT / ".ci" / "product_text.py"


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(LINT), str(root)], capture_output=True, text=True, timeout=120
    )


def test_a_planted_tree_is_refused_line_by_line(tmp_path: Path) -> None:
    (tmp_path / "benchmarks" / "gate").mkdir(parents=True)
    (tmp_path / "benchmarks" / "gate" / "README.md").write_text("x\n")
    pkg = tmp_path / "validators" / "records"
    pkg.mkdir(parents=True)
    (pkg / "clock.py").write_text("")
    (pkg / "store.py").write_text(
        '"""The store (issue 12 item 3): see benchmarks/gate/README.md and records/clock.py."""\n'
        "# measured in benchmarks/gate/results/gone.md; torch/__init__.py is torch's own file\n"
        "HEADER = 'made by validators/old_name.py'  # data, not prose: not a pointer\n"
        "# the cause lives in records/missing.py\n"
    )
    done = _lint(tmp_path)
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert lines[-1] == "FAILED product text: 3 finding(s)"
    assert lines[:-1] == [
        "validators/records/store.py:1: tracker reference: "
        '"""The store (issue 12 item 3): see benchmarks/gate/README.md and records/clock.py."""',
        "validators/records/store.py:2: names benchmarks/gate/results/gone.md, which does not exist",
        "validators/records/store.py:4: names records/missing.py, which does not exist",
    ]


def test_the_repository_is_clean() -> None:
    done = _lint(ROOT)
    assert done.stdout.splitlines()[-1] == "OK product text: 0 finding(s)", done.stdout
    assert done.returncode == 0


def _plant(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_tracker_references_are_refused_and_upstream_ones_kept(tmp_path: Path) -> None:
    _plant(
        tmp_path,
        "stackgate/waits.py",
        "# the reason stays, the tracker goes (#34)\n"
        "X = 1  # stop 44's CI saw it\n"
        '"""Issue 12 section 5 says so."""\n'
        "# encode/httpcore#1110, uv #16802 and docker/docker-py#2230 are upstream: a reader opens them\n"
        "CSS = 'td{color:#222;border:1px solid #999}'\n",
    )
    done = _lint(tmp_path)
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        "stackgate/waits.py:1: tracker reference: # the reason stays, the tracker goes (#34)",
        "stackgate/waits.py:2: tracker reference: X = 1  # stop 44's CI saw it",
        'stackgate/waits.py:3: tracker reference: """Issue 12 section 5 says so."""',
        "FAILED product text: 3 finding(s)",
    ]


def test_dead_paths_in_help_and_hints_are_refused(tmp_path: Path) -> None:
    _plant(tmp_path, "docs/settings.md", "x\n")
    _plant(tmp_path, "stacks/locks/cu128/uv.lock", "x\n")
    _plant(tmp_path, "fleet/slurm/pin_elements.c", "x\n")
    _plant(
        tmp_path,
        "builder/commands/image.py",
        'HELP = "see docs/settings.md; default stacks/locks/STACK"  # live: both exist\n'
        'LOCKS = f"stacks/locks/{stack}/uv.lock"  # live: stacks/locks exists\n'
        "# compiled from fleet/slurm/pin_elements.c\n"
        'HINT = "see docs/gone.md"\n'
        'RULES = "default stacks/rules.toml"\n'
        '"""Measured in results/fleet_pin.md and ../shared/research/facts.md."""\n'
        "# run by tests/builder/test_2step.py\n"
        'TREE = "stackgate/tree.tsv.gz"  # a file inside an env, not in the repository\n',
    )
    done = _lint(tmp_path)
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        "builder/commands/image.py:4: names docs/gone.md, which does not exist",
        "builder/commands/image.py:5: names stacks/rules.toml, which does not exist",
        "builder/commands/image.py:6: names ../shared/research/facts.md, which does not exist",
        "builder/commands/image.py:6: names results/fleet_pin.md, which does not exist",
        "builder/commands/image.py:7: names tests/builder/test_2step.py, which does not exist",
        "FAILED product text: 5 finding(s)",
    ]


def test_live_paths_pass(tmp_path: Path) -> None:
    _plant(tmp_path, "benchmarks/gate/results/gate_power.md", "x\n")
    _plant(tmp_path, "tests/builder/test_2step.py", "")
    _plant(tmp_path, "stacks/rules.toml", "")
    _plant(tmp_path, "validators/records/clock.py", "")
    _plant(
        tmp_path,
        "validators/records/store.py",
        '"""Measured in benchmarks/gate/results/gate_power.md (tests/builder/test_2step.py)."""\n'
        "# the clock: records/clock.py; validators/records/clock.py from the root\n"
        'RULES = "default stacks/rules.toml"\n',
    )
    done = _lint(tmp_path)
    assert done.stdout.splitlines() == ["OK product text: 0 finding(s)"]
    assert done.returncode == 0
