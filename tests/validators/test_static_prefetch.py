"""A first-time static run (issue 25 item 1): the facts of uncached files read by worker
processes (prefetch.py), and the first confirming child started before the steps are known
(confirm.Prewarmed). Both change when work is done, never its answers: checked against the
same run done the old way. Real ELF files built with gcc/g++, real child processes."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.validators import elf_env
from validators.elf.elf_symbols import ElfReadError, read_elf
from validators.elf.fatbin import gpu_code
from validators.elf.file_facts_cache import FileFactsCache
from validators.static import prefetch as prefetch_mod
from validators.static.abi_results import AbiOptions
from validators.static.confirm import Prewarmed, Step, run_steps
from validators.static.prefetch import prefetch
from validators.static.run import StaticInputs, run_static

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not elf_env.have_compilers(), reason="needs gcc and g++")

# imports the driver API (as a CUDA library does), and defines one cu* name itself
DRIVER_USER_C = (
    "int cuInit(unsigned); int nvmlInit_v2(void); int cuOwn(void){return 0;}\n"
    "int go(void){ return cuInit(0) + nvmlInit_v2() + cuOwn(); }\n"
)


def _copies(src: Path, folder: Path, n: int) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(n):  # a copy is a new inode: a file of its own to the cache
        out.append(shutil.copy2(src, folder / f"lib{i}.so"))
    return [Path(p) for p in out]


_PREFETCH = """
import json, sys
from pathlib import Path
from validators.elf.file_facts_cache import FileFactsCache
from validators.static.prefetch import prefetch
for root, gpu, paths in json.loads(sys.argv[1]):
    cache = FileFactsCache(Path(root), min_size=0)
    early = []  # what on_driver_names gave, before the GPU facts and the jobs were done
    done = prefetch(
        cache, [Path(p) for p in paths], gpu=gpu, workers=2, on_driver_names=early.append
    )
    print(json.dumps(done and {
        **done.__dict__,
        "driver_names": sorted(done.driver_names),
        "early": [sorted(names) for names in early],
    }))
