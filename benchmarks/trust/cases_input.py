"""Bad-input and fault cases of this round: each run for real against this checkout."""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from benchmarks.trust.harness import (
    ROOT,
    Outcome,
    case,
    committed_records,
    fleet_job,
    module,
    no_traceback,
    suite_case,
    tail,
)  # fmt: skip

sys.path.insert(0, str(ROOT))
from tests.gate.record_factory import make_record
from validators.records.model import content_sha256

DEEP = "[" * 5000 + "]" * 5000
DEEP_OBJ = '{"a":' * 5000 + "1" + "}" * 5000


def _refused(done: subprocess.CompletedProcess[str], *words: str) -> Outcome:
    ok = done.returncode == 2 and no_traceback(done) and all(w in done.stderr for w in words)
    return Outcome(ok, f"exit {done.returncode}: {tail(done, 160)}")


# ---------------------------------------------------------------- deep JSON
@case("B7.1", "bad input", 7, "issue", "bisect --bad FILE: JSON nested 5,000 deep")
def bisect_deep(tmp: Path) -> Outcome:
    bad = tmp / "gate.json"
    bad.write_text(DEEP)
    good = tmp / "good.json"
    good.write_text(make_record(minute=30).to_json())
    done = module(
        tmp, "validators", "bisect", "--good", good, "--bad", bad, "--store", tmp / "s.sqlite"
    )
    return _refused(done, str(bad))


@case(
    "B7.2", "bad input", 7, "variant", "records import: a record file that is a 5,000-deep object"
)
def import_deep(tmp: Path) -> Outcome:
    (tmp / "in" / "smoke").mkdir(parents=True)
    (tmp / "in" / "smoke" / "deep.json").write_text(DEEP_OBJ)
    done = module(
        tmp, "validators", "records", "import", "--dir", tmp / "in", "--store", tmp / "s.sqlite"
    )
    return _refused(done, "deep.json")


@case("B7.3", "bad input", 7, "variant", "gate CANDIDATE: a candidate run file nested 5,000 deep")
def gate_deep(tmp: Path) -> Outcome:
    cand = tmp / "cand.json"
    cand.write_text(DEEP)
    done = module(
        tmp, "validators", "gate", cand, "--baseline", "smoke", "--store", tmp / "s.sqlite"
    )
    return _refused(done, "cand.json")


@case(
    "B7.4",
    "bad input",
    7,
    "variant",
    "fleet verdict: a node's status.json nested 5,000 deep (the verdict goes on, that node named)",
)
def fleet_deep(tmp: Path) -> Outcome:
    job, status = fleet_job(tmp)
    status.write_text(DEEP_OBJ)
    done = module(tmp, "validators", "fleet", "verdict", "--job-dir", job)
    ok = done.returncode in (1, 2) and no_traceback(done) and "bad1" in done.stdout + done.stderr
    return Outcome(ok, f"exit {done.returncode}: {tail(done, 160)}")


@case("B7.5", "bad input", 7, "variant", "mark-good RUN: a run report nested 5,000 deep")
def mark_good_deep(tmp: Path) -> Outcome:
    run = tmp / "run.json"
    run.write_text(DEEP_OBJ)
    done = module(tmp, "validators", "mark-good", "smoke", run, "--store", tmp / "s.sqlite")
    return _refused(done, "run.json")


# ---------------------------------------------------------------- records show ARG
def _store_with_one(tmp: Path) -> Path:
    (tmp / "one" / "smoke").mkdir(parents=True)
    (tmp / "one" / "smoke" / "r.json").write_text(make_record(minute=5).to_json())
    store = tmp / "s.sqlite"
    done = module(tmp, "validators", "records", "import", "--dir", tmp / "one", "--store", store)
    assert done.returncode == 0, done.stderr
    return store


