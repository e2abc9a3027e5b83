"""Issue 23 section 2: the wheels and servers the pre-install verdict reads by byte ranges are
hostile. Crafted zips (written byte by byte), and a real HTTP server on 127.0.0.1 that floods,
drips, lies about ranges or ignores them. Every case ends as a result naming the wheel and the
bound it broke (exit 2 for a wheel that is not a wheel, 3 for a server that misbehaves), never
a traceback, and in bounded time.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from stackgate.bounded_http import Limits
from stackgate.lock.wheels import read_lock
from tests.helpers.hostile import (
    RawMember,
    crafted_wheel,
    deflated,
    deflated_member,
    hostile_server,
    raw_zip,
    stored_member,
)
from tests.helpers.range_server import running
from validators.core.results import Result
from validators.elf.facts_cache import FactsCache
from validators.lockcheck.check import LockInputs, run_lock_check

ROOT = Path(__file__).resolve().parents[2]
QUICK = Limits(request_s=2.0, min_rate=1 << 20, total_s=30.0)
HANG_GUARD_S = 120  # a run that has not ended by then hangs: the bug this file is about


def _record(members: dict[str, bytes]) -> bytes:
    import base64

    lines = []
    for name, data in members.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        lines.append(f"{name},sha256={digest},{len(data)}")
    lines.append("evil-1.0.dist-info/RECORD,,")
    return ("\n".join(lines) + "\n").encode()


LIB = b"\x7fELF" + b"\x02\x01\x01" + b"\0" * 2000  # a truncated ELF: judged unreadable
META = b"Metadata-Version: 2.1\nName: evil\nVersion: 1.0\n"


def members(**over: RawMember) -> list[RawMember]:
    """The wheel's entries, each replaceable by a crafted one (keys: lib, meta, record)."""
    record = _record({"evil/lib.so": LIB, "evil-1.0.dist-info/METADATA": META})
    base = {
        "lib": deflated_member("evil/lib.so", LIB),
        "meta": deflated_member("evil-1.0.dist-info/METADATA", META),
        "record": deflated_member("evil-1.0.dist-info/RECORD", record),
    }
    base.update(over)
    return list(base.values())


def honest() -> bytes:
    return raw_zip(members())


def _bad_name() -> list[RawMember]:
    bad = deflated_member("evil/lib.so", LIB)
    bad.name = b"evil/\xff\xfe.so"
    return members(lib=bad)


def _zip64_cut() -> list[RawMember]:
    lib = deflated_member("evil/lib.so", LIB, size=0xFFFFFFFF)
    lib.extra = struct.pack("<HH", 1, 4) + b"\0\0\0\0"  # a ZIP64 field too short for a size
    return members(lib=lib)


def _cd_into_comment() -> bytes:
    body = raw_zip(members(), comment=b"C" * 200)
    return raw_zip(members(), comment=b"C" * 200, cd_offset=len(body) - 100)


CRAFTED = {
    "cd-offset-into-the-comment": _cd_into_comment,
    "cd-past-the-end": lambda: raw_zip(members(), cd_offset=10**9),
    "bad-utf8-name": lambda: raw_zip(_bad_name()),
    "compression-method-14": lambda: raw_zip(
        members(lib=RawMember(b"evil/lib.so", deflated(LIB), method=14, crc32=0, size=len(LIB)))
    ),
    "bad-local-header": lambda: raw_zip(
        members(lib=deflated_member("evil/lib.so", LIB, local_signature=b"XXXX"))
    ),
    "truncated-zip64-extra": lambda: raw_zip(_zip64_cut()),
    "entry-count-65534": lambda: raw_zip(members(), count=65534),
    "record-inflates-to-40-MiB": lambda: raw_zip(
        members(record=deflated_member("evil-1.0.dist-info/RECORD", b"\n" * (40 << 20)))
    ),
    "member-claims-4-GiB-from-30-bytes": lambda: raw_zip(
        members(lib=deflated_member("evil/lib.so", LIB, size=0xFFFFFFF0))
    ),
    "record-field-past-csv-limit": lambda: raw_zip(
        members(record=deflated_member("evil-1.0.dist-info/RECORD", b"x" * 300_000 + b",a\n"))
    ),
    "cubin-inflating-1000-to-1": lambda: raw_zip(
        [*members(), deflated_member("evil/kernels/k.cubin", b"\0" * (300 << 20))]
    ),
    "20001-shared-objects": lambda: raw_zip(
        [*members(), *(stored_member(f"evil/m{i}.so", b"") for i in range(20_001))]
    ),
    "stored-member-data-past-the-end": lambda: raw_zip(
        members(lib=stored_member("evil/lib.so", LIB, csize=len(LIB) + 10**6))
    ),
}


