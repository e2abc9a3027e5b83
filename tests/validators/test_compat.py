"""`validators compat`: the matrix of a kernel package's versions against torch versions,
decided from byte ranges of real wheels on a real PEP 691 index served on 127.0.0.1, with
torch's closure resolved by real `uv lock`.

The wheels hold real ELF objects built with gcc/g++ (tests/helpers/compat_wheels.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.specifiers import SpecifierSet

from stackgate.manifest.rules import RuleFile, load_rules
from tests.helpers.compat_wheels import compat_wheels
from tests.helpers.json_index import serve_index, write_index
from tests.validators import elf_env
from validators.elf.facts_cache import FactsCache
from validators.torch_abi.matrix import Matrix, Request, compute
from validators.torch_abi.matrix_report import html_report, text_table
from validators.torch_abi.proposals import check_rules, propose, uncovered

pytestmark = pytest.mark.skipif(not elf_env.have_compilers(), reason="needs gcc and g++")

PY = (3, 12)


@dataclass(frozen=True)
class Index:
    root: Path


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Index:
    tmp = tmp_path_factory.mktemp("compat")
    root = tmp / "served"
    write_index(root, compat_wheels(tmp / "build"))
    return Index(root)


def _request(url: str, package: str, **kw: object) -> Request:
    return Request(
        package=package,
        versions=(SpecifierSet(""),),
        torch=(SpecifierSet(">=2.9"),),
        python=PY,
        glibc=(2, 35),
        index=url,
        torch_index=url,
        jobs=3,
        **kw,  # type: ignore[arg-type]
    )


def _matrix(index: Index, cache: Path, package: str = "sgl-kernel", **kw: object) -> Matrix:
    with serve_index(index.root) as url:
        return compute(_request(url, package, **kw), FactsCache(cache), None)


def test_matrix_names_symbol_library_and_missing_wheel(index: Index, tmp_path: Path) -> None:
    m = _matrix(index, tmp_path / "cache")
    assert m.versions == ["0.3.0", "0.3.21"]
    assert m.torch_versions == ["2.9.1", "2.10.0", "2.11.0"]
    ok = m.pair("0.3.21", "2.9.1")
    assert ok is not None and ok.verdict == "loads", ok.reason
    assert ok.cuda_needed == ["12"] and ok.torch_cuda == ["12"]
    sym = m.pair("0.3.21", "2.10.0")
    assert sym is not None and sym.verdict == "breaks" and sym.kind == "symbol", sym
    assert sym.first.startswith("common_ops.abi3.so imports c10::"), sym.first
    assert "c10_cuda_check_implementation(int, char const*, char const*, int, bool)" in sym.reason
    lib = m.pair("0.3.21", "2.11.0")
    assert lib is not None and lib.verdict == "breaks" and lib.kind == "library", lib
    assert "libcudart.so.12" in lib.first and lib.torch_cuda == ["13"]
    nowheel = m.pair("0.3.0", "2.9.1")
    assert nowheel is not None and nowheel.verdict == "breaks" and nowheel.kind == "no-wheel"
    assert "cp39-cp39-manylinux2014_x86_64" in nowheel.reason
    assert m.bytes_fetched > 0 and m.wheel_bytes > 0
    lines = text_table(m)
    assert lines[2].split() == ["0.3.21", "ok", "X", "X"], lines


def test_warm_matrix_reads_no_wheel_and_gives_the_same_verdicts(
    index: Index, tmp_path: Path
) -> None:
    with serve_index(index.root) as url:  # one URL: the closure and wheels are keyed by it
        cold = compute(_request(url, "sgl-kernel"), FactsCache(tmp_path / "cache"), None)
        warm = compute(_request(url, "sgl-kernel"), FactsCache(tmp_path / "cache"), None)
    assert warm.bytes_fetched == 0
    assert warm.verdicts_from_cache == 3  # the 0.3.21 pairs; "no wheel" needs no wheel read
    assert [p.model_dump(exclude={"bytes_fetched"}) for p in warm.pairs] == [
        p.model_dump(exclude={"bytes_fetched"}) for p in cold.pairs
    ]


def test_prefetch_reads_every_wheel_once_and_worker_processes_agree(
    index: Index, tmp_path: Path
) -> None:
    """Cold: the prefetch reads the matrix's wheels (many requests in flight) and no pair
    reads a byte after it; torch columns judged in two worker processes give the verdicts
    of one process."""
    with serve_index(index.root) as url:
        two = compute(_request(url, "sgl-kernel", processes=2), FactsCache(tmp_path / "two"), None)
        one = compute(_request(url, "sgl-kernel"), FactsCache(tmp_path / "one"), None)
    assert two.prefetch_bytes > 0 and two.bytes_fetched == two.prefetch_bytes
    assert one.bytes_fetched == one.prefetch_bytes == two.prefetch_bytes
    assert two.requests > 0 and two.verdicts_from_cache == 0
    assert [p.model_dump(exclude={"bytes_fetched"}) for p in two.pairs] == [
        p.model_dump(exclude={"bytes_fetched"}) for p in one.pairs
    ]
    assert [(p.version, p.torch) for p in two.pairs] == [
        (v, t) for t in two.torch_versions for v in two.versions
    ]


def test_a_declared_torch_pin_left_unmet_is_undecidable_not_loads(
    index: Index, tmp_path: Path
) -> None:
    """tvlike 1.0 requires torch==2.9.1; torch 2.11.0 exports every symbol it imports (the 2.9
    c10), yet a layout change can crash it at load (torchvision 0.23.0 under torch 2.9.1
    does): undecidable, saying so."""
    m = _matrix(index, tmp_path / "cache", package="tvlike")
    assert m.pair("1.0", "2.9.1").verdict == "loads"  # type: ignore[union-attr]
    assert m.pair("1.0", "2.10.0").verdict == "breaks"  # type: ignore[union-attr]
    p = m.pair("1.0", "2.11.0")
    assert p is not None and p.verdict == "undecidable" and p.kind == "declared-torch", p
    assert "requires torch==2.9.1" in p.reason


def test_proposed_rules_parse_and_fire_only_on_the_breaking_pairs(
    index: Index, tmp_path: Path
) -> None:
    m = _matrix(index, tmp_path / "cache")
    proposals = propose(m)
    text = "schema_version = 1\n\n" + "\n".join(p.toml(m.package) for p in proposals)
    rules = RuleFile.model_validate(tomllib.loads(text)).rules
    assert [r.when.packages for r in rules] == [
        {"sgl-kernel": "==0.3.21", "torch": ">=2.10.0,<=2.11.0"}
    ], text
    assert "torch 2.9.1" in rules[0].remedy  # type: ignore[operator]
    checks = check_rules(m, rules)
    assert [(c.comparable, c.disagreements, c.agreements) for c in checks] == [(True, [], 2)]
    assert uncovered(m, rules) == []


def test_a_hand_written_rule_that_forbids_a_loading_pair_is_shown(
    index: Index, tmp_path: Path
) -> None:
    m = _matrix(index, tmp_path / "cache")
    rules_file = tmp_path / "rules.toml"
    rules_file.write_text(
        """schema_version = 1
