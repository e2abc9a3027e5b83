"""Security cases: each plants or races for real and looks at what the command did."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from benchmarks.trust.harness import (
    PY,
    ROOT,
    Outcome,
    base_env,
    case,
    committed_records,
    fleet_job,
    leaks,
    module,
    no_traceback,
    planted_exe,
    python,
    suite_case,
    tail,
)  # fmt: skip

SECRET_FILE_TEXT = "root:$6$PLANTEDSHADOWHASH:19000:0:99999:7:::\n"
TELLS = ("S3CRETPW", "PRIVTOK77", "AMZCRED42", "Qz7Qz7Qz7", "BEARERSECRET123")
HF = "hf_" + "Qz7" * 12


# ---------------------------------------------------------------- item 1: programs chosen by the environment
def _plants(tmp: Path, names: tuple[str, ...]) -> tuple[Path, Path, Path]:
    marker = tmp / "ran"
    shared, cwd = tmp / "shared", tmp / "cwd"
    for folder in (shared, cwd):
        folder.mkdir(parents=True, exist_ok=True)
        for name in names:
            planted_exe(folder / name, marker, f"{folder.name}/{name}")
    shared.chmod(0o777 | stat.S_ISVTX)  # a /tmp-like folder every local user can write
    inc = tmp / "inc" / "slurm"
    inc.mkdir(parents=True)
    (inc / "slurm.h").write_text("#error PLANTED_HEADER\n")
    return marker, shared, cwd


def _submit(
    tmp: Path, env: dict[str, str], cwd: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    (tmp / "w").mkdir(exist_ok=True)
    return module(tmp, "validators", "fleet", "submit", "cu130", "--wheelhouse", tmp / "w",
                  "--nodes", "gpu[1-3]", "--jobs-root", tmp / "jobs", "--json", *extra,
                  env=env, cwd=cwd)  # fmt: skip


@case(
    "S1.1",
    "security",
    1,
    "issue",
    "fleet submit --dry-run: cc planted first on PATH and in the working folder (empty PATH entry), slurm.h via CPATH",
)
def planted_cc_dry_run(tmp: Path) -> Outcome:
    marker, shared, cwd = _plants(tmp, ("cc", "gcc"))
    env = base_env(tmp, PATH=f"{shared}::/usr/bin:/bin", CPATH=str(tmp / "inc"))
    control = subprocess.run(
        ["cc", "--version"], env=env, cwd=cwd, capture_output=True, check=False
    )
    assert marker.exists() and control.returncode == 1, "control: the plant runs the ordinary way"
    marker.unlink()
    done = _submit(tmp, env, cwd, "--dry-run")
    ran = marker.read_text().split() if marker.exists() else []
    return Outcome(
        done.returncode == 0 and not ran,
        f"exit {done.returncode}, planted ran: {ran}; {tail(done, 120)}",
    )


@case(
    "S1.2",
    "security",
    1,
    "issue",
    "pin helper compiled for a real submit with slurm/slurm.h planted through CPATH and C_INCLUDE_PATH",
)
def planted_header(tmp: Path) -> Outcome:
    _plants(tmp, ())
    code = ("import sys; from pathlib import Path; from validators.fleet.slurm import pin; "
            "print('built', pin.build_helper(Path(sys.argv[1])))")  # fmt: skip
    (tmp / "work").mkdir()
    env = base_env(tmp, CPATH=str(tmp / "inc"), C_INCLUDE_PATH=str(tmp / "inc"))
    src = python(
        tmp, "from validators.fleet.slurm import pin; print(pin.source_path())"
    ).stdout.strip()
    control = subprocess.run(
        ["/usr/bin/cc", "-fsyntax-only", src], env=env, capture_output=True, text=True, check=False
    )
    assert "PLANTED_HEADER" in control.stderr, "control: the plant is read by an ordinary compile"
    done = python(tmp, code, str(tmp / "work"), env=env)
    ok = (
        done.returncode == 0
        and "built" in done.stdout
        and "PLANTED" not in done.stdout + done.stderr
    )
    return Outcome(ok, f"exit {done.returncode}: {tail(done, 160)}")


@case(
    "S1.3",
    "security",
    1,
    "variant",
    "pin helper compile with DEPENDENCIES_OUTPUT / SUNPRO_DEPENDENCIES (gcc writes a file there), COMPILER_PATH to planted as/ld, GCC_EXEC_PREFIX",
)
def compiler_env_variables(tmp: Path) -> Outcome:
    marker = tmp / "ran"
    tools = tmp / "tools"
    for name in ("as", "ld", "collect2", "cc1"):
        planted_exe(tools / name, marker)
    victim = tmp / "victim.d"
    env = base_env(tmp, DEPENDENCIES_OUTPUT=str(victim), SUNPRO_DEPENDENCIES=str(victim),
                   COMPILER_PATH=str(tools), GCC_EXEC_PREFIX=f"{tools}/")  # fmt: skip
    src = tmp / "x.c"
    src.write_text("int main(void){return 0;}\n")
    subprocess.run(
        ["/usr/bin/cc", "-c", str(src), "-o", str(tmp / "x.o")],
        env=env,
        capture_output=True,
        check=False,
    )
    assert victim.exists() or marker.exists(), "control: an ordinary compile obeys them"
    victim.unlink(missing_ok=True)
    marker.unlink(missing_ok=True)
    (tmp / "work").mkdir()
    done = python(tmp, "import sys; from pathlib import Path; from validators.fleet.slurm import pin; "
                  "print('built', pin.build_helper(Path(sys.argv[1])))", str(tmp / "work"), env=env)  # fmt: skip
    ok = done.returncode == 0 and not victim.exists() and not marker.exists()
    return Outcome(
        ok,
        f"exit {done.returncode}, file written by gcc: {victim.exists()}, planted tool ran: {marker.exists()}",
    )


@case(
    "S1.4",
    "security",
    1,
    "variant",
    "a real fleet submit (not dry) with scontrol/sbatch/cc planted in the working folder (empty PATH entry) and a world-writable PATH folder",
)
def planted_slurm_tools(tmp: Path) -> Outcome:
    marker, shared, cwd = _plants(tmp, ("scontrol", "sbatch", "squeue", "sacct", "cc"))
    env = base_env(tmp, PATH=f"{shared}::.:/usr/bin:/bin")
    done = _submit(tmp, env, cwd)
    ran = marker.read_text().split() if marker.exists() else []
    return Outcome(
        not ran and no_traceback(done),
        f"exit {done.returncode}, planted ran: {ran}; {tail(done, 140)}",
    )


@case(
    "S1.5",
    "security",
    1,
    "variant",
    "LD_PRELOAD / LD_AUDIT set for stackgate: a real preload library whose constructor records every process it enters; children started by stackgate.proc",
)
def loader_injection(tmp: Path) -> Outcome:
    marker = tmp / "entered"
    src = tmp / "evil.c"
    src.write_text(
        "#include <stdio.h>\n#include <unistd.h>\n__attribute__((constructor)) static void f(void){"
        f'char b[512]={{0}}; readlink("/proc/self/exe", b, 511); FILE*o=fopen("{marker}","a");'
        'if(o){fprintf(o,"%s\\n",b);fclose(o);}}\n'
    )
    lib = tmp / "evil.so"
    subprocess.run(["/usr/bin/cc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    env = base_env(tmp, LD_PRELOAD=str(lib))
    done = python(tmp, "from stackgate import proc; proc.run(['/bin/sh', '-c', 'true']); "
                  "proc.run(['/usr/bin/env'])", env=env)  # fmt: skip
    entered = sorted(set(marker.read_text().split())) if marker.exists() else []
    children = [e for e in entered if not Path(e).name.startswith("python")]
    ok = done.returncode == 0 and bool(entered) and not children
    return Outcome(
        ok,
        f"exit {done.returncode}; preload entered {entered} (the caller's own python is its choice; children: {children})",
    )


# ---------------------------------------------------------------- item 2: check, then use (races)
TRIES = 300


def _race(tmp: Path, code: str) -> Outcome:
    done = python(tmp, code, str(tmp), timeout=580)
    last = done.stdout.strip().splitlines()[-1:] or ["(no output)"]
    return Outcome(
        done.returncode == 0 and last[0].startswith("HELD"),
        f"{last[0]}; {tail(done, 100) if done.returncode else ''}",
    )


_RACE_HEAD = f"""
import os, sys
from pathlib import Path
from stackgate.errors import StackgateError
from tests.helpers.swap import racing
from tests.gate.record_factory import make_record
tmp = Path(sys.argv[1]); TRIES = {TRIES}
victim = tmp / 'victim'; victim.mkdir()
ok = refused = raw = 0
raw_seen = []
def tried(fn, i):
    global ok, refused, raw
    try:
        fn(i); ok += 1
    except StackgateError:
        refused += 1
    except OSError as e:  # not the product's own error: counted and shown, the victim still decides
        raw += 1; raw_seen.append(f'{{type(e).__name__}}: {{e}}'[-120:])
