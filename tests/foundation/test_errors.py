"""Every error the CLIs report carries a stable id scripts match on and a hint that says what to
do (stackgate/errors.py); the CLI prints the hint after the message and both in --json."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

from stackgate.cli import _os_error
from stackgate.cli_output import ErrorOutput
from stackgate.errors import ManifestError, Problem, StackgateError

ROOT = Path(__file__).resolve().parents[2]


def _error_classes() -> list[type[StackgateError]]:
    """Every subclass of StackgateError in the product, found in the sources (so a module no
    test imports is not missed) and imported from its module."""
    names = {"StackgateError"}
    found: list[tuple[str, str]] = []
    trees = [
        (f, ast.parse(f.read_text()))
        for package in ("stackgate", "builder", "validators")
        for f in sorted((ROOT / package).rglob("*.py"))
    ]
    grew = True
    while grew:  # subclasses of subclasses, in any module order
        grew = False
        for file, tree in trees:
            for node in ast.walk(tree):
                bases = {b.id for b in getattr(node, "bases", []) if isinstance(b, ast.Name)}
                if isinstance(node, ast.ClassDef) and bases & names and node.name not in names:
                    names.add(node.name)
                    module = ".".join(file.relative_to(ROOT).with_suffix("").parts)
                    found.append((module, node.name))
                    grew = True
    return [StackgateError, *(getattr(importlib.import_module(m), n) for m, n in found)]


def test_every_error_class_has_an_id_and_a_hint_and_ids_are_unique() -> None:
    classes = _error_classes()
    assert len(classes) >= 13, classes
    for cls in classes:
        assert cls.error_id and cls.hint, cls
        assert cls.error_id == cls.error_id.lower() and " " not in cls.error_id, cls
    ids = [c.error_id for c in classes if "error_id" in vars(c)]
    assert len(ids) == len(classes) and len(set(ids)) == len(ids), ids


def test_a_raise_may_name_its_own_cause() -> None:
    exc = StackgateError("x", error_id="record-source-missing", hint="fetch history")
    assert (exc.error_id, exc.hint) == ("record-source-missing", "fetch history")
    assert StackgateError("y").error_id == "error"


def test_the_cli_prints_the_hint_and_json_carries_id_and_hint(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('schema_version = 1\nname = "bad"\n')
    argv = [sys.executable, "-m", "builder", "check", str(bad)]
    done = subprocess.run([*argv, "--json"], cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 2
    refused = ErrorOutput.model_validate_json(done.stdout)
    assert refused.error_id == "manifest-invalid" and refused.hint.startswith("fix each problem")
    assert json.loads(done.stdout)["error"] == refused.error  # the older keys stay
    lines = done.stderr.splitlines()
    assert lines[-2].startswith("hint: fix each problem") and "[manifest-invalid]" in lines[-2]
    assert lines[-1].startswith("REFUSED")


def test_a_manifest_problem_is_a_file_a_field_and_a_message_rendered_once() -> None:
    field = Problem("stacks/cu130.toml", "torch.index", "unknown index 'x'")
    whole = Problem("stacks/cu130.toml", "", "invalid TOML: nested too deeply")
    assert str(field) == "stacks/cu130.toml: torch.index: unknown index 'x'"
    assert str(whole) == "stacks/cu130.toml: invalid TOML: nested too deeply"
    refused = ManifestError([field, whole, field])  # each problem said once
    assert refused.problems == [field, whole]
    assert refused.details == [str(field), str(whole)] and refused.message.startswith("2 problems")


def test_an_os_error_is_reported_as_an_environment_problem_saying_where() -> None:
    try:
        Path("/nonexistent-stackgate-test/x").read_text()
    except OSError as exc:
        reported = _os_error(exc)
    assert (reported.error_id, reported.exit_code, reported.verdict) == ("os-error", 3, "FAILED")
    assert "No such file" in reported.message and "(raised at " in reported.message