def write_lock(path: Path, url: str, wheel: bytes, *, sha256: str | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    digest = sha256 or hashlib.sha256(wheel).hexdigest()
    path.write_text(
        "\n".join(
            [
                "version = 1",
                'requires-python = "==3.12.*"',
                "",
                "[[package]]",
                'name = "evil"',
                'version = "1.0"',
                'source = { registry = "https://example.invalid/simple" }',
                "wheels = [",
                f'    {{ url = "{url}", hash = "sha256:{digest}", size = {len(wheel)} }},',
                "]",
                "",
            ]
        ),
        encoding="utf-8",
    )
    return path


def run_check(lock: Path, cache: Path) -> dict[str, Result]:
    inputs = LockInputs(
        lock=lock, wheels=read_lock(lock), cache=FactsCache(cache), jobs=2, limits=QUICK
    )
    with ThreadPoolExecutor(1) as pool:  # a hang fails the test instead of stalling the suite
        results, _ = pool.submit(run_lock_check, inputs).result(timeout=HANG_GUARD_S)
    return {r.check: r for r in results}


@pytest.mark.parametrize("attack", sorted(CRAFTED))
def test_crafted_wheel_is_refused_naming_it(attack: str, tmp_path: Path) -> None:
    wheel = crafted_wheel(tmp_path / "served", "evil", "1.0", CRAFTED[attack]())
    with hostile_server(tmp_path / "served") as server:
        lock = write_lock(tmp_path / "uv.lock", server.base + wheel.name, wheel.read_bytes())
        results = run_check(lock, tmp_path / "cache")
    bad = results.get("static.lock.wheels")
    assert bad is not None and bad.status == "ERROR", {k: r.reason for k, r in results.items()}
    assert wheel.name in bad.reason
    # nothing of a wheel that failed is cached but what its bytes proved: the facts of a
    # member read whole whose sha256 is its RECORD line's
    cached = {p.name.removesuffix(".json.gz") for p in (tmp_path / "cache").rglob("*.json.gz")}
    assert cached <= {hashlib.sha256(LIB).hexdigest()}, cached


def test_member_inflating_past_its_entry_is_stopped_there(tmp_path: Path) -> None:
    """8 MiB of zeros behind an entry that says 4 KiB: inflation stops at 4 KiB + 1 and the
    member fails integrity (a member that does not match its zip entry, as a CRC mismatch)."""
    lib = deflated_member("evil/lib.so", b"\0" * (8 << 20), size=4096)
    wheel = crafted_wheel(tmp_path / "served", "evil", "1.0", raw_zip(members(lib=lib)))
    with hostile_server(tmp_path / "served") as server:
        lock = write_lock(tmp_path / "uv.lock", server.base + wheel.name, wheel.read_bytes())
        results = run_check(lock, tmp_path / "cache")
    integrity = results["static.lock.integrity"]
    assert integrity.status == "FAIL"
    assert "evil/lib.so: inflates past the 4096 bytes its zip entry declares" in integrity.reason
    assert not list((tmp_path / "cache").rglob("*.json.gz"))


def test_the_honest_wheel_of_these_tests_is_read(tmp_path: Path) -> None:
    """The crafted cases differ from this one only where they say."""
    wheel = crafted_wheel(tmp_path / "served", "evil", "1.0", honest())
    with hostile_server(tmp_path / "served") as server:
        lock = write_lock(tmp_path / "uv.lock", server.base + wheel.name, wheel.read_bytes())
        results = run_check(lock, tmp_path / "cache")
    assert "static.lock.wheels" not in results
    assert results["static.lock.fetch"].status == "PASS", results["static.lock.fetch"].reason


SERVERS = {
    "flood": "announces 1073741824 bytes",
    "flood-unannounced": "runs past",
    "drip": "deadline",
    "drip-headers": "deadline",
    "overlong": "announces",
    "wrong-range": "Content-Range",
}


@pytest.mark.parametrize("mode", sorted(SERVERS))
def test_misbehaving_server_is_cut_off_naming_the_bound(mode: str, tmp_path: Path) -> None:
    wheel = crafted_wheel(tmp_path / "served", "evil", "1.0", honest())
    with hostile_server(tmp_path / "served", mode) as server:
        server.drip_s = 0.5
        lock = write_lock(tmp_path / "uv.lock", server.base + wheel.name, wheel.read_bytes())
        results = run_check(lock, tmp_path / "cache")
    fetch = results["static.lock.fetch"]
    assert fetch.status == "ERROR", fetch.reason
    assert wheel.name in fetch.reason and SERVERS[mode] in fetch.reason, fetch.reason
    assert not list((tmp_path / "cache").rglob("*.json.gz"))


def test_the_verdict_has_one_deadline_for_all_requests(tmp_path: Path) -> None:
    """Each request within its own bound, but many of them: the verdict's deadline ends it."""
    wheel = crafted_wheel(tmp_path / "served", "evil", "1.0", honest())
    with hostile_server(tmp_path / "served", "drip") as server:
        server.drip_s = 0.2
        lock = write_lock(tmp_path / "uv.lock", server.base + wheel.name, wheel.read_bytes())
        inputs = LockInputs(
            lock=lock,
            wheels=read_lock(lock),
            cache=FactsCache(tmp_path / "cache"),
            jobs=1,
            limits=Limits(request_s=600.0, total_s=1.5),
        )
        with ThreadPoolExecutor(1) as pool:
            results, _ = pool.submit(run_lock_check, inputs).result(timeout=HANG_GUARD_S)
    fetch = {r.check: r for r in results}["static.lock.fetch"]
    assert fetch.status == "ERROR"
    assert "the pre-install verdict passed its 1.5 s deadline" in fetch.reason, fetch.reason


def _cli(
    lock: Path, cache: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "validators",
            "static",
            "--lock",
            str(lock),
            "--cache",
            str(cache),
            "--request-timeout",
            "2",
            "--deadline",
            "30",
            "--allow-local-urls",  # the hostile servers listen on 127.0.0.1
        ],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        cwd=ROOT,
        env=env,
    )