def verdict(racer, in_victim):
    held = not in_victim and racer.swaps > 0
    print(('HELD' if held else 'BROKEN'), f'swaps {{racer.swaps}}, ok {{ok}}, refused {{refused}}, raw OSError {{raw}} {{raw_seen[:1]}}, in victim: {{in_victim[:5]}}')
"""


# one record store and an import into it per try (`one`), for the racers that swap it
_STORE_IMPORTS = """
from validators.records.store import RecordStore
store = tmp / 'store' / 'records.sqlite'
with RecordStore.open(store) as s: s.add(make_record('smoke'))
def one(i):
    with RecordStore.open(store) as s: s.add(make_record('smoke', note=f'try {i}', minute=i % 60))
"""


@case(
    "S2.1",
    "security",
    2,
    "issue",
    f"the record store swapped for a symlink to an empty file while imports run ({TRIES} imports)",
)
def race_store(tmp: Path) -> Outcome:
    return _race(
        tmp,
        _RACE_HEAD
        + _STORE_IMPORTS
        + """
vf = tmp / 'victim.db'; vf.touch()
with racing(store, vf) as r:
    for i in range(TRIES): tried(one, i)
verdict(r, ['victim.db is now %d bytes' % vf.stat().st_size] if vf.stat().st_size else [])
""",
    )


@case(
    "S2.2",
    "security",
    2,
    "issue",
    f"records/<stack> swapped for a symlink while `records export` writes ({TRIES} exports)",
)
def race_export(tmp: Path) -> Outcome:
    return _race(
        tmp,
        _RACE_HEAD
        + """
import contextlib
from validators.records.store import RecordStore
from validators.records.json_files import export_records
records = tmp / 'records'
with RecordStore.open(tmp / 's.sqlite') as s:
    for i in range(20): s.add(make_record('smoke', note=f'r{i}', minute=i))
    export_records(s, records)
    def one(i):
        with contextlib.suppress(OSError):
            for n in os.listdir(records / 'smoke'):
                with contextlib.suppress(OSError): (records / 'smoke' / n).unlink()
        export_records(s, records)
    with racing(records / 'smoke', victim) as r:
        for i in range(TRIES): tried(one, i)
verdict(r, os.listdir(victim))
""",
    )


suite_case(
    "S2.3",
    "security",
    2,
    "issue",
    "<env>.partial swapped for a symlink during real builds (6 uv builds; the suite's racer)",
    "tests/builder/test_partial_swap_race.py",
)


@case(
    "S2.4",
    "security",
    2,
    "issue",
    f"the fleet folder: nodes/<node> swapped while a node writes its claim, status, log and run report ({TRIES} rounds)",
)
def race_fleet(tmp: Path) -> Outcome:
    return _race(
        tmp,
        _RACE_HEAD
        + """
