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
