"""The static verdict before install, against real wheels served over real HTTP on 127.0.0.1.

The wheels hold real ELF objects built here with gcc/g++: a "torch" whose libc10_cuda.so
changed two signatures between 2.9.1 and 2.10.0 (as c10 did), an "sgl-kernel" extension
linked against the 2.9.1 one, and a library with 6 MiB of incompressible data so that it is
read in part (prefix + decoded tail) rather than whole.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from stackgate.lock.wheel_listing import origin_key
from stackgate.lock.wheels import read_lock
from tests.helpers.range_server import serve
from tests.helpers.wheels import make_wheel
from tests.validators import elf_env
from validators.core.results import Result
from validators.elf.elf_symbols import read_elf
from validators.elf.facts_cache import FactsCache
from validators.lockcheck.check import LockInputs, run_lock_check

pytestmark = pytest.mark.skipif(not elf_env.have_compilers(), reason="needs gcc and g++")

TAG_TORCH = "cp312-cp312-manylinux_2_28_x86_64"
TAG_KERNEL = "cp310-abi3-manylinux2014_x86_64"
BIG_C = """
__asm__(".section .rodata\\n.globl big_blob\\nbig_blob:\\n.incbin \\"BLOB\\"\\n.previous");
extern const char big_blob[];
const char *big_data(void) { return big_blob; }
"""


@dataclass(frozen=True)
class Built:
    root: Path  # served folder
    wheels: dict[str, Path]
    big_lib: Path  # the library that is read in part, as built


def _so(path: Path) -> bytes:
    return path.read_bytes()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    tmp = tmp_path_factory.mktemp("lockcheck")
    build = tmp / "build"
    old = elf_env.gxx(
        build / "old" / "libc10_cuda.so", elf_env.CORE_OLD_CPP, "-Wl,-soname,libc10_cuda.so"
    )
    new = elf_env.gxx(
        build / "new" / "libc10_cuda.so", elf_env.CORE_NEW_CPP, "-Wl,-soname,libc10_cuda.so"
    )
    kernel = elf_env.gxx(
        build / "kernel" / "common_ops.abi3.so",
        elf_env.KERNEL_CPP,
        f"-L{old.parent}",
        "-l:libc10_cuda.so",
    )
    blob = build / "blob.bin"
    blob.write_bytes(os.urandom(6 << 20))
    big = elf_env.gcc(
        build / "big" / "libbig.so", BIG_C.replace("BLOB", str(blob)), "-Wl,-soname,libbig.so"
    )
    root = tmp / "served"
    wheels = {
        "torch-2.9.1": make_wheel(
            root,
            "torch",
            "2.9.1",
            files={"torch/lib/libc10_cuda.so": _so(old), "torch/lib/libbig.so": _so(big)},
            tag=TAG_TORCH,
            deflate=True,
        ),
        "torch-2.10.0": make_wheel(
            root,
            "torch",
            "2.10.0",
            files={"torch/lib/libc10_cuda.so": _so(new), "torch/lib/libbig.so": _so(big)},
            tag=TAG_TORCH,
            deflate=True,
        ),
        "sgl-kernel": make_wheel(
            root,
            "sgl-kernel",
            "0.3.21",
            files={"sgl_kernel/sm100/common_ops.abi3.so": _so(kernel)},
            tag=TAG_KERNEL,
            deflate=True,
        ),
    }
    return Built(root, wheels, big)


def write_lock(path: Path, base_url: str, wheels: list[Path]) -> Path:
    lines = ["version = 1", 'requires-python = "==3.12.*"', ""]
    for wheel in wheels:
        name, version = wheel.name.split("-")[:2]
        data = wheel.read_bytes()
        lines += [
            "[[package]]",
            f'name = "{name.replace("_", "-")}"',
            f'version = "{version}"',
            'source = { registry = "https://example.invalid/simple" }',
            "wheels = [",
            f'    {{ url = "{base_url}{wheel.name}", hash = "sha256:{hashlib.sha256(data).hexdigest()}", size = {len(data)} }},',
            "]",
            "",
        ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def check(lock: Path, cache: Path, *, offline: bool = False) -> list[Result]:
    results, _ = run_lock_check(
        LockInputs(
            lock=lock, wheels=read_lock(lock), cache=FactsCache(cache), offline=offline, jobs=3
        )
    )
    return results


def by_check(results: list[Result]) -> dict[str, Result]:
    return {r.check: r for r in results}


def test_torch_210_breaks_the_kernel_built_against_291(built: Built, tmp_path: Path) -> None:
    with serve(built.root) as server:
        base = f"http://127.0.0.1:{server.server_port}/"
        lock = write_lock(
            tmp_path / "l" / "uv.lock",
            base,
            [built.wheels["torch-2.10.0"], built.wheels["sgl-kernel"]],
        )
        results = by_check(check(lock, tmp_path / "cache"))
    kernel = results["static.abi.sgl_kernel"]
    assert kernel.status == "FAIL", kernel.reason
    assert "sgl-kernel 0.3.21" in kernel.reason and "torch 2.10.0" in kernel.reason
    # labels are METADATA's Name (as the installed check prints them), not the lock's
    assert kernel.evidence["missing_symbols"][0]["provider_package"] == "torch 2.10.0"
    assert (
        "c10::cuda::c10_cuda_check_implementation(int, char const*, char const*, int, bool)"
        in kernel.reason
    )
    assert "c10::MessageLogger::MessageLogger(char const*, int, int)" in kernel.reason
    fetch = results["static.lock.fetch"]
    assert fetch.status == "PASS"
    assert 0 < fetch.evidence["bytes_fetched"] < fetch.evidence["wheel_bytes_total"]


def test_torch_291_with_the_same_kernel_has_no_abi_failure(built: Built, tmp_path: Path) -> None:
    with serve(built.root) as server:
        base = f"http://127.0.0.1:{server.server_port}/"
        lock = write_lock(
            tmp_path / "l" / "uv.lock",
            base,
            [built.wheels["torch-2.9.1"], built.wheels["sgl-kernel"]],
        )
        results = check(lock, tmp_path / "cache")
    assert not [r for r in results if r.status in ("FAIL", "ERROR")], results
    assert by_check(results)["static.abi.sgl_kernel"].status == "PASS"


def test_big_member_is_read_in_part_and_says_so(built: Built, tmp_path: Path) -> None:
    with serve(built.root) as server:
        base = f"http://127.0.0.1:{server.server_port}/"
        lock = write_lock(tmp_path / "l" / "uv.lock", base, [built.wheels["torch-2.9.1"]])
        results = by_check(check(lock, tmp_path / "cache"))
    fetch = results["static.lock.fetch"]
    big = next(o for o in fetch.evidence["objects"] if o["member"] == "torch/lib/libbig.so")
    assert not big["whole_member_read"] and not big["record_sha256_checked"]
    assert big["compressed_read"] < big["compressed_bytes"] // 2
    assert big["wheel_sha256"] and big["wheel_url"].endswith(".whl")
    small = next(o for o in fetch.evidence["objects"] if o["member"] == "torch/lib/libc10_cuda.so")
    assert small["whole_member_read"] and small["record_sha256_checked"]
    assert "read from part of their member" in fetch.reason
    # what was read in part equals what the file itself says; it is cached under where it
    # came from (wheel sha256 + URL + member), not under the RECORD hash it could not prove
    cache = FactsCache(tmp_path / "cache")
    wheel = zipfile.ZipFile(built.wheels["torch-2.9.1"])
    record = wheel.read("torch-2.9.1.dist-info/RECORD").decode()
    digest = next(
        line.split(",")[1] for line in record.splitlines() if line.startswith("torch/lib/libbig.so")
    )
    import base64

    record_key = base64.urlsafe_b64decode(digest.removeprefix("sha256=") + "==").hex()
    assert cache.facts(record_key) is None
    facts = cache.facts(origin_key(big["wheel_sha256"], big["wheel_url"], "torch/lib/libbig.so"))
    assert facts is not None
    on_disk = read_elf(built.big_lib)
    assert facts.exports == on_disk.exports
    assert tuple(facts.needed) == on_disk.needed


def test_stored_members_are_read_by_direct_ranges(built: Built, tmp_path: Path) -> None:
    """Wheels whose members are stored (not deflated) are read at the members' own offsets."""
    stored = tmp_path / "served"
    make_wheel(
        stored,
        "torch",
        "2.9.1",
        files={"torch/lib/libbig.so": built.big_lib.read_bytes()},
        tag=TAG_TORCH,
    )
    with serve(stored) as server:
        base = f"http://127.0.0.1:{server.server_port}/"
        lock = write_lock(tmp_path / "l" / "uv.lock", base, sorted(stored.glob("*.whl")))
        results = by_check(check(lock, tmp_path / "cache"))
    fetch = results["static.lock.fetch"]
    assert fetch.status == "PASS", fetch.reason
    big = next(o for o in fetch.evidence["objects"] if o["member"] == "torch/lib/libbig.so")
    assert not big["whole_member_read"]
    assert big["compressed_read"] < big["compressed_bytes"] // 2