@case("B7.6", "bad input", 7, "issue", "records show '' names the empty argument")
def show_empty(tmp: Path) -> Outcome:
    done = module(tmp, "validators", "records", "show", "", "--store", _store_with_one(tmp))
    ok = (
        done.returncode == 2
        and no_traceback(done)
        and ("empty" in done.stderr or "''" in done.stderr)
    )
    return Outcome(ok, f"exit {done.returncode}: {tail(done, 160)}")


@case(
    "B7.7",
    "bad input",
    7,
    "variant",
    "records show with a blank, a NUL-free control character, and a 10,000-character argument",
)
def show_odd(tmp: Path) -> Outcome:
    seen, ok = [], True
    store = _store_with_one(tmp)
    for arg in (" ", "\x1b[2J", "a" * 10000):
        done = module(tmp, "validators", "records", "show", arg, "--store", store)
        good = (
            done.returncode == 2
            and no_traceback(done)
            and "\x1b[2J" not in done.stderr
            and len(done.stderr) < 4000
        )
        ok &= good
        seen.append(f"{arg[:6]!a}: exit {done.returncode}, {len(done.stderr)} chars")
    return Outcome(ok, "; ".join(seen) + " | " + tail(done, 100))


# ---------------------------------------------------------------- manifest env values
def _check_env(tmp: Path, value: str) -> subprocess.CompletedProcess[str]:
    text = (
        (ROOT / "tests/builder/data/smoke.toml")
        .read_text()
        .replace('STACKGATE_SMOKE = "1"', f"STACKGATE_SMOKE = {json.dumps(value)}")
    )
    folder = tmp / f"s{abs(hash(value))}"
    folder.mkdir()
    (folder / "smoke.toml").write_text(text)
    return module(tmp, "builder", "check", folder / "smoke.toml")


@case(
    "B7.8",
    "bad input",
    7,
    "issue",
    'manifest env value "$PATH:/opt/x" (the image expands it, the venv keeps it)',
)
def env_dollar(tmp: Path) -> Outcome:
    return _refused(_check_env(tmp, "$PATH:/opt/x"), "STACKGATE_SMOKE")


@case(
    "B7.9",
    "bad input",
    7,
    "variant",
    'manifest env values "${HOME}/x", "\\$PATH", "$HOME", "a${X:-b}" (a plain "5$" allowed as the control)',
)
def env_dollar_variants(tmp: Path) -> Outcome:
    seen, ok = [], True
    for value in ("${HOME}/x", "\\$PATH", "$HOME", "a${X:-b}"):
        done = _check_env(tmp, value)
        ok &= done.returncode == 2 and "STACKGATE_SMOKE" in done.stderr
        seen.append(f"{value}: {done.returncode}")
    control = _check_env(tmp, "costs 5$")
    ok &= control.returncode == 0
    return Outcome(ok, "; ".join(seen) + f"; control '5$': {control.returncode}")


# ---------------------------------------------------------------- faults: the clock
def _resealed(data: dict[str, object]) -> dict[str, object]:
    data = {k: v for k, v in data.items() if k != "record_id"}
    data["record_id"] = content_sha256(data)
    return data


def _future(note: str, days: float) -> str:
    data = make_record(note=note).model_dump(mode="json")
    data["created_at"] = (datetime.now(UTC) + timedelta(days=days)).isoformat(timespec="seconds")
    return json.dumps(_resealed(data))


suite_case(
    "F4.1",
    "faults",
    4,
    "issue",
    "mark-good --export under faketime +3 days, then records import --dir on the real clock (the suite's test)",
    "tests/gate/test_clock.py::test_one_record_from_a_fast_clock_warns_loudly_and_never_blocks_the_others",
)


