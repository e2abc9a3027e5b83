"""Record files as an outsider hands them over: names that try to leave --dir, symlinks into
/dev, FIFOs, huge and deeply nested files, truncated exports, a read-only store. Real files,
real sqlite; each must end in exit 2 naming the path (or a repaired file), never a traceback,
a hang or a write outside the folder."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from stackgate.errors import BadInput
from tests.gate.record_factory import make_record
from validators.records import resolve
from validators.records.json_files import (
    export_records,
    import_dir,
    import_record_files,
    read_record_file,
)
from validators.records.model import Record, content_sha256
from validators.records.store import RecordStore

ROOT = Path(__file__).resolve().parents[2]


def _forged(tmp_path: Path, **fields: str) -> Path:
    """A record file whose content hash is right but whose fields are hostile."""
    record = make_record("smoke").model_dump(mode="json")
    record.update(fields)
    record.pop("record_id")
    record["record_id"] = content_sha256(record)
    path = tmp_path / "in" / "forged.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record))
    return path


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"stack": "../../../../ESCAPED"}, "stack: .*not a stack name"),
        ({"stack": "/etc"}, "stack: .*not a stack name"),
        ({"created_at": "/abs/../../x"}, "created_at: .*not an ISO-8601"),
        ({"created_at": "2026-01-01T10:00:00"}, "created_at: .*no time zone"),
    ],
)
def test_fields_that_become_file_names_are_validated_on_import(
    tmp_path: Path, fields: dict[str, str], problem: str
) -> None:
    path = _forged(tmp_path, **fields)
    with RecordStore.open(tmp_path / "s.sqlite") as store:
        with pytest.raises(BadInput) as caught:
            import_dir(store, path.parent)
        assert store.count() == 0
    assert str(path) in caught.value.message
    assert any(re.search(problem, d) for d in caught.value.details)


def test_cli_import_of_an_escaping_record_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    path = _forged(tmp_path, stack="../../../../ESCAPED")
    done = subprocess.run(
        [sys.executable, "-m", "validators", "records", "import", "--dir", str(path.parent),
         "--store", str(tmp_path / "s.sqlite")],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "forged.json" in done.stderr and "Traceback" not in done.stderr
    assert not list(tmp_path.rglob("*ESCAPED*"))


def test_export_never_leaves_dir_through_a_symlinked_stack_folder(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    records = tmp_path / "records"
    records.mkdir()
    (records / "smoke").symlink_to(outside)
    with RecordStore.open(tmp_path / "s.sqlite") as store:
        store.add(make_record("smoke"))
        with pytest.raises(BadInput, match=r"outside .*records"):
            export_records(store, records)
    assert list(outside.iterdir()) == []


def test_export_replaces_a_symlinked_entry_instead_of_writing_through_it(tmp_path: Path) -> None:
    target = tmp_path / "victim.txt"
    target.write_text("keep me")
    record = make_record("smoke")
    folder = tmp_path / "records" / "smoke"
    folder.mkdir(parents=True)
    entry = folder / f"20260101T100000-{record.short_id}.json"
    entry.symlink_to(target)
    with RecordStore.open(tmp_path / "s.sqlite") as store:
        store.add(record)
        done = export_records(store, tmp_path / "records")
    assert done.repaired == [entry]
    assert target.read_text() == "keep me"
    assert not entry.is_symlink() and read_record_file(entry) == record


def test_a_truncated_export_is_repaired_not_skipped(tmp_path: Path) -> None:
    records = tmp_path / "records"
    with RecordStore.open(tmp_path / "s.sqlite") as store:
        store.add(make_record("smoke"))
        (path,) = export_records(store, records).written
        full = path.read_bytes()
        path.write_bytes(full[: len(full) // 2])  # what a full disk left behind
        again = export_records(store, records)
    assert again.repaired == [path] and again.written == []
    assert path.read_bytes() == full
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".")]  # no temp files


def test_a_records_entry_linked_to_dev_zero_is_refused_without_reading_it(tmp_path: Path) -> None:
    folder = tmp_path / "records" / "smoke"
    folder.mkdir(parents=True)
    (folder / "zero.json").symlink_to("/dev/zero")
    with (
        RecordStore.open(tmp_path / "s.sqlite") as store,
        pytest.raises(BadInput, match=r"zero\.json: a symlink \(only regular files"),
    ):
        import_dir(store, tmp_path / "records")


def test_a_records_entry_linked_to_a_readable_file_is_refused_not_read(tmp_path: Path) -> None:
    """guarantees.md: regular files only. A link to a secret (/etc/shadow's stand-in, a
    regular file) is refused naming the link; its bytes reach no message."""
    secret = tmp_path / "shadow"
    secret.write_text("root:$6$SECRET-HASH-never-printed:19000::::::\n")
    folder = tmp_path / "records" / "smoke"
    folder.mkdir(parents=True)
    (folder / "shadow.json").symlink_to(secret)
    with RecordStore.open(tmp_path / "s.sqlite") as store:
        with pytest.raises(BadInput) as refused:
            import_dir(store, tmp_path / "records")
        assert "shadow.json: a symlink" in refused.value.message
        assert "SECRET-HASH" not in " ".join(refused.value.lines())
        (folder / "shadow.json").unlink()
        (folder / "real.json").write_bytes(secret.read_bytes())  # control: a regular file is read
        with pytest.raises(BadInput) as read:
            import_dir(store, tmp_path / "records")
        assert "real.json" in read.value.message


def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    folder = tmp_path / "records"
    folder.mkdir()
    os.mkfifo(folder / "pipe.json")  # nobody writes to it: a blocking open would hang
    assert stat.S_ISFIFO((folder / "pipe.json").stat().st_mode)
    with (
        RecordStore.open(tmp_path / "s.sqlite") as store,
        pytest.raises(BadInput, match=r"pipe\.json: not a regular file"),
    ):
        import_dir(store, folder)


def test_a_huge_sparse_file_is_refused_by_size(tmp_path: Path) -> None:
    path = tmp_path / "huge.json"
    with path.open("wb") as handle:
        handle.truncate(8 << 30)  # 8 GiB, sparse: no disk used
    with pytest.raises(BadInput, match=r"huge\.json: larger than the 64 MiB"):
        read_record_file(path)


def test_deeply_nested_json_is_bad_input_not_a_recursion_error(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(BadInput, match=r"deep\.json: JSON nested"):
        read_record_file(deep)
    shallow_but_deep = tmp_path / "deep2.json"
    shallow_but_deep.write_text("[" * 200 + "]" * 200)
    with pytest.raises(BadInput, match=r"deep2\.json: JSON nested deeper than 64"):
        read_record_file(shallow_but_deep)


def test_non_utf8_is_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "latin1.json"
    path.write_bytes(b'{"note": "caf\xe9"}')
    with pytest.raises(BadInput, match=r"latin1\.json: not UTF-8"):
        read_record_file(path)


def test_one_bad_file_in_a_bulk_import_adds_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    paths = []
    for i in range(5):
        record = make_record("smoke", minute=i)
        paths.append(folder / f"{i}.json")
        paths[-1].write_text(record.to_json())
    paths[3].write_text(paths[3].read_text().replace('"h1"', '"h2"'))
    with RecordStore.open(tmp_path / "s.sqlite") as store:
        with pytest.raises(BadInput, match=r"3\.json: record content does not match"):
            import_record_files(store, paths)
        assert store.count() == 0
        paths[3].write_text(make_record("smoke", minute=3).to_json())
        result = import_record_files(store, paths)
        assert len(result.added) == 5 and store.verify().problems == []


def test_read_only_commands_open_the_store_read_only(tmp_path: Path) -> None:
    """mode=ro: nothing is written (no journal, same bytes), and a write is refused by SQLite
    itself. Root ignores permission bits, so the chmod alone would prove nothing here."""
    folder = tmp_path / "share"
    path = folder / "stackgate.sqlite"
    with RecordStore.open(path) as store:
        store.add(make_record("smoke"))
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    path.chmod(0o444)
    folder.chmod(0o555)
    try:
        with RecordStore.open(path, read_only=True) as store:
            assert store.latest("smoke") is not None
            assert store.verify().problems == []
            with pytest.raises(BadInput, match="read-only"):
                store.add(make_record("smoke", minute=3))
            with pytest.raises(Exception, match="readonly database"):
                store._conn.execute("CREATE TABLE x (y)")
        for action in ("list", "verify", "show"):
            done = subprocess.run(
                [sys.executable, "-m", "validators", "records", action,
                 *(["smoke"] if action == "show" else []), "--store", str(path)],
                cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
                env={**os.environ, "STACKGATE_ROOT": str(tmp_path)},
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
        assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    finally:
        folder.chmod(0o755)
        path.chmod(0o644)


def test_a_missing_store_reads_as_empty_without_creating_it(tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / "stackgate.sqlite"
    with RecordStore.open(path, read_only=True) as store:
        assert store.count() == 0 and store.latest("smoke") is None
    assert not path.parent.exists()


def _commit(folder: Path, record: Record) -> Path:
    path = folder / record.stack / f"{record.created_stamp}-{record.short_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(record.to_json())
    return path


def test_the_gate_reads_only_the_newest_committed_files_of_a_stack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STACKGATE_ROOT", str(tmp_path))
    for minute in range(30):
        _commit(tmp_path / "records", make_record("smoke", minute=minute))
    _commit(tmp_path / "records", make_record("smoke", minute=45, kind="candidate"))
    reads: list[Path] = []
    real = resolve.read_record_file

    def counting(path: Path, *, under: Path | None = None) -> Record:  # the real reader, counted
        reads.append(path)
        return real(path, under=under)

    monkeypatch.setattr(resolve, "read_record_file", counting)
    with RecordStore.open(tmp_path / "s.sqlite", read_only=True) as store:
        baseline = resolve.latest_known_good("smoke", store)
    assert baseline.created_at == "2026-01-01T10:29:00+00:00"
    assert len(reads) == 2  # the newer candidate, then the newest known-good


def test_a_committed_file_whose_name_hides_a_record_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STACKGATE_ROOT", str(tmp_path))
    old = _commit(tmp_path / "records", make_record("smoke", minute=1))
    _commit(tmp_path / "records", make_record("smoke", minute=2))
    old.rename(old.with_name(f"20270101T000000-{old.name.split('-')[1]}"))
    with (
        RecordStore.open(tmp_path / "s.sqlite", read_only=True) as store,
        pytest.raises(BadInput, match=r"the name says 20270101T000000-.* \(renamed by hand\?\)"),
    ):
        resolve.latest_known_good("smoke", store)


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "folder"])
def test_a_store_that_is_not_a_regular_file_is_refused_without_blocking(
    tmp_path: Path, kind: str
) -> None:
    path = tmp_path / "s.sqlite"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    else:
        path.mkdir()
    for read_only in (True, False):
        with (
            pytest.raises(BadInput, match="not a regular file"),
            RecordStore.open(path, read_only=read_only),
        ):
            pass


def test_records_verify_reads_every_committed_file(tmp_path: Path) -> None:
    """The check a records repository's CI can run: every file intact, in its stack's folder,
    under the name of the record it holds."""
    records = tmp_path / "records"
    good = _commit(records, make_record("smoke", minute=1))
    edited = _commit(records, make_record("smoke", minute=2))
    edited.write_text(edited.read_text().replace('"h1"', '"h9"'))
    weak = make_record("weak", minute=3)
    (records / "smoke" / f"{weak.created_stamp}-{weak.short_id}.json").write_text(weak.to_json())
    other = make_record("smoke", minute=4)
    (records / "smoke" / f"{other.created_stamp}-{'0' * 12}.json").write_text(other.to_json())
    done = subprocess.run(
        [sys.executable, "-m", "validators", "records", "verify", "--dir", str(records),
         "--store", str(tmp_path / "none.sqlite"), "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    payload = json.loads(done.stdout)
    assert payload["files"] == 4 and len(payload["file_problems"]) == 3
    text = "\n".join(payload["file_problems"])
    assert f"{edited}: record content does not match" in text
    assert "in the folder of stack 'smoke' but names 'weak'" in text
    assert f"named as another record ({other.created_stamp}-{other.short_id}.json)" in text
    assert str(good) not in text


def test_import_does_not_follow_a_symlinked_folder(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    _commit(elsewhere, make_record("smoke", minute=7))
    records = tmp_path / "records"
    _commit(records, make_record("smoke", minute=1))
    (records / "linked").symlink_to(elsewhere / "smoke")
    (records / "smoke" / "loop").symlink_to(records)  # a loop must not hang the walk
    with RecordStore.open(tmp_path / "s.sqlite") as store:
        assert len(import_dir(store, records).added) == 1


@pytest.mark.parametrize(
    "text",
    [
        "[" * 64 + "]" * 64,  # at the limit
        "[" * 65 + "]" * 65,
        '{"a":' * 65 + "1" + "}" * 65,
        '["' + "[" * 200 + '"]',  # brackets in a string are not nesting
        '["\\"' + "[" * 200 + '"]',  # nor after an escaped quote
        '["\\\\"' + ", []" * 70 + "]",  # an escaped backslash ends no string
        '["é[\\u005b' + "{" * 80 + '", ' + "[" * 63 + "]" * 63 + "]",
        '["]]]]]]", ' + "[" * 64 + "]" * 64 + "]",  # closers in a string hide no depth
    ],
)
def test_the_text_depth_check_agrees_with_the_walk(text: str) -> None:
    """The record reader counts brackets outside strings in the text instead of walking the
    parsed data; on every shape of JSON the two say the same."""
    from stackgate.files import json_depth_exceeds, json_text_depth_exceeds

    for limit in (0, 1, 2, 63, 64, 65):
        assert json_text_depth_exceeds(text, limit) == json_depth_exceeds(json.loads(text), limit)


@pytest.mark.parametrize(
    "value",
    [
        "log line\nhf_" + "Zq7" * 12,  # after an escape: `\n` puts a letter before it in JSON
        "x\thf_" + "Zq7" * 12,
        "ok\nAKIAABCDEFGHIJKLMNOP",
        'quote"ghp_' + "a1" * 18,
        "https://us er@host/simple",  # urlsplit takes the whole `us er` as the user
        "see https://h.example/x?private_token=abc",
    ],
)
def test_a_record_file_with_a_secret_anywhere_is_refused(tmp_path: Path, value: str) -> None:
    record = make_record("smoke").model_copy(update={"note": value}).sealed()
    path = tmp_path / "r.json"
    path.write_text(record.to_json())
    with pytest.raises(BadInput, match="holds secrets"):
        read_record_file(path)


def test_the_stored_body_is_made_from_the_hash_encoding(tmp_path: Path) -> None:
    """load_record's by-product body is canonical JSON of the whole record, byte for byte what
    a dump would make, for records whose nested objects hold `record_id` and `runs` keys too."""
    from validators.records.json_files import read_record_file_body
    from validators.records.model import canonical_json, canonical_texts

    nested = {"record_id": "x" * 64, "runs": 3, "z": {"record_id": 1}, "é": '"record_id":"a"'}
    for manifest in ({}, nested):
        record = make_record("smoke").model_copy(update={"manifest": manifest}).sealed()
        path = tmp_path / "r.json"
        path.write_text(record.to_json())
        read, body = read_record_file_body(path)
        assert body == canonical_json(record.model_dump(mode="json"))
        assert read == record
    for content in ({}, {"a": 1}, {"zz": 1}, {"a": [1], "zz": "}"}):
        text, body = canonical_texts(content, "f" * 64)
        assert text == canonical_json(content)
        assert body == canonical_json({**content, "record_id": "f" * 64})