def test_repeat_runs_offline_from_the_cache(built: Built, tmp_path: Path) -> None:
    with serve(built.root) as server:
        base = f"http://127.0.0.1:{server.server_port}/"
        lock = write_lock(
            tmp_path / "l" / "uv.lock",
            base,
            [built.wheels["torch-2.10.0"], built.wheels["sgl-kernel"]],
        )
        first = check(lock, tmp_path / "cache")
    # the server is gone: only the cache can answer
    second = check(lock, tmp_path / "cache", offline=True)
    assert [(r.check, r.status) for r in first if r.check != "static.lock.fetch"] == [
        (r.check, r.status) for r in second if r.check != "static.lock.fetch"
    ]
    assert by_check(second)["static.lock.fetch"].evidence["bytes_fetched"] == 0


def test_online_run_reads_members_a_cached_listing_has_no_facts_for(
    built: Built, tmp_path: Path
) -> None:
    """An earlier run stopped after listing the wheels (refused, killed, network gone): the
    next online run fetches the members, not 'offline and the cache lacks'."""
    cache = tmp_path / "cache"
    with serve(built.root) as server:
        base = f"http://127.0.0.1:{server.server_port}/"
        lock = write_lock(tmp_path / "l" / "uv.lock", base, [built.wheels["sgl-kernel"]])
        check(lock, cache)
        objects = [p for p in cache.rglob("*.json.gz") if "objects" in p.parts]
        assert objects and [p for p in cache.rglob("*.json.gz") if "objects" not in p.parts]
        for p in objects:
            p.unlink()  # the listing stays
        results = by_check(check(lock, cache))
    fetch = results["static.lock.fetch"]
    assert fetch.status == "PASS", fetch.reason
    assert fetch.evidence["bytes_fetched"] > 0
    assert "static.abi.sgl_kernel" in results