@case(
    "F4.2",
    "faults",
    4,
    "variant",
    "records import --dir: one record dated 2 days ahead beside a good one (the good one imported, the other named)",
)
def import_future(tmp: Path) -> Outcome:
    folder = tmp / "in" / "smoke"
    folder.mkdir(parents=True)
    (folder / "good.json").write_text(make_record(minute=30).to_json())
    (folder / "ahead.json").write_text(_future("ahead", 2))
    done = module(
        tmp,
        "validators",
        "records",
        "import",
        "--dir",
        tmp / "in",
        "--store",
        tmp / "s.sqlite",
        "--json",
    )
    try:
        out = json.loads(done.stdout)
    except ValueError:
        out = {}
    ok = done.returncode == 0 and len(out.get("added", [])) == 1 and "ahead.json" in done.stderr
    return Outcome(
        ok, f"exit {done.returncode}, added {len(out.get('added', []))}: {tail(done, 140)}"
    )


@case(
    "F4.3",
    "faults",
    4,
    "variant",
    "a gate whose committed records/<stack> holds one record dated 2099 (the baseline stays the real newest)",
)
def gate_future(tmp: Path) -> Outcome:
    folder, cand, env = committed_records(tmp)
    data = make_record(note="2099").model_dump(mode="json")
    data["created_at"] = "2099-01-01T00:00:00+00:00"
    (folder / "future.json").write_text(json.dumps(_resealed(data)))
    done = module(
        tmp,
        "validators",
        "gate",
        cand,
        "--baseline",
        "smoke",
        "--json",
        "--store",
        tmp / "s.sqlite",
        env=env,
    )
    try:
        base = json.loads(done.stdout).get("baseline", "")
    except ValueError:
        base = ""
    ok = done.returncode in (0, 1) and base.startswith(
        "smoke@" + make_record(minute=30).short_id[:12]
    )
    return Outcome(ok, f"exit {done.returncode}, baseline {base[:24]}; {tail(done, 120)}")


@case(
    "F4.4",
    "faults",
    4,
    "variant",
    "records verify --dir over a folder holding a record from a fast clock (verify is the check that reads them all)",
)
def verify_future(tmp: Path) -> Outcome:
    folder = tmp / "records" / "smoke"
    folder.mkdir(parents=True)
    (folder / "ahead.json").write_text(_future("ahead", 3))
    done = module(
        tmp,
        "validators",
        "records",
        "verify",
        "--dir",
        tmp / "records",
        "--store",
        tmp / "s.sqlite",
    )
    ok = no_traceback(done) and "ahead" in done.stderr + done.stdout and done.returncode != 0
    return Outcome(ok, f"exit {done.returncode}: {tail(done, 160)}")


# ---------------------------------------------------------------- faults: the disk, forks, empty files
def _tmpfs(tmp: Path, mb: int) -> Path | None:
    point = tmp / "disk"
    point.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={mb}m", "tmpfs", str(point)],
        capture_output=True,
        check=False,
    )
    return point if done.returncode == 0 else None


def _fill(point: Path) -> None:
    try:
        with (point / "fill").open("wb") as fill:
            while True:
                fill.write(b"x" * 65536)
                fill.flush()
    except OSError:
        pass


def _records_in(tmp: Path, n: int) -> Path:
    src = tmp / "in" / "smoke"
    src.mkdir(parents=True)
    for i in range(n):
        (src / f"r{i}.json").write_text(make_record(minute=i).to_json())
    return tmp / "in"


@case(
    "F7.1",
    "faults",
    7,
    "issue",
    "a first records import on a full disk (a real 1 MiB tmpfs, filled): exit 3, not 2",
)
def full_disk_import(tmp: Path) -> Outcome:
    src = _records_in(tmp, 3)
    disk = _tmpfs(tmp, 1)
    if disk is None:
        return Outcome(False, "cannot mount a tmpfs here: not measured")
    try:
        _fill(disk)
        done = module(
            tmp, "validators", "records", "import", "--dir", src, "--store", disk / "store.sqlite"
        )
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)
    return Outcome(
        done.returncode == 3 and no_traceback(done), f"exit {done.returncode}: {tail(done, 160)}"
    )