"""


def _prefetch_in_child(*calls: tuple[Path, list[Path], bool]) -> list[Any]:
    """prefetch() calls, in order, as the CLI runs them: in a process with one thread (pytest
    runs others, and prefetch forks only a single-threaded process)."""
    plan = json.dumps([(str(root), gpu, [str(p) for p in paths]) for root, paths, gpu in calls])
    done = subprocess.run(
        [sys.executable, "-c", _PREFETCH, plan],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    )
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_workers_fill_the_cache_with_the_answers_a_read_gives(tmp_path: Path) -> None:
    lib = elf_env.gcc(tmp_path / "build" / "libdrv.so", DRIVER_USER_C)
    paths = _copies(lib, tmp_path / "files", prefetch_mod.MIN_MISSES)
    broken = tmp_path / "files" / "libbroken.so"
    broken.write_bytes(lib.read_bytes()[:100])  # an ELF header and nothing after it
    cache = FileFactsCache(tmp_path / "cache", min_size=0)
    fresh = FileFactsCache(tmp_path / "cache2", min_size=0)
    # threads here: no pool (prefetch forks only a single-threaded process)
    threads = threading.Thread(target=threading.Event().wait, args=(5,), daemon=True)
    threads.start()
    assert prefetch(fresh, paths, gpu=False, workers=2) is None
    assert prefetch(fresh, paths, gpu=False, workers=1) is None
    assert prefetch(None, paths, gpu=False, workers=2) is None
    assert not fresh.root.exists()

    done, hit, few, elf_only, gpu_later, all_cached = _prefetch_in_child(
        (cache.root, [*paths, broken], True),
        (cache.root, paths, True),  # nothing left to read
        (fresh.root, paths[:-1], False),  # too few files to start a pool for
        (fresh.root, paths, False),
        (fresh.root, paths, True),  # GPU facts asked for later: those files go to the workers
        (fresh.root, paths, True),
    )
    assert (done["files"], done["workers"], done["complete"]) == (len(paths) + 1, 2, True)
    # cuOwn is defined in the env: only what no object defines is the driver's
    assert done["driver_names"] == ["cuInit", "nvmlInit_v2"]
    assert done["early"] == [done["driver_names"]]  # given once, the same names
    for path in paths:
        assert cache.elf(path) == read_elf(path)
        assert cache.gpu(path) == gpu_code(path)
    assert (cache.hits, cache.misses) == (2 * len(paths), 0)  # every answer from the workers
    with pytest.raises(ElfReadError):  # a file no worker could read fails as before
        cache.elf(broken)
    assert (hit, few, all_cached) == (None, None, None)
    assert elf_only["files"] == gpu_later["files"] == len(paths)


CRASH_C = (
    "#include <signal.h>\n__attribute__((constructor)) static void f(void){ raise(SIGSEGV); }\n"
)


def _outcomes(run: Any) -> list[tuple[Step, str, str]]:
    return [(r.step, r.outcome, r.error) for r in run.results]


def test_a_prewarmed_first_child_gives_the_same_results(tmp_path: Path) -> None:
    crash = elf_env.gcc(tmp_path / "libcrash.so", CRASH_C)
    python = Path(sys.executable)
    site = tmp_path
    steps = [
        Step("import", "json"),
        Step("import", "no_such_module_q"),
        Step("library", crash.name, str(crash)),  # kills the child: the rest in a new one
        Step("import", "email"),
    ]
    plain = run_steps(python, steps, site_packages=site, library_path=None)
    early = Prewarmed(python, steps[:1], site_packages=site, library_path=None)
    warm = run_steps(python, steps, site_packages=site, library_path=None, first=early)
    assert _outcomes(warm) == _outcomes(plain)
    assert [o for _, o, _ in _outcomes(plain)] == ["ok", "error", "crash", "ok"]
    assert (warm.children, warm.prewarmed, plain.prewarmed) == (plain.children, True, False)

    # another LD_LIBRARY_PATH (a stub built for other driver names), other first steps, or
    # nothing after them: not that run's child, so it is not used
    other = Prewarmed(python, steps[:1], site_packages=site, library_path=tmp_path)
    assert not other.serves(python, steps, site, None)
    assert not other.serves(python, [Step("import", "email"), *steps], site, tmp_path)
    assert not other.serves(python, steps[:1], site, tmp_path)
    assert other.serves(python, steps, site, tmp_path)
    unused = run_steps(python, steps[:2], site_packages=site, library_path=None, first=other)
    assert not unused.prewarmed
    other.discard()
    other.discard()  # twice is harmless
    assert not other.serves(python, steps, site, tmp_path)


@pytest.mark.parametrize(
    ("module", "used"),
    [
        ("warm_ok", True),  # imported: the child is used
        ("warm_fail", False),  # an import error: a fresh child instead
        ("warm_crash", False),  # kills the child while it waits: a fresh child instead
        ("warm_exit", False),  # SystemExit in the module: a fresh child instead
    ],
)
def test_a_prewarmed_childs_warm_import_is_used_only_when_it_worked(
    tmp_path: Path, module: str, used: bool
) -> None:
    crash = elf_env.gcc(tmp_path / "libcrash.so", CRASH_C)
    site = tmp_path / "site"
    site.mkdir()
    begun = tmp_path / "begun"
    # each warm module first says it has begun (the child begins no warm import once the
    # steps are there, so the steps are sent only after that)
    head = f"open({str(begun)!r}, 'w').close()\n"
    bodies = {
        "warm_ok": "import email.mime.text\n",
        "warm_fail": "import no_such_module_w\n",
        "warm_crash": f"import ctypes\nctypes.CDLL({str(crash)!r})\n",
        "warm_exit": "raise SystemExit(3)\n",
    }
    for name, body in bodies.items():
        (site / f"{name}.py").write_text(head + body, encoding="utf-8")
    python = Path(sys.executable)
    steps = [
        Step("import", "json"),
        Step("import", "no_such_module_q"),
        Step("import", "email.mime.text"),
        Step("library", crash.name, str(crash)),
        Step("import", "warm_exit"),
    ]
    plain = run_steps(python, steps, site_packages=site, library_path=None)
    begun.unlink()
    early = Prewarmed(python, steps[:1], site_packages=site, library_path=None, warm=[module])
    for _ in range(1200):  # up to 120 s on a loaded machine; usually ~0.1 s
        if begun.exists():
            break
        time.sleep(0.1)
    warm = run_steps(python, steps, site_packages=site, library_path=None, first=early)
    assert _outcomes(warm) == _outcomes(plain)
    assert [o for _, o, _ in _outcomes(plain)] == ["ok", "error", "ok", "crash", "error"]
    assert (warm.prewarmed, warm.children) == (used, plain.children)


def _normalised(results: list[dict[str, Any]]) -> dict[str, tuple[str, str]]:
    timing = re.compile(r"\d+\.\d+ s[^)]*|in \d+\.\d+ s")
    return {r["check"]: (r["status"], timing.sub("T", r["reason"])) for r in results}


@pytest.mark.skipif(shutil.which("c++filt") is None, reason="needs binutils c++filt")
def test_a_cold_run_with_workers_and_an_early_child_equals_a_plain_run(tmp_path: Path) -> None:
    """The torch 2.9 -> 2.10 break (a FAIL a confirming load confirms), a library that imports
    the driver API (the stub the children load), and enough files for the workers."""
    build = tmp_path / "build"
    old_site = elf_env.new_env(tmp_path / "old")
    old_lib = elf_env.torch_like(old_site, build, "2.9.1", elf_env.CORE_OLD_CPP)
    old_ext = elf_env.kernel_against(old_site, build, old_lib)
    site = elf_env.new_env(tmp_path / "env")
    elf_env.torch_like(site, build, "2.10.0", elf_env.CORE_NEW_CPP)
    (site / "torch" / "__init__.py").write_text("", encoding="utf-8")
    ext = site / "sgl_kernel" / "sm100" / "common_ops.abi3.so"
    ext.parent.mkdir(parents=True)
    shutil.copy2(old_ext, ext)
    elf_env.add_dist(site, "sgl-kernel", "0.3.21", [ext])
    # linked against driver libraries the env does not hold (the host provides them)
    for lib in ("libcuda.so.1", "libnvidia-ml.so.1"):
        elf_env.gcc(build / lib, "int cuInit(unsigned u){return 0;} int nvmlInit_v2(void)"
                    "{return 0;}\n", f"-Wl,-soname,{lib}")  # fmt: skip
    drv = elf_env.gcc(
        build / "libdrv.so", DRIVER_USER_C, f"-L{build}", "-l:libcuda.so.1", "-l:libnvidia-ml.so.1"
    )
    filler = _copies(drv, site / "filler", prefetch_mod.MIN_MISSES)
    elf_env.add_package(site, "filler", filler)

    plain = run_static(StaticInputs(env_path=tmp_path / "env", abi=AbiOptions(), targets=("9.0",)))
    # the CLI, cold: one thread, so the facts are read by workers and the child starts early
    argv = [sys.executable, "-m", "validators", "static", "--env", str(tmp_path / "env")]
    argv += ["--targets", "9.0"]  # the arch scan runs beside the confirming child
    env = {**os.environ, "STACKGATE_CACHE": str(tmp_path / "cache")}
    done = subprocess.run(
        [*argv, "--json"], capture_output=True, text=True, check=False, cwd=REPO, env=env
    )
    cold = _items(json.loads(done.stdout))
    by_check = {r["check"]: r for r in cold}
    assert by_check["static.env"]["evidence"]["facts_read_in_workers"] == len(filler) + 2
    summary = by_check["static.abi.summary"]["reason"]
    assert "libcuda.so.1 absent" in summary, summary
    assert "the first started while the env was read" in summary, summary
    kernel = by_check["static.abi.sgl_kernel"]
    assert kernel["status"] == "FAIL" and "confirmed by a load" in kernel["reason"], kernel
    assert by_check["static.arch"]["reason"] == "no GPU code in this environment"
    assert _normalised(cold) == _normalised([r.model_dump() for r in plain])


def _items(report: dict[str, Any]) -> list[dict[str, Any]]:
    results = report["results"]
    if isinstance(results, list):
        return results
    return [{"check": k, **v} for k, v in results.items()]