from stackgate import dirfd
from validators.fleet.status import NodeStatus, claim_attempt, open_node_dir, write_status, NODES_DIR
job = tmp / 'job'
st = lambda i: NodeStatus(fleet_id='f1', node='n1', outcome='PASS', phase='done', exit_code=0, reasons=[f't{i}'])
write_status(job, st(0))
def one(i):
    write_status(job, st(i)); claim_attempt(job, 'n1', None, 0)
    with dirfd.opened(open_node_dir(job, 'n1')) as fd:
        dirfd.append_at(fd, 'build.log', b'x\\n', where='build.log'); dirfd.write_at(fd, 'run-1.json', b'{}')
with racing(job / NODES_DIR / 'n1', victim) as r:
    for i in range(TRIES): tried(one, i)
verdict(r, os.listdir(victim))
""",
    )


@case(
    "S2.5",
    "security",
    2,
    "issue",
    f"the static facts cache: a cache folder swapped while entries are written ({TRIES} writes)",
)
def race_facts(tmp: Path) -> Outcome:
    return _race(
        tmp,
        _RACE_HEAD
        + """
from validators.elf.file_facts_cache import CACHE_VERSION, FileFactsCache
c = FileFactsCache(tmp / 'cache'); c.put('elf', 'k0', {'x': 0})
kind = tmp / 'cache' / f'v{CACHE_VERSION}' / 'elf'
def one(i): c.put('elf', f'k{i}', {'x': i})
with racing(kind, victim) as r:
    for i in range(TRIES): tried(one, i)
verdict(r, [str(p) for p in victim.rglob('*')])
""",
    )


suite_case(
    "S2.6",
    "security",
    2,
    "issue",
    "the wheelhouse folder swapped during real downloads over HTTP (6 runs; the suite's racer)",
    "tests/builder/test_wheelhouse.py::test_a_wheelhouse_folder_swapped_for_a_symlink_mid_download_writes_nothing_there",
)


@case(
    "S2.7",
    "security",
    2,
    "variant",
    f"the record store's folder (not the file) swapped for a symlink to a victim folder during imports ({TRIES})",
)
def race_store_folder(tmp: Path) -> Outcome:
    return _race(
        tmp,
        _RACE_HEAD
        + _STORE_IMPORTS
        + """
with racing(tmp / 'store', victim) as r:
    for i in range(TRIES): tried(one, i)
verdict(r, os.listdir(victim))
""",
    )


@case(
    "S2.8",
    "security",
    2,
    "variant",
    f"records/_store-heads swapped for a symlink while `records export` writes the store's head ({TRIES})",
)
def race_heads(tmp: Path) -> Outcome:
    return _race(
        tmp,
        _RACE_HEAD
        + """
from validators.records.store import RecordStore
from validators.records.json_files import export_records
records = tmp / 'records'
with RecordStore.open(tmp / 's.sqlite') as s:
    s.add(make_record('smoke'))
    export_records(s, records)
    heads = records / '_store-heads'
    assert heads.is_dir(), list(records.iterdir())
    def one(i):
        s.add(make_record('smoke', note=f'h{i}', minute=i % 60))
        export_records(s, records)
    with racing(heads, victim) as r:
        for i in range(TRIES): tried(one, i)
verdict(r, os.listdir(victim))
""",
    )


@case(
    "S2.9",
    "security",
    2,
    "variant",
    f"the lock folder (<cache>/locks) swapped for a symlink while locks are taken ({TRIES})",
)
def race_lock_dir(tmp: Path) -> Outcome:
    return _race(
        tmp,
        _RACE_HEAD
        + """
from stackgate import waits
os.environ['STACKGATE_CACHE'] = str(tmp / 'cache')
d = waits.lock_dir()
def one(i):
    with waits.held(waits.lock_dir() / f'l{i % 7}.lock', what='race', timeout_s=1, say=lambda s: None): pass
with racing(d, victim) as r:
    for i in range(TRIES): tried(one, i)