@case(
    "F7.2",
    "faults",
    7,
    "variant",
    "records export onto a full disk, and an import into an existing store on a full disk: exit 3, no half-written file left",
)
def full_disk_export(tmp: Path) -> Outcome:
    src = _records_in(tmp, 5)
    store = tmp / "s.sqlite"
    assert (
        module(tmp, "validators", "records", "import", "--dir", src, "--store", store).returncode
        == 0
    )
    disk = _tmpfs(tmp, 1)
    if disk is None:
        return Outcome(False, "cannot mount a tmpfs here: not measured")
    try:
        shutil.copyfile(store, disk / "s.sqlite")
        (tmp / "more" / "smoke").mkdir(parents=True)
        for i in range(40):
            (tmp / "more" / "smoke" / f"m{i}.json").write_text(
                make_record(note="x" * 20000, minute=i % 60, throughput=900 + i).to_json()
            )
        _fill(disk)
        a = module(
            tmp, "validators", "records", "export", "--dir", disk / "records", "--store", store
        )
        b = module(
            tmp,
            "validators",
            "records",
            "import",
            "--dir",
            tmp / "more",
            "--store",
            disk / "s.sqlite",
        )
        left = (
            [p.name for p in (disk / "records").rglob("*") if p.is_file() and ".tmp" in p.name]
            if (disk / "records").exists()
            else []
        )
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)
    ok = (
        a.returncode == 3 and b.returncode == 3 and not left and no_traceback(a) and no_traceback(b)
    )
    return Outcome(
        ok,
        f"export exit {a.returncode}, import exit {b.returncode}, temp files left {left}; {tail(a, 80)} | {tail(b, 80)}",
    )


@case(
    "F7.3",
    "faults",
    7,
    "issue",
    "two copies of one store exporting into one records/ folder: named a fork, nothing written",
)
def fork_export(tmp: Path) -> Outcome:
    a, b, records = tmp / "a.sqlite", tmp / "b.sqlite", tmp / "records"
    src = _records_in(tmp, 1)
    assert (
        module(tmp, "validators", "records", "import", "--dir", src, "--store", a).returncode == 0
    )
    shutil.copyfile(a, b)
    for store, minute in ((a, 20), (b, 21)):
        one = tmp / f"one{minute}" / "smoke"
        one.mkdir(parents=True)
        (one / "r.json").write_text(make_record(minute=minute, note=f"copy {minute}").to_json())
        assert (
            module(
                tmp, "validators", "records", "import", "--dir", one.parent, "--store", store
            ).returncode
            == 0
        )
    first = module(tmp, "validators", "records", "export", "--dir", records, "--store", a)
    before = sorted(str(p) for p in records.rglob("*"))
    second = module(tmp, "validators", "records", "export", "--dir", records, "--store", b)
    after = sorted(str(p) for p in records.rglob("*"))
    ok = (
        first.returncode == 0
        and second.returncode == 3
        and "fork" in second.stderr
        and before == after
    )
    return Outcome(
        ok,
        f"first {first.returncode}, second {second.returncode}, folder unchanged {before == after}: {tail(second, 140)}",
    )


@case(
    "F7.4",
    "faults",
    7,
    "variant",
    "after a fork written by hand (the second copy's files and head copied in): records verify --dir names the fork as a possible cause",
)
def fork_verify(tmp: Path) -> Outcome:
    a, b = tmp / "a.sqlite", tmp / "b.sqlite"
    src = _records_in(tmp, 1)
    assert (
        module(tmp, "validators", "records", "import", "--dir", src, "--store", a).returncode == 0
    )
    shutil.copyfile(a, b)
    for store, minute in ((a, 20), (b, 21)):
        one = tmp / f"one{minute}" / "smoke"
        one.mkdir(parents=True)
        (one / "r.json").write_text(make_record(minute=minute, note=f"copy {minute}").to_json())
        module(tmp, "validators", "records", "import", "--dir", one.parent, "--store", store)
    module(tmp, "validators", "records", "export", "--dir", tmp / "ra", "--store", a)
    module(tmp, "validators", "records", "export", "--dir", tmp / "rb", "--store", b)
    shutil.copytree(tmp / "rb", tmp / "ra", dirs_exist_ok=True)  # b's head over a's: a fork in git
    done = module(tmp, "validators", "records", "verify", "--dir", tmp / "ra", "--store", a)
    ok = done.returncode == 1 and "fork" in done.stderr + done.stdout and no_traceback(done)
    return Outcome(ok, f"exit {done.returncode}: {tail(done, 180)}")