def test_offline_without_cache_names_what_it_lacks(built: Built, tmp_path: Path) -> None:
    lock = write_lock(
        tmp_path / "l" / "uv.lock", "http://127.0.0.1:9/", [built.wheels["sgl-kernel"]]
    )
    results = by_check(check(lock, tmp_path / "empty", offline=True))
    fetch = results["static.lock.fetch"]
    assert fetch.status == "ERROR"
    assert "cache lacks" in fetch.reason and "sgl_kernel-0.3.21" in fetch.reason
    assert "static.abi.sgl_kernel" not in results  # no verdict from half the facts


def test_server_without_ranges_is_streamed_and_checked(built: Built, tmp_path: Path) -> None:
    with serve(built.root, "ignore-range") as server:
        base = f"http://127.0.0.1:{server.server_port}/"
        lock = write_lock(
            tmp_path / "l" / "uv.lock",
            base,
            [built.wheels["torch-2.10.0"], built.wheels["sgl-kernel"]],
        )
        results = by_check(check(lock, tmp_path / "cache"))
    fetch = results["static.lock.fetch"]
    assert "ignored Range" in fetch.reason
    assert len(fetch.evidence["streamed_wheels"]) == 2
    assert len(fetch.evidence["wheel_sha256_checked"]) == 2
    assert results["static.abi.sgl_kernel"].status == "FAIL"