verdict(r, os.listdir(victim))
""",
    )


# ---------------------------------------------------------------- item 3: secrets in outputs
def _compat_index(tmp: Path) -> Path:
    code = ("import sys; from pathlib import Path; from tests.helpers.compat_wheels import compat_wheels; "
            "from tests.helpers.json_index import write_index; t = Path(sys.argv[1]); "
            "write_index(t / 'served', compat_wheels(t / 'build'))")  # fmt: skip
    done = python(tmp, code, str(tmp))
    assert done.returncode == 0, done.stderr[-600:]
    return tmp / "served"


def _compat_planted(tmp: Path, plant: Callable[[str], str]) -> Outcome:
    served = _compat_index(tmp)
    code = ("import sys, subprocess, time; from pathlib import Path; "
            "from tests.helpers.json_index import serve_index\n"
            "with serve_index(Path(sys.argv[1])) as url:\n"
            "    print(url, flush=True); sys.stdin.readline()\n")  # fmt: skip
    env = dict(base_env(tmp), PYTHONPATH=str(ROOT))
    server = subprocess.Popen(
        [PY, "-c", code, str(served)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        planted = plant(url)
        html = tmp / "m.html"
        done = module(tmp, "validators", "compat", "sgl-kernel", "--versions", "==0.3.21", "--against",
                      "torch==2.9.1", "--index", planted, "--json", "--html", html)  # fmt: skip
    finally:
        server.kill()
        server.wait()
    page = html.read_text() if html.exists() else ""
    found = leaks(TELLS, [done.stdout, done.stderr, page], [tmp / "cache"])
    read = '"loads": 1' in done.stdout or '"loads":1' in done.stdout
    return Outcome(
        not found and no_traceback(done),
        f"exit {done.returncode}, index read: {read}, html: {bool(page)}, found: {found[:4]}",
    )


@case(
    "S3.1",
    "security",
    3,
    "issue",
    "compat --index http://alice:S3CRETPW@...: --json, --html page, terminal, cache grepped",
)
def compat_userinfo(tmp: Path) -> Outcome:
    return _compat_planted(tmp, lambda url: url.replace("http://", "http://alice:S3CRETPW@", 1))


@case(
    "S3.2",
    "security",
    3,
    "variant",
    "compat --index with ?private_token= and X-Amz-Credential= in its query: every output grepped",
)
def compat_query(tmp: Path) -> Outcome:
    return _compat_planted(
        tmp, lambda url: f"{url}?private_token=PRIVTOK77&X-Amz-Credential=AMZCRED42"
    )


def _lock(path: Path, url: str) -> Path:
    import hashlib

    path.write_text("\n".join([
        "version = 1", 'requires-python = "==3.12.*"', "", "[[package]]", 'name = "evil"',
        'version = "1.0"', 'source = { registry = "https://example.invalid/simple" }', "wheels = [",
        f'    {{ url = "{url}", hash = "sha256:{hashlib.sha256(b"x").hexdigest()}", size = 1 }},',
        "]", "",
    ]), encoding="utf-8")  # fmt: skip
    return path


@case(
    "S3.3",
    "security",
    3,
    "issue",
    "static --lock, a wheel URL with user info, private_token=, X-Amz-Credential/Signature= and an hf_ token: errors, --json, cache",
)
def lock_urls(tmp: Path) -> Outcome:
    url = (f"http://bob:S3CRETPW@127.0.0.1:9/evil-1.0-py3-none-any.whl?private_token=PRIVTOK77"
           f"&X-Amz-Credential=AMZCRED42&X-Amz-Signature=AMZSIG99&t={HF}")  # fmt: skip
    lock = _lock(tmp / "uv.lock", url)
    outs: list[str] = []
    codes = []
    for extra in ([], ["--json", "--allow-local-urls"]):
        done = module(tmp, "validators", "static", "--lock", lock, "--cache", tmp / "cache",
                      "--request-timeout", "2", "--deadline", "30", *extra)  # fmt: skip
        outs += [done.stdout, done.stderr]
        codes.append(done.returncode)
    found = leaks((*TELLS, "AMZSIG99"), outs, [tmp / "cache"])
    named = "127.0.0.1:9" in "".join(outs)
    return Outcome(not found and named, f"exits {codes}, URL named: {named}, found: {found[:4]}")


def _engine(tmp: Path, printed: str, needles: tuple[str, ...]) -> tuple[Outcome, list[str]]:
    code = ("import os,sys; p=os.environ['PLANT']; print(p, flush=True); "
            "print('Traceback (most recent call last):', flush=True); "
            "print('RuntimeError: ' + p, flush=True); sys.exit(1)")  # fmt: skip
    sys.path.insert(0, str(ROOT))
    from tests.serve.conftest import FAST_BENCH, write_stack

    profile = {"engine": "openai-command", "model_path": "synthetic", "command": [PY, "-c", code],
               "bench": dict(FAST_BENCH), "load_timeout_s": 60, "hang_timeout_s": 60, "stop_grace_s": 5}  # fmt: skip
    manifest = write_stack(tmp, "synthetic", {"main": profile})
    out = tmp / "out"
    env = dict(base_env(tmp), PLANT=printed)
    done = module(tmp, "validators", "serve-bench", manifest, "--profile", "main", "--json",
                  "--out-dir", out, "--env", sys.prefix, env=env)  # fmt: skip
    texts = [done.stdout, done.stderr]
    found = leaks(needles, texts, [out])
    return Outcome(
        not found and done.returncode == 1, f"exit {done.returncode}, found: {found[:6]}"
    ), texts


@case(
    "S3.4",
    "security",
    3,
    "issue",
    "an engine prints user-info URLs, X-Amz-*, an hf_ token, a bearer value, private_token=: run report (--json), terminal, kept engine log",
)
def engine_secrets(tmp: Path) -> Outcome:
    plant = (f"fetching https://alice:S3CRETPW@hub.example/m?X-Amz-Credential=AMZCRED42 with {HF} "
             "and Authorization: Bearer BEARERSECRET123 from https://git.example/api?private_token=PRIVTOK77")  # fmt: skip
    return _engine(tmp, plant, TELLS)[0]


@case(
    "S3.5",
    "security",
    3,
    "variant",
    "an engine prints its settings as SGLang does: api_key='...', --api-key VALUE, a JSON \"password\", AWS_SECRET_ACCESS_KEY=, a GitHub and an AWS key id",
)
def engine_settings(tmp: Path) -> Outcome:
    plant = ("server_args=ServerArgs(model_path='m', api_key='PLAINAPIKEY42', admin_api_key=None) "
             "argv: --api-key PLAINAPIKEY43 config {\"password\": \"PLAINPW44\"} "
             "AWS_SECRET_ACCESS_KEY=PLAINAWSSECRET45 ghp_" + "Gh7" * 12 + " AKIA" + "ABCDEFGHIJKLMNOP")  # fmt: skip
    return _engine(
        tmp,
        plant,
        (
            "PLAINAPIKEY42",
            "PLAINAPIKEY43",
            "PLAINPW44",
            "PLAINAWSSECRET45",
            "Gh7Gh7Gh7",
            "AKIAABCDEFGHIJKLMNOP",
        ),
    )[0]


def _smoke_manifest(tmp: Path, index_url: str) -> Path:
    text = (
        (ROOT / "tests/builder/data/smoke.toml")
        .read_text()
        .replace("https://pypi.org/simple", index_url)
    )
    path = tmp / "stacks" / "smoke.toml"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    return path


@case(
    "S3.6",
    "security",
    3,
    "issue",
    "the refusal line of build / wheelhouse / check / lock for an index URL with user info and private_token=",
)
def refusal_lines(tmp: Path) -> Outcome:
    manifest = _smoke_manifest(tmp, "https://u:S3CRETPW@idx.example/simple?private_token=PRIVTOK77")
    outs, codes = [], []
    argvs: tuple[list[str | Path], ...] = (
        ["check", manifest],
        ["lock", manifest],
        ["build", manifest],
        ["wheelhouse", manifest, "--to", tmp / "house"],
    )
    for argv in argvs:
        done = module(tmp, "builder", *argv)
        outs += [done.stdout, done.stderr]
        codes.append(done.returncode)
    written = [
        p for p in (tmp / "stacks").rglob("*") if p.is_file() and p.name != "smoke.toml"
    ]  # the input is not an output
    found = leaks(TELLS, outs, [tmp / "house", tmp / "state", tmp / "cache"])
    found += [
        f"{p.name}: written"
        for p in written
        if b"S3CRETPW" in p.read_bytes() or b"PRIVTOK77" in p.read_bytes()
    ]
    return Outcome(not found and all(c == 2 for c in codes), f"exits {codes}, found: {found[:4]}")


@case(
    "S3.7",
    "security",
    3,
    "variant",
    "fleet verdict: node reasons holding a credential URL, a ghp_ token, a glpat- token and an AWS key id: terminal, --json, --html",
)
def fleet_secrets(tmp: Path) -> Outcome:
    reason = (
        "pull https://bob:S3CRETPW@idx.example/simple ghp_"
        + "Gh7" * 12
        + " glpat-"
        + "GlAbC" * 5
        + " AKIAABCDEFGHIJKLMNOP"
    )
    done_texts = _fleet_verdict(tmp, reason, [[], ["--json"], ["--html", str(tmp / "v.html")]])
    tells = ("S3CRETPW", "Gh7Gh7Gh7", "GlAbCGlAbC", "AKIAABCDEFGHIJKLMNOP")
    # the job folder's files the verdict wrote (the planted status.json is the input, not an output)
    found = leaks(tells, done_texts) + [
        f"{p.name}: {t!r}"
        for p in (tmp / "job").rglob("*")
        if p.is_file() and p.name != "status.json"
        for t in tells
        if t.encode() in p.read_bytes()
    ]
    html = (tmp / "v.html").read_text() if (tmp / "v.html").exists() else ""
    found += leaks(("S3CRETPW", "Gh7Gh7Gh7"), [html])
    return Outcome(not found, f"found: {found[:4]}")


def _fleet_verdict(
    tmp: Path, reason: str, runs: list[list[str]], env_extra: dict[str, str] | None = None
) -> list[str]:
    job = tmp / "job"
    code = ("import sys; from pathlib import Path; from tests.fleet.test_verdict import _job; "
            "from validators.fleet.status import NodeStatus, write_status; p = Path(sys.argv[1]); p.mkdir(); _job(p); "
            "write_status(p, NodeStatus(fleet_id='t', node='bad1', index=18, outcome='FAIL', phase='mark-good', "
            "exit_code=1, reasons=[sys.argv[2]]))")  # fmt: skip
    made = python(tmp, code, str(job), reason)
    assert made.returncode == 0, made.stderr[-500:]
    texts = []
    for extra in runs:
        env = base_env(tmp, **(env_extra or {}))
        done = module(tmp, "validators", "fleet", "verdict", "--job-dir", job, *extra, env=env)
        texts += [done.stdout, done.stderr]
    return texts


@case(
    "S3.8",
    "security",
    3,
    "variant",
    "a record file whose note holds a credential URL and an hf_ token: records import refuses it without printing them",
)
def record_note_secret(tmp: Path) -> Outcome:
    sys.path.insert(0, str(ROOT))
    from tests.gate.record_factory import make_record

    folder = tmp / "in" / "smoke"
    folder.mkdir(parents=True)
    (folder / "r.json").write_text(
        make_record(note=f"mirror https://u:S3CRETPW@m.example/ {HF}").to_json()
    )
    done = module(
        tmp, "validators", "records", "import", "--dir", tmp / "in", "--store", tmp / "s.sqlite"
    )
    found = leaks(TELLS, [done.stdout, done.stderr], [tmp / "state"])
    return Outcome(
        done.returncode == 2 and not found,
        f"exit {done.returncode}, found: {found}; {tail(done, 140)}",
    )


# ---------------------------------------------------------------- item 5: untrusted bytes to a terminal
HOSTILE = "run 1: \x1b[2J\x1b[H\x1b]0;owned title\x07\x1b[32mFAKE-OK everything fine\x1b[0m \x9b31m\rOVERWRITE"


@case(
    "S5.1",
    "security",
    5,
    "issue",
    "fleet verdict: node reasons with clear-screen, OSC title, fake green line, C1 CSI, CR: piped, NO_COLOR, FORCE_COLOR",
)
def fleet_escapes(tmp: Path) -> Outcome:
    bad = []
    for i, env in enumerate(
        ({"NO_COLOR": "1"}, {"NO_COLOR": ""}, {"FORCE_COLOR": "1", "NO_COLOR": ""})
    ):
        sub = tmp / f"m{i}"
        sub.mkdir()
        texts = _fleet_verdict(sub, HOSTILE, [[]], env)
        bad += [
            (i, r)
            for r in ("\x1b[2J", "\x1b]0;", "\x07", "\x9b", "\x1b[32mFAKE", "\rOVER")
            if r in "".join(texts)
        ]
    return Outcome(not bad, f"raw sequences reaching the terminal: {bad!a}")


@case(
    "S5.2",
    "security",
    5,
    "variant",
    "an engine's own log lines with clear-screen / OSC title / CR reach serve-bench's terminal lines",
)
def engine_escapes(tmp: Path) -> Outcome:
    _outcome, texts = _engine(tmp, HOSTILE, ())
    raw = [r for r in ("\x1b[2J", "\x1b]0;", "\x07", "\x9b", "\rOVER") if r in texts[1]]
    shown = "\\x1b[2J" in texts[1]
    return Outcome(not raw, f"raw on stderr: {raw!a}, shown escaped: {shown}")


@case(
    "S5.3",
    "security",
    5,
    "variant",
    "static --lock: a wheel URL holding ESC / OSC / BEL, refused as a local URL; the refusal line names it",
)
def lock_url_escapes(tmp: Path) -> Outcome:
    lock = tmp / "uv.lock"
    _lock(lock, "http://127.0.0.1:9/\\u001b]0;owned\\u0007\\u001b[2Jevil-1.0-py3-none-any.whl")
    done = module(
        tmp,
        "validators",
        "static",
        "--lock",
        lock,
        "--cache",
        tmp / "cache",
        "--request-timeout",
        "2",
    )
    raw = [r for r in ("\x1b]0;", "\x07", "\x1b[2J") if r in done.stdout + done.stderr]
    return Outcome(
        not raw and no_traceback(done), f"exit {done.returncode}, raw: {raw!a}; {tail(done, 160)}"
    )


@case(
    "S5.4",
    "security",
    5,
    "variant",
    "a record whose note holds escape sequences: records import, then records list / show on a terminal",
)
def record_note_escapes(tmp: Path) -> Outcome:
    sys.path.insert(0, str(ROOT))
    from tests.gate.record_factory import make_record

    rec = make_record(note="ok \x1b[2J\x1b]0;owned\x07\x9b31m fake")
    folder = tmp / "in" / "smoke"
    folder.mkdir(parents=True)
    (folder / "r.json").write_text(rec.to_json())
    store = tmp / "s.sqlite"
    texts, codes = [], []
    for argv in (
        ["import", "--dir", tmp / "in"],
        ["list"],
        ["show", rec.record_id[:12]],
        ["show", "smoke"],
    ):
        done = module(tmp, "validators", "records", *argv, "--store", store)
        texts += [done.stdout, done.stderr]
        codes.append(done.returncode)
    raw = [r for r in ("\x1b[2J", "\x1b]0;", "\x07", "\x9b") if r in "".join(texts)]
    return Outcome(not raw, f"exits {codes}, raw: {raw!a}")


@case(
    "S5.5",
    "security",
    5,
    "variant",
    "fleet verdict: node reasons with Unicode bidi overrides (U+202E, U+2066) that reorder what the operator reads",
)
def fleet_bidi(tmp: Path) -> Outcome:
    texts = _fleet_verdict(tmp, "run 1: \u202eKO SSAP\u202c \u2066hidden\u2069", [[]])
    raw = [
        f"U+{ord(c):04X}" for c in ("\u202e", "\u2066", "\u2069", "\u202c") if c in "".join(texts)
    ]
    return Outcome(not raw, f"raw bidi controls printed: {raw}")


# ---------------------------------------------------------------- item 6: denial by a shared file
_HOLD = ("import sys, time; from pathlib import Path; from stackgate import waits\n"
         "with waits.held(Path(sys.argv[1]), what='holder', timeout_s=5, say=print):\n"
         "    print('held', flush=True); time.sleep(60)\n")  # fmt: skip


@case(
    "S6.1",
    "security",
    6,
    "issue",
    "`stackgate lock`'s lock held by another process: where it lives, and the wait bounded and said (holder's pid)",
)
def lock_held(tmp: Path) -> Outcome:
    code = """