def _no_schema(path: Path, table: str | None = None) -> Path:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t(x)")
    if table is None:
        conn.execute("DROP TABLE t")
    conn.commit()
    conn.close()
    return path


@case(
    "F7.5",
    "faults",
    7,
    "issue",
    "an SQLite file with an empty schema as the store: records list reads no records (was 'attempt to write a readonly database')",
)
def empty_schema(tmp: Path) -> Outcome:
    store = _no_schema(tmp / "e.sqlite")
    done = module(tmp, "validators", "records", "list", "--store", store, "--json")
    ok = done.returncode == 0 and done.stdout.strip() == "[]" and "readonly" not in done.stderr
    return Outcome(ok, f"exit {done.returncode}: {tail(done, 120)}")


@case(
    "F7.6",
    "faults",
    7,
    "variant",
    "the empty-schema file to records verify / show, a 0-byte store file, and an SQLite file holding another program's table",
)
def odd_sqlite(tmp: Path) -> Outcome:
    seen, ok = [], True
    empty = _no_schema(tmp / "e.sqlite")
    zero = tmp / "z.sqlite"
    zero.touch()
    foreign = _no_schema(tmp / "f.sqlite", table="t")
    for label, store, argv, codes in (
        ("verify empty-schema", empty, ["verify"], (0, 1)),
        ("show on empty-schema", empty, ["show", "abc123"], (2,)),
        ("list 0-byte", zero, ["list"], (0, 2, 3)),
        ("list foreign", foreign, ["list"], (2, 3)),
        ("import into foreign", foreign, ["import", "--dir", _records_in(tmp, 1)], (2, 3)),
    ):
        done = module(tmp, "validators", "records", *argv, "--store", store)
        good = (
            done.returncode in codes
            and no_traceback(done)
            and "readonly database" not in done.stderr
        )
        ok &= good
        seen.append(f"{label}: exit {done.returncode}{'' if good else ' <- ' + tail(done, 90)}")
    return Outcome(ok, "; ".join(seen))


@case(
    "F6.1",
    "faults",
    6,
    "variant",
    "a lock holder killed with SIGKILL mid-hold: the next taker gets the lock at once (flock dies with its holder)",
)
def killed_holder(tmp: Path) -> Outcome:
    code = """
import subprocess, sys, time, os, signal
from pathlib import Path
from stackgate import waits
os.environ['STACKGATE_CACHE'] = sys.argv[1] + '/cache'
path = waits.lock_dir() / 'k.lock'
h = subprocess.Popen([sys.executable, '-c', sys.argv[2], str(path)], stdout=subprocess.PIPE, text=True)
assert h.stdout.readline().strip() == 'held'
os.kill(h.pid, signal.SIGKILL); h.wait()
t = time.monotonic()
with waits.held(path, what='k', timeout_s=5, say=print): pass
print('TAKEN after %.2f s' % (time.monotonic() - t))
"""
    from benchmarks.trust.cases_security import _HOLD
    from benchmarks.trust.harness import python

    done = python(tmp, code, str(tmp), _HOLD)
    return Outcome(
        "TAKEN after 0." in done.stdout,
        ascii(" ".join(done.stdout.split())[-160:]) + tail(done, 80),
    )
