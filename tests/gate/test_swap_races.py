"""Real racers swap what a command is about to write (the record store, `records/<stack>`)
for a symlink to a victim, in a loop, while the command runs many times; nothing is ever
written into the victim. A refused try is an EnvironmentProblem/BadInput naming the path."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from pathlib import Path

from stackgate.errors import StackgateError
from tests.gate.record_factory import make_record
from tests.helpers.swap import racing
from validators.records.json_files import export_records
from validators.records.store import RecordStore

TRIES = 600
VICTIM_TEXT = b"victim: must never change\n"


def _tries(action: Callable[[int], None]) -> tuple[int, int]:
    ok = refused = 0
    for i in range(TRIES):
        try:
            action(i)
            ok += 1
        except StackgateError:
            refused += 1
    return ok, refused


def test_imports_never_turn_a_swapped_in_victim_into_a_store(tmp_path: Path) -> None:
    victim = tmp_path / "victim.db"
    victim.touch()  # empty: SQLite would make a database of it
    store_path = tmp_path / "store" / "records.sqlite"
    with RecordStore.open(store_path) as store:
        store.add(make_record("smoke"))

    def one(i: int) -> None:
        with RecordStore.open(store_path) as s:
            s.add(make_record("smoke", note=f"try {i}", minute=i % 60))

    with racing(store_path, victim) as racer:
        ok, refused = _tries(one)
    assert victim.read_bytes() == b""
    assert racer.swaps > 0 and ok + refused == TRIES, (racer.swaps, ok, refused)


def test_export_never_writes_into_a_stack_folder_swapped_for_a_symlink(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.mkdir()
    store_path = tmp_path / "s.sqlite"
    records = tmp_path / "records"
    with RecordStore.open(store_path) as store:
        for i in range(20):
            store.add(make_record("smoke", note=f"try {i}", minute=i % 60))
        export_records(store, records)

        def one(_i: int) -> None:
            names: list[str] = []
            with contextlib.suppress(OSError):  # the racer may have the folder aside right now
                names = os.listdir(records / "smoke")
            for name in names:
                with contextlib.suppress(OSError):
                    (records / "smoke" / name).unlink()
            export_records(store, records)

        with racing(records / "smoke", victim) as racer:
            ok, refused = _tries(one)
    assert os.listdir(victim) == []
    assert racer.swaps > 0 and ok > 0, (racer.swaps, ok, refused)