import os, stat, sys, time, subprocess
from pathlib import Path
from builder.lock import resolve
from stackgate import waits
from stackgate.errors import EnvironmentProblem
from stackgate.layout import LockFiles
resolve.LOCK_WAIT_S = 1.0
said = []
resolve.lines_err = lambda: type('L', (), {'plain': said.append})()
files = LockFiles(Path(sys.argv[1]) / 'locks' / 'smoke'); files.folder.mkdir(parents=True)
with resolve._locking(files): pass
(path,) = list(waits.lock_dir().glob('lock-*.lock'))
info = path.parent.stat()
print('where', path, oct(stat.S_IMODE(info.st_mode)), info.st_uid == os.geteuid())
h = subprocess.Popen([sys.executable, '-c', sys.argv[2], str(path)], stdout=subprocess.PIPE, text=True)
assert h.stdout.readline().strip() == 'held'
t = time.monotonic()
try:
    with resolve._locking(files): print('TAKEN while held')
except EnvironmentProblem as e:
    print('gave up after %.1f s:' % (time.monotonic() - t), e.message, '| said:', said[:1])
h.kill(); h.wait()
"""
    done = python(tmp, code, str(tmp), _HOLD)
    out = done.stdout
    ok = ("/tmp/stackgate-lock" not in out and "0o700 True" in out and "gave up after" in out
          and "held by pid" in out and "said: ['" in out)  # fmt: skip
    return Outcome(ok, ascii(" ".join(out.split())[-300:]))


@case(
    "S6.2",
    "security",
    6,
    "variant",
    "the lock folder made world-writable by someone, then swapped for a symlink; a lock file planted as a symlink to a victim file",
)
def lock_dir_plants(tmp: Path) -> Outcome:
    code = """