def test_cli_exit_codes_crafted_wheel_2_flooding_server_3(tmp_path: Path) -> None:
    bad = crafted_wheel(tmp_path / "bad", "evil", "1.0", CRAFTED["compression-method-14"]())
    good = crafted_wheel(tmp_path / "good", "evil", "1.0", honest())
    with (
        hostile_server(tmp_path / "bad") as crafted,
        hostile_server(tmp_path / "good", "flood") as flood,
    ):
        first = _cli(
            write_lock(tmp_path / "a" / "uv.lock", crafted.base + bad.name, bad.read_bytes()),
            tmp_path / "c",
        )
        second = _cli(
            write_lock(tmp_path / "b" / "uv.lock", flood.base + good.name, good.read_bytes()),
            tmp_path / "c",
        )
    assert first.returncode == 2, first.stdout + first.stderr
    assert "Traceback" not in first.stderr and bad.name in first.stdout + first.stderr
    assert "compression method 14" in first.stdout + first.stderr
    assert second.returncode == 3, second.stdout + second.stderr
    assert "Traceback" not in second.stderr and "1073741824" in second.stdout + second.stderr


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_cli_refuses_a_deadline_that_bounds_nothing(value: str, tmp_path: Path) -> None:
    lock = write_lock(tmp_path / "uv.lock", "http://127.0.0.1:9/x.whl", honest())
    done = subprocess.run(
        [sys.executable, "-m", "validators", "static", "--lock", str(lock), "--deadline", value],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        cwd=ROOT,
    )
    assert done.returncode == 2, done.stderr
    assert "--deadline" in done.stderr and "Traceback" not in done.stderr


