"""The import plan's doors (shared/STYLE.md, "the shape of the house"): the builder never
imports the validators, not even lazily inside a function (`builder lock` asks
`python -m validators compat --lock` in a child process and reads stackgate.lock.torch_abi's models),
and stackgate, which both import, imports neither. Read from the source with ast, so an
import inside a function or under TYPE_CHECKING counts."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _imports(package: str) -> list[tuple[str, int, str]]:
    out: list[tuple[str, int, str]] = []
    where = ROOT / package
    for path in [where] if where.is_file() else sorted(where.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            rel = str(path.relative_to(ROOT))
            out.extend((rel, node.lineno, name) for name in names)
    return out


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [("builder", ("validators",)), ("stackgate", ("builder", "validators"))],
)
def test_no_import_crosses_a_door(package: str, forbidden: tuple[str, ...]) -> None:
    found = _imports(package)
    assert len(found) > 50  # the walk sees the package's real imports
    crossing = [
        f"{rel}:{line}: {name}" for rel, line, name in found if name.split(".")[0] in forbidden
    ]
    assert not crossing, crossing


def test_the_run_core_imports_no_group_or_job_package() -> None:
    """validators/core/ (context, options, check ids, results, pipeline, runs) is imported by
    the groups and the jobs (gate, records, fleet...), never the other way round."""
    found = _imports("validators/core")
    assert len(found) > 20  # the walk sees core's real imports
    crossing = [
        f"{rel}:{line}: {name}"
        for rel, line, name in found
        if name.split(".")[0] == "validators" and not name.startswith("validators.core")
    ]
    assert not crossing, crossing


@pytest.mark.parametrize("part", ["validators/bisect", "validators/commands/bisect.py"])
def test_the_bisect_runs_the_builder_as_a_child(part: str) -> None:
    """validators bisect locks and builds its steps with `python -m builder lock/build` in a
    child process (validators/bisect/builder_cli.py) and reads their locks with
    stackgate.lock.state: no import of the builder, not even inside a function."""
    found = _imports(part)
    assert len(found) > (40 if part.endswith("bisect") else 15)  # the walk sees real imports
    crossing = [
        f"{rel}:{line}: {name}" for rel, line, name in found if name.split(".")[0] == "builder"
    ]
    assert not crossing, crossing
