"""`records show` prints a record's summary on stdout: its note is untrusted text (a record file
from git, a teammate's store), so escape sequences are shown, not obeyed, and secrets hidden."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.gate.record_factory import make_record

ROOT = Path(__file__).resolve().parents[2]
RAW = ("\x1b[2J", "\x1b]0;", "\x07", "\x9b", "\u202e")


def test_a_notes_escape_sequences_and_secrets_are_shown_safely(tmp_path: Path) -> None:
    rec = make_record(note="ok \x1b[2J\x1b]0;owned\x07\x9b31m fake \u202eKO api_key='NOTEKEY42'")
    folder = tmp_path / "in" / "smoke"
    folder.mkdir(parents=True)
    (folder / "r.json").write_text(rec.to_json())
    env = {"PATH": "/usr/bin:/bin", "NO_COLOR": "1", "STACKGATE_ROOT": str(tmp_path)}
    store = tmp_path / "s.sqlite"
    texts = []
    for argv in (["import", "--dir", str(tmp_path / "in")], ["list"], ["show", rec.record_id[:12]],
                 ["show", "smoke"]):  # fmt: skip
        done = subprocess.run(
            [sys.executable, "-m", "validators", "records", *argv, "--store", str(store)],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        texts += [done.stdout, done.stderr]
    joined = "".join(texts)
    assert [r for r in RAW if r in joined] == []
    assert "NOTEKEY42" not in joined
    assert "\\x1b[2J" in joined and "\\u202e" in joined  # shown as text