[[rules]]
id = "kernel-needs-torch-2.10"
severity = "error"
message = "m"
evidence = "e"
[rules.when]
packages = { sgl-kernel = "==0.3.21" }
packages_not = { torch = "==2.10.*" }

[[rules]]
id = "kernel-and-cuda"
severity = "error"
message = "m"
evidence = "e"
[rules.when]
packages = { sgl-kernel = ">=0.3" }
cuda = ">=13"
""",
        encoding="utf-8",
    )
    checks = {c.rule: c for c in check_rules(m, load_rules(rules_file))}
    wrong = checks["kernel-needs-torch-2.10"]
    assert wrong.comparable and len(wrong.disagreements) == 1, wrong
    assert wrong.disagreements[0].startswith("sgl-kernel 0.3.21 + torch 2.9.1 loads")
    assert wrong.agreements == 1  # 2.11.0: breaks (libcudart.so.12)
    assert not checks["kernel-and-cuda"].comparable
    page = html_report(m, propose(m), list(checks.values()))
    assert 'class="breaks"' in page and "kernel-needs-torch-2.10" in page
    assert "<script" not in page


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "validators", "compat", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


def test_cli_json_html_and_bad_input(index: Index, tmp_path: Path) -> None:
    env = {**os.environ, "STACKGATE_CACHE": str(tmp_path / "cache")}
    with serve_index(index.root) as url:
        out = _cli(
            "sgl-kernel",
            "--versions",
            "==0.3.21",
            "--against",
            "torch==2.9.1",
            "--against",
            "torch==2.10.0",
            "--index",
            url,
            "--json",
            "--html",
            str(tmp_path / "m.html"),
            env=env,
        )
        assert out.returncode == 0, out.stderr
        data = json.loads(out.stdout)
        assert data["counts"] == {"loads": 1, "breaks": 1, "undecidable": 0}
        assert data["matrix"]["torch_versions"] == ["2.9.1", "2.10.0"]
        assert "sgl-kernel-0.3.21-needs-torch-2.9" in {c["rule"] for c in data["rule_checks"]}
        assert "OK sgl-kernel: 1 versions x 2 torch: 1 load, 1 break" in out.stderr
        assert (tmp_path / "m.html").read_text().startswith("<!DOCTYPE html>")
        missing = _cli("no-such-pkg", "--against", "torch", "--index", url, env=env)
        assert missing.returncode == 2 and "no-such-pkg: not on the index" in missing.stderr
        numpy = _cli("sgl-kernel", "--against", "numpy>=1", "--index", url, env=env)
        assert numpy.returncode == 2 and "only torch is judged against" in numpy.stderr
        none = _cli(
            "sgl-kernel", "--versions", "==9.9", "--against", "torch", "--index", url, env=env
        )
        assert none.returncode == 2 and "no version matches" in none.stderr


def test_an_index_url_with_credentials_reaches_no_output(index: Index, tmp_path: Path) -> None:
    """Plant and grep (tests/foundation/test_secrets_planted_everywhere.py has the rest):
    `--index http://user:pw@...` is used to fetch, and neither the HTML, the --json, the
    terminal lines nor the cache hold the password."""
    env = {**os.environ, "STACKGATE_CACHE": str(tmp_path / "cache"), "NO_COLOR": "1"}
    with serve_index(index.root) as url:
        planted = url.replace("http://", "http://alice:S3CRETPW@", 1)
        html = tmp_path / "m.html"
        out = _cli(
            "sgl-kernel", "--versions", "==0.3.21", "--against", "torch==2.9.1",
            "--index", planted, "--json", "--html", str(html), env=env,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["counts"]["loads"] == 1  # the index was really read
        page = html.read_text()
        assert page.startswith("<!DOCTYPE html>")
        for text in (out.stdout, out.stderr, page):
            assert "S3CRETPW" not in text
        cached = [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]
        assert not [p for p in cached if b"S3CRETPW" in p.read_bytes()]