class _Proxy(BaseHTTPRequestHandler):
    """A forward proxy on 127.0.0.1 (absolute-URI GETs relayed with urllib), or one that sends
    its status line and then nothing (`server.stall`)."""

    server: _ProxyServer

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.server.seen.append(self.path)
        if self.server.stall:
            with contextlib.suppress(OSError):
                self.wfile.write(b"HTTP/1.1 206 Partial Content\r\n")
                self.wfile.flush()
                time.sleep(30)
            return
        headers = {
            k: v for k, v in self.headers.items() if k.lower() in ("range", "accept-encoding")
        }
        request = urllib.request.Request(self.path, headers=headers)
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(request, timeout=30) as upstream:
                status, body, got = upstream.status, upstream.read(), upstream.headers
        except urllib.error.HTTPError as exc:
            status, body, got = exc.code, exc.read(), exc.headers
        self.send_response(status)
        for key in ("Content-Range", "Content-Type"):
            if got.get(key):
                self.send_header(key, got[key])
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


class _ProxyServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, stall: bool) -> None:
        super().__init__(("127.0.0.1", 0), _Proxy)
        self.stall = stall
        self.seen: list[str] = []


@pytest.mark.parametrize("stall", [False, True])
def test_environment_proxy_is_used_and_bounded_too(stall: bool, tmp_path: Path) -> None:
    """HTTP_PROXY is honoured (as uv and curl do) through the same deadline: a proxy that
    stalls after its status line is cut off like a server."""
    wheel = crafted_wheel(tmp_path / "served", "evil", "1.0", honest())
    proxy = _ProxyServer(stall)
    with running(proxy), hostile_server(tmp_path / "served") as server:
        lock = write_lock(tmp_path / "uv.lock", server.base + wheel.name, wheel.read_bytes())
        env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
        env["HTTP_PROXY"] = f"http://127.0.0.1:{proxy.server_port}"
        done = _cli(lock, tmp_path / "c", env)
    assert proxy.seen and all(p.startswith(server.base) for p in proxy.seen), proxy.seen
    assert "Traceback" not in done.stderr
    if stall:
        assert done.returncode == 3, done.stdout + done.stderr
        assert "deadline" in done.stdout + done.stderr
    else:
        assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://127.0.0.1:{port}/admin/evil-1.0-py3-none-any.whl", "is a loopback address"),
        ("http://[::1]:{port}/evil-1.0-py3-none-any.whl", "is a loopback address"),
        ("http://localhost:{port}/evil-1.0-py3-none-any.whl", "names this host"),
        ("http://169.254.169.254/latest/meta-data/evil-1.0-py3-none-any.whl", "link-local"),
        ("http://[::ffff:127.0.0.1]:{port}/evil-1.0-py3-none-any.whl", "is a loopback address"),
        ("http://0.0.0.0:{port}/evil-1.0-py3-none-any.whl", "the unspecified address"),
        ("file:///etc/evil-1.0-py3-none-any.whl", "a file: URL"),
        ("http://[fd00:ec2::254]/latest/meta-data/evil-1.0-py3-none-any.whl", "metadata"),
    ],
    ids=["v4", "v6", "localhost", "metadata", "v4-mapped", "unspecified", "file", "aws-v6"],
)
def test_a_lock_without_a_stack_never_fetches_from_this_host(
    tmp_path: Path, url: str, why: str
) -> None:
    """SSRF: an untrusted lock with no stack pointing at this host's own services. A real
    server on 127.0.0.1 counts the requests it gets: none, and exit 2 naming the URL; the
    same lock with --allow-local-urls does reach it (control)."""
    with hostile_server(tmp_path) as server:
        port = str(server.server_port)
        lock = write_lock(tmp_path / "uv.lock", url.format(port=port), honest())
        argv = [sys.executable, "-m", "validators", "static", "--lock", str(lock), "--cache",
                str(tmp_path / "cache"), "--request-timeout", "2", "--deadline", "30"]  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, timeout=HANG_GUARD_S, cwd=ROOT)
        assert done.returncode == 2, done.stdout + done.stderr
        assert "lead to this host; refusing to fetch them" in done.stderr and why in done.stderr
        assert "Traceback" not in done.stderr and server.requests == []
        if url.startswith("http://127.0.0.1"):  # control: allowed, the server is reached
            allowed = subprocess.run([*argv, "--allow-local-urls"], capture_output=True,
                                     text=True, timeout=HANG_GUARD_S, cwd=ROOT)  # fmt: skip
            assert "refusing to fetch" not in allowed.stderr and server.requests != []
