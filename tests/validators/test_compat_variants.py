"""`validators compat PKG --audit-variants`: the variant properties wheels publish (PEP 825
draft, read with variantlib) audited against the wheels' binaries, on a real PEP 691 index
served on 127.0.0.1 (byte ranges), torch closures by real `uv lock`.

The wheels hold real ELF objects: an extension built here with g++ (linked against torch
2.9's c10 signatures and libcudart.so.13) and the nvcc-built fatbin fixtures (libmulti.so:
SASS sm_80/90a/100f/120a + PTX compute_90/120; libold.so: SASS sm_80/86 only)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.compat_wheels import BAD, GOOD, compat_wheels, variant_wheels
from tests.helpers.json_index import serve_index, write_index
from tests.validators import elf_env
from validators.elf.cached_facts import CachedFacts
from validators.elf.facts_cache import FactsCache
from validators.torch_abi.variants import (
    AuditInputs,
    VariantFileError,
    VariantReport,
    audit,
    audit_arch,
    audit_cuda,
    parse_dist_info,
    variant_label,
)

ROOT = Path(__file__).resolve().parents[2]
# the index's variants.json says `bad` needs CUDA >= 12.8 where its wheel says < 13
INDEX_SAYS = {
    "good": GOOD,
    "bad": [p for p in BAD if "cuda" not in p] + ["nvidia :: cuda_version_lower_bound :: 12.8"],
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not elf_env.have_compilers():
        pytest.skip("needs gcc and g++")
    tmp = tmp_path_factory.mktemp("variants")
    root = tmp / "served"
    write_index(root, compat_wheels(tmp / "build") + variant_wheels(tmp / "vbuild", INDEX_SAYS))
    return root


def _audit(served: Path, cache: Path, package: str = "vkern") -> VariantReport:
    with serve_index(served) as url:
        return audit(
            AuditInputs(
                package=package,
                versions=None,
                index=url,
                torch_index=url,
                python=(3, 12),
                cache=FactsCache(cache),
                interpreter=None,
                jobs=3,
            )
        )


def _claims(report: VariantReport, label: str) -> dict[str, tuple[str, str]]:
    one = next(a for a in report.audits if a.label == label)
    return {c.claim: (c.verdict, c.evidence) for c in one.claims}


def test_each_claim_is_held_against_the_binary(served: Path, tmp_path: Path) -> None:
    report = _audit(served, tmp_path / "cache")
    assert report.labelled_wheels == 3 and report.variants_json == ["vkern-1.0-variants.json"]
    good = _claims(report, "good")
    assert {claim: v for claim, (v, _) in good.items()} == {
        "abi_dependency :: torch :: 2.11": "holds",
        "nvidia :: cuda_version_lower_bound :: 13.0": "holds",
        "nvidia :: sm_arch :: 120_real": "holds",
        "nvidia :: sm_arch :: 120_virtual": "holds",
        "nvidia :: sm_arch :: 90_real": "holds",
        "vkern-1.0-variants.json": "holds",
    }, good
    assert "sm_120a" in good["nvidia :: sm_arch :: 120_real"][1]
    assert "compute_120" in good["nvidia :: sm_arch :: 120_virtual"][1]
    assert "torch 2.11.0" in good["abi_dependency :: torch :: 2.11"][1]

    bad = _claims(report, "bad")
    verdict, why = bad["nvidia :: sm_arch :: 120_real"]
    assert verdict == "false" and "sm_80, sm_86" in why, why
    assert bad["nvidia :: sm_arch :: 80_real"][0] == "holds"
    verdict, why = bad["nvidia :: cuda_version_upper_bound :: 13"]
    assert verdict == "false" and "libcudart.so.13" in why, why
    verdict, why = bad["abi_dependency :: torch :: 2.10"]  # c10 changed its signatures
    assert verdict == "false" and "torch 2.10.0" in why and "c10::" in why, why
    assert bad["x86_64 :: level :: v3"][0] == "not-audited"
    verdict, why = bad["vkern-1.0-variants.json"]
    assert verdict == "false" and "cuda_version_lower_bound :: 12.8" in why, why

    nojson = next(a for a in report.audits if a.label == "nojson")
    assert not nojson.claims and "holds no *.dist-info/variant.json" in nojson.error


def test_cli_exits_1_on_a_false_claim_and_0_where_nothing_is_published(
    served: Path, tmp_path: Path
) -> None:
    env = {**os.environ, "STACKGATE_CACHE": str(tmp_path / "sg")}
    with serve_index(served) as url:
        common = ["--index", url, "--json", "--cache", str(tmp_path / "cache")]
        done = subprocess.run(
            [sys.executable, "-m", "validators", "compat", "vkern", "--audit-variants", *common],
            cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=600,
        )  # fmt: skip
        plain = subprocess.run(
            [sys.executable, "-m", "validators", "compat", "sgl-kernel", "--audit-variants",
             *common],
            cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=600,
        )  # fmt: skip
        missing = subprocess.run(
            [sys.executable, "-m", "validators", "compat", "sgl-kernel", "--index", url],
            cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=600,
        )  # fmt: skip
    assert done.returncode == 1, done.stderr
    data = json.loads(done.stdout)["variants"]
    assert data["labelled_wheels"] == 3 and len(data["audits"]) == 3
    assert "FALSE vkern-1.0-cp310-abi3-manylinux2014_x86_64-bad.whl [bad]" in done.stderr
    assert "FAIL vkern:" in done.stderr and "false claims" in done.stderr
    assert plain.returncode == 0, plain.stderr
    assert json.loads(plain.stdout)["variants"]["labelled_wheels"] == 0
    assert "0 with a variant label" in plain.stderr
    assert missing.returncode == 2 and "--against" in missing.stderr, missing.stderr


def _codes(*labels: str) -> list:  # type: ignore[type-arg]
    return CachedFacts(gpu_codes=list(labels)).codes()


@pytest.mark.parametrize(
    ("value", "labels", "verdict"),
    [
        ("120_real", ["sm_120a"], "holds"),  # sm_120a runs on exactly 12.0
        ("121_real", ["sm_120a"], "false"),  # ... and on nothing else
        ("121_real", ["sm_120"], "holds"),  # plain sm_120 SASS runs on 12.1
        ("100_real", ["sm_100f"], "holds"),
        ("103_real", ["sm_100f"], "holds"),  # the family runs on 10.3
        ("90_real", ["sm_80", "compute_80"], "false"),  # PTX does not make a SASS claim true
        ("90_virtual", ["compute_80"], "holds"),  # PTX 8.0 JITs forward to 9.0
        ("90_virtual", ["compute_90a"], "holds"),
        ("100_virtual", ["compute_90a"], "false"),  # 9.0a PTX JITs to 9.0 only
        ("120a_real", ["sm_120"], "false"),  # an arch-specific claim wants that code
        ("120a_real", ["sm_120a"], "holds"),
        ("sm120", ["sm_120"], "not-audited"),
    ],
)
def test_arch_claims(value: str, labels: list[str], verdict: str) -> None:
    assert audit_arch(value, _codes(*labels), []).verdict == verdict


def test_an_arch_claim_past_the_bytes_read_is_not_called_false() -> None:
    check = audit_arch("120_real", _codes("sm_80"), ["lib/big.so"])
    assert check.verdict == "not-audited" and "lib/big.so" in check.evidence


@pytest.mark.parametrize(
    ("feature", "value", "majors", "verdict"),
    [
        ("cuda_version_lower_bound", "12.8", [12], "holds"),
        ("cuda_version_lower_bound", "12.8", [13], "holds"),
        ("cuda_version_lower_bound", "13.0", [12], "false"),
        ("cuda_version_lower_bound", "13", [12, 13], "false"),
        ("cuda_version_upper_bound", "13", [12], "holds"),
        ("cuda_version_upper_bound", "13", [13], "false"),
        ("cuda_version_upper_bound", "12.9", [12], "holds"),  # the minor is in no soname
        ("cuda_version_upper_bound", "12.9", [13], "false"),
        ("cuda_version_upper_bound", "13", [], "not-audited"),  # static runtime
        ("cuda_version_upper_bound", "thirteen", [12], "not-audited"),
    ],
)
def test_cuda_bound_claims(feature: str, value: str, majors: list[int], verdict: str) -> None:
    found = {m: [f"x.so needs libcudart.so.{m}"] for m in majors}
    assert audit_cuda(feature, value, found).verdict == verdict


def test_labels_and_variant_json_are_read_by_variantlib() -> None:
    assert variant_label("vkern-1.0-cp310-abi3-manylinux2014_x86_64-cu129.whl") == "cu129"
    assert variant_label("vkern-1.0-cp310-abi3-manylinux2014_x86_64.whl") is None
    assert variant_label("vkern-1.0-1-cp310-abi3-manylinux2014_x86_64.whl") is None  # a build
    with pytest.raises(VariantFileError, match=r"variant\.json"):
        parse_dist_info(b'{"variants": {}}', "x")
    with pytest.raises(VariantFileError, match=r"variant\.json"):
        parse_dist_info(b"not json", None)