def test_connection_dropped_mid_member_is_retried(built: Built, tmp_path: Path) -> None:
    with serve(built.root, "drop-once") as server:
        base = f"http://127.0.0.1:{server.server_port}/"
        lock = write_lock(
            tmp_path / "l" / "uv.lock",
            base,
            [built.wheels["torch-2.10.0"], built.wheels["sgl-kernel"]],
        )
        results = by_check(check(lock, tmp_path / "cache"))
        assert server.dropped
    assert results["static.lock.fetch"].evidence["retries"] >= 1
    assert results["static.abi.sgl_kernel"].status == "FAIL"


def _tampered(built: Built, out: Path) -> Path:
    """sgl-kernel's wheel with its extension's bytes changed after RECORD was written."""
    src = built.wheels["sgl-kernel"]
    out.mkdir(parents=True, exist_ok=True)
    dst = out / src.name
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename.endswith("common_ops.abi3.so"):
                data = data[:-16] + b"\0" * 16
            zout.writestr(info, data)
    return dst


def test_member_that_does_not_match_record_is_reported_and_judged(
    built: Built, tmp_path: Path
) -> None:
    """A member whose bytes match the zip (size, CRC32) but not RECORD: published so (real:
    pynvvideocodec 2.0.4, pulled in by vllm 0.30.0). An installer writes those bytes, so they
    are judged; the mismatch is a WARN naming the member, not a refusal of a healthy lock."""
    bad = _tampered(built, tmp_path / "served")
    with serve(tmp_path / "served") as server:
        base = f"http://127.0.0.1:{server.server_port}/"
        lock = write_lock(tmp_path / "l" / "uv.lock", base, [bad])
        results = by_check(check(lock, tmp_path / "cache"))
        offline = by_check(check(lock, tmp_path / "cache", offline=True))
    for got in (results, offline):  # the cached facts keep the mismatch
        integrity = got["static.lock.integrity"]
        assert integrity.status == "PASS" and integrity.evidence["severity"] == "WARN"
        assert "sgl_kernel/sm100/common_ops.abi3.so" in integrity.reason
        assert "does not match RECORD" in integrity.reason
        assert "static.abi.sgl_kernel" in got


def test_member_that_does_not_match_its_zip_entry_is_refused(built: Built, tmp_path: Path) -> None:
    """Bytes that differ from the zip's own CRC32: a corrupt transfer or a forged entry."""
    src = built.wheels["sgl-kernel"]
    served = tmp_path / "served"
    served.mkdir()
    raw = bytearray(src.read_bytes())
    with zipfile.ZipFile(src) as z:
        info = next(i for i in z.infolist() if i.filename.endswith("common_ops.abi3.so"))
    assert info.compress_type == zipfile.ZIP_STORED or info.compress_size > 64
    # flip bytes inside the entry's data, leaving the directory (and its CRC32) as it was
    at = info.header_offset + 30 + len(info.filename) + len(info.extra) + info.compress_size // 2
    raw[at : at + 8] = bytes(b ^ 0xFF for b in raw[at : at + 8])
    (served / src.name).write_bytes(bytes(raw))
    with serve(served) as server:
        base = f"http://127.0.0.1:{server.server_port}/"
        lock = write_lock(tmp_path / "l" / "uv.lock", base, [served / src.name])
        results = by_check(check(lock, tmp_path / "cache"))
    integrity = results["static.lock.integrity"]
    assert integrity.status == "FAIL", integrity.reason
    assert "common_ops.abi3.so" in integrity.reason
    assert "static.abi.sgl_kernel" not in results


def test_cli_exit_code_and_json(built: Built, tmp_path: Path) -> None:
    with serve(built.root) as server:
        base = f"http://127.0.0.1:{server.server_port}/"
        lock = write_lock(
            tmp_path / "l" / "uv.lock",
            base,
            [built.wheels["torch-2.10.0"], built.wheels["sgl-kernel"]],
        )
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "validators",
                "static",
                "--lock",
                str(lock),
                "--cache",
                str(tmp_path / "c"),
                "--json",
                "--allow-local-urls",  # the test's index is served on 127.0.0.1
            ],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=Path(__file__).resolve().parents[2],
        )
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert '"static.abi.sgl_kernel"' in proc.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "validators", "static", "--lock", str(tmp_path / "nope.lock")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert bad.returncode == 2, bad.stderr[-2000:]
    assert "nope.lock" in bad.stderr


