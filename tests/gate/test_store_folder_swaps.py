"""The record store's folder (not the file) swapped for a symlink while a writer works: the
store and its head are never written into the folder the link leads to, and the real store
stays whole. Real racer threads (tests/helpers/swap.py), real SQLite, real CLI processes."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

from stackgate.errors import StackgateError
from tests.gate.record_factory import make_record
from tests.helpers.swap import racing
from validators.records.store import RecordStore

ROOT = Path(__file__).resolve().parents[2]
TRIES = 400


def _snapshot(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def _race(tmp_path: Path, victim: Path) -> tuple[int, int, int]:
    store = tmp_path / "state" / "records.sqlite"
    with RecordStore.open(store) as s:
        s.add(make_record("smoke"))
    ok = refused = 0
    with racing(store.parent, victim) as racer:
        for i in range(TRIES):
            try:
                with RecordStore.open(store) as s:
                    s.add(make_record("smoke", note=f"try {i}", minute=i % 60))
                ok += 1
            except StackgateError as exc:
                refused += 1
                assert str(store.parent) in exc.message or str(store) in exc.message
    # The real store is whole. (Where the racer had moved the folder aside at the instant a
    # writer opened it, the writer made a new folder and store by that name, as it does for a
    # folder someone deleted: both verify, and they hold every import that said OK.)
    counts = 0
    for folder in (store.parent, store.parent.with_name("state.aside")):
        if (folder / store.name).is_file() and not folder.is_symlink():
            with RecordStore.open(folder / store.name, read_only=True) as s:
                assert s.verify().problems == []
                counts += s.count()
    assert counts >= 1 + ok
    return racer.swaps, ok, refused


def test_imports_never_write_into_a_folder_swapped_in_for_the_stores(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    swaps, ok, refused = _race(tmp_path, victim)
    assert swaps > 0, "the racer never swapped: the test proved nothing"
    assert os.listdir(victim) == [], (swaps, ok, refused)


def test_a_swapped_in_folder_holding_a_store_of_that_name_is_left_as_it_was(
    tmp_path: Path,
) -> None:
    """Variant: the folder the link leads to holds a store of the same file name (and its
    head): SQLite would open it rather than make one; its bytes never change."""
    victim = tmp_path / "victim"
    with RecordStore.open(victim / "records.sqlite") as s:
        s.add(make_record("weak", minute=7))
    before = _snapshot(victim)
    swaps, ok, refused = _race(tmp_path, victim)
    assert swaps > 0
    assert _snapshot(victim) == before, (swaps, ok, refused)


def test_a_store_folder_that_is_a_symlink_is_refused_by_the_cli(tmp_path: Path) -> None:
    """Made before the command (the swap already done): `records import` refuses it, names it,
    exit 3, and the folder the link leads to is not touched; a reader still follows it."""
    victim = tmp_path / "victim"
    with RecordStore.open(victim / "records.sqlite") as s:
        s.add(make_record("weak", minute=7))
    before = _snapshot(victim)
    (tmp_path / "state").symlink_to(victim)
    records = tmp_path / "in" / "smoke"
    records.mkdir(parents=True)
    (records / "a.json").write_text(make_record(minute=1).to_json())
    env = {"PATH": "/usr/bin:/bin", "NO_COLOR": "1", "STACKGATE_ROOT": str(tmp_path)}
    store = tmp_path / "state" / "records.sqlite"
    done = subprocess.run(
        [sys.executable, "-m", "validators", "records", "import", "--dir", str(tmp_path / "in"),
         "--store", str(store)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 3, done.stdout + done.stderr
    assert "record store's folder is a symlink" in done.stderr
    assert str(tmp_path / "state") in done.stderr and "Traceback" not in done.stderr
    assert _snapshot(victim) == before
    listed = subprocess.run(
        [sys.executable, "-m", "validators", "records", "list", "--store", str(store)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    assert _snapshot(victim) == before