import os, stat, sys
from pathlib import Path
from stackgate import waits
from stackgate.errors import StackgateError
tmp = Path(sys.argv[1]); os.environ['STACKGATE_CACHE'] = str(tmp / 'cache')
d = waits.lock_dir(); os.chmod(d, 0o777); waits.lock_dir()
print('tightened', not d.stat().st_mode & 0o022)
victim = tmp / 'victim'; victim.write_text('victim')
(d / 'x.lock').symlink_to(victim)
try:
    with waits.held(d / 'x.lock', what='x', timeout_s=1, say=print): print('opened through link')
except StackgateError as e: print('refused link:', e.message[:80])
print('victim intact', victim.read_text() == 'victim', oct(stat.S_IMODE(victim.stat().st_mode)))
d.rename(tmp / 'elsewhere'); d.symlink_to(tmp / 'elsewhere')
try: waits.lock_dir(); print('followed folder link')
except StackgateError as e: print('refused folder link')
"""
    done = python(tmp, code, str(tmp))
    out = done.stdout
    ok = (
        "tightened True" in out
        and "refused link" in out
        and "victim intact True" in out
        and "refused folder link" in out
    )
    return Outcome(
        ok, ascii(" ".join(out.split())[-300:]) + (tail(done, 100) if done.returncode else "")
    )


@case(
    "S6.3",
    "security",
    6,
    "variant",
    "the record store held by another writer (an open SQLite write transaction): records import is bounded and says what it waits for",
)
def store_held(tmp: Path) -> Outcome:
    sys.path.insert(0, str(ROOT))
    from tests.gate.record_factory import make_record

    store = tmp / "s.sqlite"
    folder = tmp / "in" / "smoke"
    folder.mkdir(parents=True)
    (folder / "a.json").write_text(make_record(minute=1).to_json())
    first = module(tmp, "validators", "records", "import", "--dir", tmp / "in", "--store", store)
    assert first.returncode == 0, first.stderr
    (folder / "b.json").write_text(make_record(minute=2).to_json())
    hold = ("import sqlite3, sys, time; c = sqlite3.connect(sys.argv[1], isolation_level=None); "
            "c.execute('BEGIN EXCLUSIVE'); print('held', flush=True); time.sleep(600)")  # fmt: skip
    holder = subprocess.Popen([PY, "-c", hold, str(store)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        try:
            done = module(
                tmp,
                "validators",
                "records",
                "import",
                "--dir",
                tmp / "in",
                "--store",
                store,
                timeout=240,
            )
        except subprocess.TimeoutExpired:
            return Outcome(False, "still waiting after 240 s")
    finally:
        holder.kill()
        holder.wait()
    said = "waiting for the record store" in done.stderr
    return Outcome(
        done.returncode == 3 and said and no_traceback(done),
        f"exit {done.returncode}, said while waiting: {said}: {tail(done, 200)}",
    )


# ---------------------------------------------------------------- item 7: SSRF and reads through links
class _Counter(BaseHTTPRequestHandler):
    hits: list[str] = []
    redirect_to: str | None = None

    def do_GET(self) -> None:
        type(self).hits.append(self.path)
        if self.redirect_to:
            self.send_response(302)
            self.send_header("Location", self.redirect_to)
            self.end_headers()
            return
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def _server(
    host: str, redirect_to: str | None = None
) -> tuple[ThreadingHTTPServer, type[_Counter]]:
    handler = type("H", (_Counter,), {"hits": [], "redirect_to": redirect_to})
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    cls = type("S", (ThreadingHTTPServer,), {"address_family": family})
    server = cls((host, 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, handler


def _lock_fetch(tmp: Path, url: str) -> subprocess.CompletedProcess[str]:
    lock = _lock(tmp / "uv.lock", url)
    return module(tmp, "validators", "static", "--lock", lock, "--cache", tmp / "cache",
                  "--request-timeout", "2", "--deadline", "20")  # fmt: skip


@case(
    "S7.1",
    "security",
    7,
    "issue",
    "static --lock with no stack: a wheel URL at a loopback admin endpoint (a real server counts requests)",
)
def ssrf_loopback(tmp: Path) -> Outcome:
    server, h = _server("127.0.0.1")
    try:
        done = _lock_fetch(
            tmp, f"http://127.0.0.1:{server.server_port}/admin/evil-1.0-py3-none-any.whl"
        )
    finally:
        server.shutdown()
    return Outcome(
        done.returncode == 2 and not h.hits,
        f"exit {done.returncode}, requests {h.hits}; {tail(done, 120)}",
    )


@case(
    "S7.2",
    "security",
    7,
    "variant",
    "loopback written other ways: decimal 2130706433, hex 0x7f000001, short 127.1, 127.0.0.2 (a real server on 127.0.0.1 counts)",
)
def ssrf_loopback_forms(tmp: Path) -> Outcome:
    server, h = _server("0.0.0.0")
    seen, ok = [], True
    try:
        for host in ("2130706433", "0x7f000001", "127.1", "127.0.0.2"):
            sub = tmp / host
            sub.mkdir()
            before = len(h.hits)
            done = _lock_fetch(sub, f"http://{host}:{server.server_port}/evil-1.0-py3-none-any.whl")
            hit = len(h.hits) > before
            ok &= done.returncode == 2 and not hit
            seen.append(f"{host}: exit {done.returncode}, reached {hit}")
    finally:
        server.shutdown()
    return Outcome(ok, "; ".join(seen))


def _own_address() -> str | None:
    try:
        out = subprocess.run(
            ["hostname", "-I"], capture_output=True, text=True, check=False
        ).stdout.split()
    except OSError:
        return None
    return next((a for a in out if "." in a and not a.startswith("127.")), None)


@case(
    "S7.3",
    "security",
    7,
    "variant",
    "this host's own non-loopback address (a service bound to 0.0.0.0 is reached through it)",
)
def ssrf_own_address(tmp: Path) -> Outcome:
    own = _own_address()
    if own is None:
        return Outcome(False, "no non-loopback address here: not measured")
    server, h = _server("0.0.0.0")
    try:
        done = _lock_fetch(
            tmp, f"http://{own}:{server.server_port}/admin/evil-1.0-py3-none-any.whl"
        )
    finally:
        server.shutdown()
    return Outcome(
        not h.hits, f"{own}: exit {done.returncode}, requests {h.hits}; {tail(done, 120)}"
    )


@case(
    "S7.4",
    "security",
    7,
    "variant",
    "a redirect: an allowed URL (a name of no address, through HTTP_PROXY) answers 302 to a loopback admin endpoint; and the same from this host's own address",
)
def ssrf_redirect(tmp: Path) -> Outcome:
    target, th = _server("127.0.0.1")
    admin = f"http://127.0.0.1:{target.server_port}/admin/evil-1.0-py3-none-any.whl"
    # A forward proxy on loopback stands for an allowed mirror: it answers the lock's URL
    # (mirror.invalid, which the URL rule cannot refuse) with 302 to the admin endpoint; a
    # request that follows the redirect is sent through the proxy too, so the proxy's log
    # shows it (the target's own counter: a request sent directly).
    proxy, ph = _server("127.0.0.1", redirect_to=admin)
    seen: list[str] = []
    try:
        lock = _lock(tmp / "uv.lock", "http://mirror.invalid/evil-1.0-py3-none-any.whl")
        env = dict(base_env(tmp), HTTP_PROXY=f"http://127.0.0.1:{proxy.server_port}")
        done = module(tmp, "validators", "static", "--lock", lock, "--cache", tmp / "cache",
                      "--request-timeout", "2", "--deadline", "20", env=env)  # fmt: skip
        followed = [h for h in ph.hits if "/admin/" in h] + th.hits
        seen.append(f"via proxy: asked {ph.hits}, exit {done.returncode}")
        own = _own_address()
        if own is not None:
            front, fh = _server(own, redirect_to=admin)
            try:
                sub = tmp / "own"
                sub.mkdir()
                again = _lock_fetch(
                    sub, f"http://{own}:{front.server_port}/evil-1.0-py3-none-any.whl"
                )
            finally:
                front.shutdown()
            followed += th.hits[len(followed) :]
            seen.append(f"own address {own}: front got {fh.hits}, exit {again.returncode}")
    finally:
        target.shutdown()
        proxy.shutdown()
    return Outcome(
        not followed and not th.hits,
        f"loopback target reached {followed + th.hits}; {'; '.join(seen)}; {tail(done, 100)}",
    )


@case(
    "S7.5",
    "security",
    7,
    "variant",
    "metadata services by other names: AWS IPv6 fd00:ec2::254, metadata.google.internal, 169.254.170.2 (ECS), [fe80::1]",
)
def ssrf_metadata(tmp: Path) -> Outcome:
    seen: list[str] = []
    ok = True
    for url in ("http://[fd00:ec2::254]/latest/meta-data/evil-1.0-py3-none-any.whl",
                "http://metadata.google.internal/computeMetadata/evil-1.0-py3-none-any.whl",
                "http://169.254.170.2/v2/credentials/evil-1.0-py3-none-any.whl",
                "http://[fe80::1]/evil-1.0-py3-none-any.whl"):  # fmt: skip
        sub = tmp / str(len(seen))
        sub.mkdir()
        done = _lock_fetch(sub, url)
        refused = done.returncode == 2 and "refusing to fetch" in done.stderr
        ok &= refused
        seen.append(
            f"{url.split('/')[2]}: exit {done.returncode}{' refused' if refused else ' FETCH TRIED'}"
        )
    return Outcome(ok, "; ".join(seen))


def _secret(tmp: Path) -> Path:
    secret = tmp / "shadow"
    secret.write_text(SECRET_FILE_TEXT)
    return secret


@case(
    "S7.6",
    "security",
    7,
    "issue",
    "records import --dir: an entry that is a symlink to /etc/shadow (the real one) and to a stand-in",
)
def records_symlink(tmp: Path) -> Outcome:
    folder = tmp / "records" / "smoke"
    folder.mkdir(parents=True)
    (folder / "shadow.json").symlink_to("/etc/shadow")
    (folder / "standin.json").symlink_to(_secret(tmp))
    done = module(
        tmp,
        "validators",
        "records",
        "import",
        "--dir",
        tmp / "records",
        "--store",
        tmp / "s.sqlite",
    )
    shadow_first = (
        Path("/etc/shadow").read_text().split(":", 2)[:2]
        if Path("/etc/shadow").exists()
        else ["root"]
    )
    found = leaks(
        (
            "PLANTEDSHADOWHASH",
            *(shadow_first[1:] if len(shadow_first) > 1 and len(shadow_first[1]) > 3 else []),
        ),
        [done.stdout, done.stderr],
    )
    return Outcome(
        done.returncode == 2 and "symlink" in done.stderr and not found,
        f"exit {done.returncode}, found {found}; {tail(done, 140)}",
    )


@case(
    "S7.7",
    "security",
    7,
    "issue",
    "the fleet folder: nodes/<node>/status.json a symlink to /etc/shadow's stand-in, and a node folder linked elsewhere; fleet verdict",
)
def fleet_symlink(tmp: Path) -> Outcome:
    job, status = fleet_job(tmp)
    status.symlink_to(_secret(tmp))
    texts = []
    for extra in ([], ["--json"]):
        done = module(tmp, "validators", "fleet", "verdict", "--job-dir", job, *extra)
        texts += [done.stdout, done.stderr]
    found = leaks(("PLANTEDSHADOWHASH",), texts)
    named = "symlink" in "".join(texts)
    return Outcome(
        not found and named, f"exit {done.returncode}, link named: {named}, found {found}"
    )


@case(
    "S7.8",
    "security",
    7,
    "variant",
    "records import --dir: a hard link to the secret (a regular file: it is read) - do its bytes reach an error message?",
)
def records_hardlink(tmp: Path) -> Outcome:
    folder = tmp / "records" / "smoke"
    folder.mkdir(parents=True)
    os.link(_secret(tmp), folder / "x.json")
    done = module(
        tmp,
        "validators",
        "records",
        "import",
        "--dir",
        tmp / "records",
        "--store",
        tmp / "s.sqlite",
    )
    found = leaks(("PLANTEDSHADOWHASH", "19000:0:99999"), [done.stdout, done.stderr])
    return Outcome(
        done.returncode == 2 and not found,
        f"exit {done.returncode}, found {found}; {tail(done, 140)}",
    )


@case(
    "S7.9",
    "security",
    7,
    "variant",
    "records verify --dir and a gate's committed read: a records/<stack> entry linked to the secret",
)
def committed_symlink(tmp: Path) -> Outcome:
    folder, cand, env = committed_records(tmp)
    (folder / "zz-link.json").symlink_to(_secret(tmp))
    a = module(
        tmp,
        "validators",
        "records",
        "verify",
        "--dir",
        tmp / "records",
        "--store",
        tmp / "s.sqlite",
        env=env,
    )
    b = module(
        tmp, "validators", "gate", cand, "--baseline", "smoke", "--store", tmp / "s.sqlite", env=env
    )
    found = leaks(("PLANTEDSHADOWHASH",), [a.stdout, a.stderr, b.stdout, b.stderr])
    return Outcome(
        not found and a.returncode != 0 and no_traceback(b),
        f"verify exit {a.returncode}, gate exit {b.returncode}; found {found}; {tail(b, 120)}",
    )


@case(
    "S7.10",
    "security",
    7,
    "variant",
    "the fleet folder: status.json a FIFO nobody writes (a read would block forever)",
)
def fleet_fifo(tmp: Path) -> Outcome:
    job, status = fleet_job(tmp)
    os.mkfifo(status)
    try:
        done = module(tmp, "validators", "fleet", "verdict", "--job-dir", job, timeout=60)
    except subprocess.TimeoutExpired:
        return Outcome(False, "hung 60 s on the FIFO")
    return Outcome(
        no_traceback(done) and done.returncode in (1, 2),
        f"exit {done.returncode}; {tail(done, 120)}",
    )