SHIM_291 = "int aoti_torch_get_data_ptr(void *t, void **p) { return 0; }\n"
SHIM_210 = SHIM_291 + "int torch_call_dispatcher(const char *op, void *stack) { return 0; }\n"
STABLE_EXT = """
extern int aoti_torch_get_data_ptr(void *t, void **p);
extern int torch_call_dispatcher(const char *op, void *stack);
int PyInit__C(void) { void *p; return aoti_torch_get_data_ptr(0, &p) + torch_call_dispatcher("x", 0); }
"""


def test_stable_shim_extension_is_reported_with_its_minimum_torch(tmp_path: Path) -> None:
    build = tmp_path / "build"
    old = elf_env.gcc(build / "old" / "libtorch_cpu.so", SHIM_291, "-Wl,-soname,libtorch_cpu.so")
    new = elf_env.gcc(build / "new" / "libtorch_cpu.so", SHIM_210, "-Wl,-soname,libtorch_cpu.so")
    ext = elf_env.gcc(
        build / "ext" / "_C.abi3.so", STABLE_EXT, f"-L{new.parent}", "-l:libtorch_cpu.so"
    )
    served = tmp_path / "served"
    t291 = make_wheel(
        served,
        "torch",
        "2.9.1",
        files={"torch/lib/libtorch_cpu.so": old.read_bytes()},
        tag=TAG_TORCH,
        deflate=True,
    )
    t210 = make_wheel(
        served,
        "torch",
        "2.10.0",
        files={"torch/lib/libtorch_cpu.so": new.read_bytes()},
        tag=TAG_TORCH,
        deflate=True,
    )
    kern = make_wheel(
        served,
        "Stable_Kernel",
        "1.0",
        files={"stable_kernel/_C.abi3.so": ext.read_bytes()},
        tag=TAG_KERNEL,
        deflate=True,
    )
    cache = tmp_path / "cache"
    with serve(served) as server:
        base = f"http://127.0.0.1:{server.server_port}/"
        first = by_check(check(write_lock(tmp_path / "a" / "uv.lock", base, [t291, kern]), cache))
        second = by_check(check(write_lock(tmp_path / "b" / "uv.lock", base, [t210, kern]), cache))
    # with 2.9.1 the dispatcher call is missing: an ABI failure, and no torch seen has both
    assert first["static.abi.stable_kernel"].status == "FAIL"
    assert "torch_call_dispatcher" in first["static.abi.stable_kernel"].reason
    stable = second["static.abi.stable.stable_kernel"]
    assert stable.status == "PASS"
    assert "only the LibTorch stable C shim" in stable.reason
    assert stable.reason.startswith("Stable_Kernel 1.0:")  # METADATA's Name, as installed
    assert stable.evidence["min_torch"] == "2.10.0"
    assert stable.evidence["torch_seen"] == ["2.9.1", "2.10.0"]
    assert second["static.abi.stable_kernel"].status == "PASS"


def test_cubins_named_and_nameless_read_as_installed(tmp_path: Path) -> None:
    """A cubin named for its target is taken from its name; one whose name does not say is
    read whole and its a/f suffix taken from .note.nv.tkinfo (real nvcc cubins)."""
    fixtures = Path(__file__).parent / "fixtures" / "fatbin"
    served = tmp_path / "served"
    wheel = make_wheel(
        served,
        "cubinpkg",
        "1.0",
        files={
            "cubinpkg/cubins/k_sm_90a.cubin": (fixtures / "k_sm_90a.cubin").read_bytes(),
            "cubinpkg/cubins/kernel.ed117667bb0c.cubin": (
                fixtures / "k_sm_100f.cubin"
            ).read_bytes(),
        },
        tag=TAG_TORCH,
        deflate=True,
    )
    with serve(served) as server:
        lock = write_lock(
            tmp_path / "l" / "uv.lock", f"http://127.0.0.1:{server.server_port}/", [wheel]
        )
        results, _ = run_lock_check(
            LockInputs(
                lock=lock,
                wheels=read_lock(lock),
                cache=FactsCache(tmp_path / "c"),
                targets=("10.0a",),
            )
        )
    arch = by_check(results)["static.arch.cubinpkg"]
    assert arch.evidence["cubins"] == {"sm_90a": 1, "sm_100f": 1}
    assert arch.status == "PASS", arch.reason
