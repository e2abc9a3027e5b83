"""Compatibility rules as data, evaluated before any download."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version

from stackgate.errors import ManifestError
from stackgate.manifest.loading import load_stack
from stackgate.manifest.rules import HostRuleFacts, StackFacts, evaluate, load_rules


def _fired(stack: str, *, host: HostRuleFacts | None = None, scope: str = "stack") -> dict[str, str]:
    facts = StackFacts.from_manifest(load_stack(stack).manifest, host=host)
    return {f.rule: f.message for f in evaluate(load_rules(), facts, scope=scope)}  # type: ignore[arg-type]


def test_torch_210_refused_naming_both_packages() -> None:
    fired = _fired("cu130-torch210")
    msg = fired["sgl-kernel-0.3.21-needs-torch-2.9"]
    assert "sgl-kernel 0.3.21+cu130" in msg and "torch 2.10.0+cu130" in msg


@pytest.mark.parametrize("stack", ["cu130", "cu128"])
def test_known_good_stacks_have_no_errors(stack: str) -> None:
    facts = StackFacts.from_manifest(load_stack(stack).manifest)
    assert [f.rule for f in evaluate(load_rules(), facts) if f.severity == "error"] == []


def test_sm120_warnings_for_cu130() -> None:
    fired = _fired("cu130")
    assert "KeyError: 12" in fired["sglang-torch-symm-mem-cc12"]
    assert "0.6.17" in fired["flashinfer-allreduce-fusion-sm12x"]
    assert "sm_120" in fired["flashinfer-cubin-0.6-no-sm120"]


def _variant(stack_dir: Path, name: str, *edits: tuple[str, str]) -> str:
    text = (stack_dir / "cu130.toml").read_text().replace('name = "cu130"', f'name = "{name}"')
    for old, new in edits:
        assert old in text
        text = text.replace(old, new)
    path = stack_dir / f"{name}.toml"
    path.write_text(text)
    return str(path)


def _fired_path(path: str, host: HostRuleFacts | None = None, scope: str = "stack") -> set[str]:
    facts = StackFacts.from_manifest(load_stack(path).manifest, host=host)
    rules = load_rules(Path(path).parent / "rules.toml")
    return {f.rule for f in evaluate(rules, facts, scope=scope)}  # type: ignore[arg-type]


def test_cuda12_kernel_beside_cuda13_torch(stack_dir: Path) -> None:
    path = _variant(stack_dir, "mixed", ('version = "0.3.21+cu130"', 'version = "0.3.21+cu129"'))
    assert "kernel-wheel-cuda-major-matches-torch" in _fired_path(path)


def test_cuda13_with_old_min_driver(stack_dir: Path) -> None:
    path = _variant(stack_dir, "olddrv", ('min_driver = "580"', 'min_driver = "575.51"'))
    assert "cuda-13-needs-driver-580" in _fired_path(path)


def test_nvcc_too_old_for_sm12x(stack_dir: Path) -> None:
    path = _variant(
        stack_dir, "oldnvcc", ('min_nvcc_for_jit = "12.9"', 'min_nvcc_for_jit = "12.8"')
    )
    assert "sm12x-jit-needs-nvcc-12.9" in _fired_path(path)


def test_serving_flags_turn_warnings_into_errors(stack_dir: Path) -> None:
    path = _variant(
        stack_dir,
        "flags",
        (
            "cuda_graph_max_bs = 128",
            'cuda_graph_max_bs = 128\nextra_args = ["--enable-torch-symm-mem", '
            '"--enable-flashinfer-allreduce-fusion"]',
        ),
        ('attention_backend = "flashinfer"', 'attention_backend = "trtllm_mla"'),
    )
    fired = _fired_path(path)
    assert {
        "sglang-torch-symm-mem-flag-cc12",
        "flashinfer-allreduce-fusion-flag-sm12x",
        "trtllm-backend-on-sm120",
    } <= fired


def test_triton_sm121a_uses_locked_versions() -> None:
    manifest = load_stack("cu130").manifest
    facts = StackFacts.from_manifest(manifest, locked={"triton": "3.5.1"})
    facts = StackFacts(**{**facts.__dict__, "archs": ("12.1a",)})
    assert "triton-sm121a" in {f.rule for f in evaluate(load_rules(), facts)}
    newer = StackFacts(
        **{**facts.__dict__, "packages": {**facts.packages, "triton": Version("3.6.0")}}
    )
    assert "triton-sm121a" not in {f.rule for f in evaluate(load_rules(), newer)}


def test_host_rules_need_host_facts() -> None:
    assert "host-driver-too-old-for-cuda-13" not in _fired("cu130", scope="all")
    old = HostRuleFacts(driver=Version("575.57.08"), nvcc=Version("12.8"), gpu_ccs=((12, 0),))
    fired = _fired("cu130", host=old, scope="host")
    assert {"host-driver-too-old-for-cuda-13", "host-nvcc-too-old-for-sm12x"} <= set(fired)
    assert "575.57.8" in fired["host-driver-too-old-for-cuda-13"]
    good = HostRuleFacts(driver=Version("590.48.01"), nvcc=Version("13.0"), gpu_ccs=((12, 0),))
    assert _fired("cu130", host=good, scope="host") == {}


def test_rules_file_errors_are_reported(tmp_path: Path) -> None:
    bad = tmp_path / "rules.toml"
    bad.write_text(
        'schema_version = 1\n[[rules]]\nid = "a"\nseverity = "fatal"\nmessage = "m"\n'
        'evidence = "e"\n[rules.when]\npackages = { torch = "2.9" }\n'
    )
    with pytest.raises(ManifestError) as info:
        load_rules(bad)
    text = "\n".join(info.value.details)
    assert "rules.0.severity" in text and "rules.0.when.packages.torch" in text


def test_arch_suffix_exact_condition_is_evaluated(tmp_path: Path) -> None:
    """`when.arch_suffix_exact` was accepted in rules.toml and no rule or test exercised it."""
    rules = tmp_path / "rules.toml"
    rules.write_text(
        'schema_version = 1\n[[rules]]\nid = "exact-cc"\nseverity = "warning"\n'
        'message = "archs {archs}"\nevidence = "test"\n[rules.when]\narch_suffix_exact = true\n'
    )
    cu130 = StackFacts.from_manifest(load_stack("cu130").manifest)  # 12.0a: exact
    assert [f.rule for f in evaluate(load_rules(rules), cu130)] == ["exact-cc"]
    portable = StackFacts.from_manifest(
        load_stack("cu130").manifest.model_copy(
            update={"host": load_stack("cu130").manifest.host.model_copy(
                update={"target_archs": ["12.0"]})}
        )
    )  # fmt: skip
    assert evaluate(load_rules(rules), portable) == []
