"""The manifest model and loader: every mistake reported at once, with file and dotted path."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from stackgate.errors import EXIT_BAD_INPUT, BadInput, ManifestError
from stackgate.manifest import Package
from stackgate.manifest.loading import load_stack

Variant = Callable[[str, str, str], Path]


@pytest.mark.parametrize("stack", ["cu130", "cu128", "cu130-torch210"])
def test_shipped_stacks_load(stack: str) -> None:
    loaded = load_stack(stack)
    assert loaded.manifest.name == stack
    assert loaded.manifest.schema_version == 1


def test_cu130_is_the_field_stack() -> None:
    m = load_stack("cu130").manifest
    torch, kernel = m.package("torch"), m.package("sgl_kernel")
    assert torch is not None and torch.version == "2.9.1+cu130" and torch.index == "pytorch-cu130"
    assert kernel is not None and kernel.version == "0.3.21+cu130"
    assert m.host.target_archs == ["12.0a"] and m.python == "3.12"
    assert "flashinfer-python==0.6.4" in m.overrides
    pcie = m.env_for("pcie")
    assert pcie["NCCL_PROTO"] == "LL" and pcie["NCCL_NTHREADS"] == "512"
    assert "NCCL_PROTO" not in m.env_for("nvlink")  # tuning belongs to the topology
    eagle = m.serving["kimi-k25-tp8-eagle3"]
    assert eagle.speculative is not None and eagle.speculative.eagle_topk == 1
    assert eagle.env["SGLANG_ENABLE_SPEC_V2"] == "1"
    assert eagle.tp == 8 and eagle.tool_call_parser == "kimi_k2"  # inherited via extends


def test_cuda_major_from_local_tag_or_field() -> None:
    assert Package(version="2.9.1+cu130").cuda_major == 13
    assert Package(version="2.9.1+cu128").cuda_major == 12
    assert Package(version="0.3.21", cuda="12.9").cuda_major == 12
    assert Package(version="0.6.4").cuda_major is None


def _problems(path: Path) -> list[str]:
    with pytest.raises(ManifestError) as info:
        load_stack(path)
    assert info.value.exit_code == EXIT_BAD_INPUT
    return info.value.details


def test_unknown_index_names_file_field_and_suggestion(write_variant: Variant) -> None:
    path = write_variant("bad-index", 'index = "pytorch-cu130"', 'index = "pytorch-cu13"')
    problems = _problems(path)
    assert any(
        p.endswith(
            "bad-index.toml: packages.torch.index: unknown index 'pytorch-cu13'; "
            "did you mean 'pytorch-cu130'?"
        )
        for p in problems
    ), problems


def test_unknown_key_did_you_mean(write_variant: Variant) -> None:
    path = write_variant("typo", "min_driver =", "min_drivr =")
    problems = _problems(path)
    assert any(
        "host.min_drivr: unknown key 'min_drivr'; did you mean 'min_driver'?" in p for p in problems
    ), problems
    assert any("host.min_driver: required field is missing" in p for p in problems), problems


def test_wrong_type_names_value(write_variant: Variant) -> None:
    problems = _problems(write_variant("types", "tp = 8", 'tp = "eight"'))
    assert any(
        "serving.kimi-k25-tp8.tp: Input should be a valid integer (got str 'eight')" in p
        for p in problems
    ), problems


def test_bad_versions_and_archs(write_variant: Variant, stack_dir: Path) -> None:
    path = write_variant("versions", 'version = "2.9.1+cu130"', 'version = "2.9.1 cu130"')
    text = path.read_text().replace('target_archs = ["12.0a"]', 'target_archs = ["sm120"]')
    path.write_text(text)
    problems = _problems(path)
    assert any(
        "packages.torch.version: '2.9.1 cu130' is not a valid PEP 440 version" in p
        for p in problems
    ), problems
    assert any("host.target_archs.0: 'sm120' is not a GPU arch" in p for p in problems), problems


def test_every_error_at_once(write_variant: Variant) -> None:
    path = write_variant("many", 'index = "pytorch-cu130"', 'index = "nope"')
    text = path.read_text()
    text = text.replace('python = "3.12"', "python = 3.12").replace("tp = 8", "tp = 0")
    text = text.replace('NCCL_PROTO = "LL"', "NCCL_PROTO = 1")
    path.write_text(text)
    problems = _problems(path)
    wanted = ["packages.torch.index", "python:", "serving.kimi-k25-tp8.tp", "NCCL_PROTO"]
    for w in wanted:
        assert any(w in p for p in problems), (w, problems)
    assert all(p.startswith(str(path)) or "many.toml" in p for p in problems)


def test_missing_patch_file_and_wrong_sha(write_variant: Variant, stack_dir: Path) -> None:
    path = write_variant("patch", "0000-placeholder-local-patches.patch", "0001-missing.patch")
    assert any(
        "packages.sglang.patches.0.path: patch file 'patches/cu130/0001-missing.patch' not found"
        in p
        for p in _problems(path)
    )
    patch = stack_dir / "patches" / "cu130" / "0000-placeholder-local-patches.patch"
    patch.write_text(patch.read_text() + "\n")  # content changed, pin did not
    problems = _problems(stack_dir / "cu130.toml")
    assert any(
        "packages.sglang.patches.0.sha256:" in p and "the manifest pins" in p for p in problems
    ), problems


def test_invalid_toml(stack_dir: Path) -> None:
    path = stack_dir / "broken.toml"
    path.write_text('schema_version = 1\nname = "broken\n')
    problems = _problems(path)
    assert len(problems) == 1 and "broken.toml: invalid TOML" in problems[0]


def test_missing_sections_and_schema_version(stack_dir: Path) -> None:
    path = stack_dir / "empty.toml"
    path.write_text('schema_version = 3\nname = "empty"\n')
    problems = _problems(path)
    for field in ("schema_version", "description", "python", "host", "packages"):
        assert any(f": {field}:" in p for p in problems), (field, problems)


def test_serving_references(write_variant: Variant) -> None:
    path = write_variant("refs", 'extends = "kimi-k25-tp8"', 'extends = "kimi-k25-tp"')
    text = path.read_text().replace('serve_profile = "kimi-k25-tp8"', 'serve_profile = "kimi"')
    path.write_text(text)
    problems = _problems(path)
    assert any(
        "serving.kimi-k25-tp8-eagle3.extends: unknown serving profile 'kimi-k25-tp'; "
        "did you mean 'kimi-k25-tp8'?" in p
        for p in problems
    ), problems
    assert any("validation.serve_profile: unknown serving profile 'kimi'" in p for p in problems)


def test_name_must_match_file(stack_dir: Path) -> None:
    text = (stack_dir / "cu128.toml").read_text()
    (stack_dir / "other.toml").write_text(text)
    assert any(
        "name: 'cu128' must match the file name 'other'" in p
        for p in _problems(stack_dir / "other.toml")
    )


def test_unknown_stack_name_suggests() -> None:
    with pytest.raises(BadInput, match="unknown stack 'cu13'; did you mean 'cu130'"):
        load_stack("cu13")


def test_env_names_with_a_newline_and_nul_values_are_rejected(write_variant: Variant) -> None:
    """Both used to pass: `$` matched before a trailing newline, and a NUL in a value breaks
    every Python started from the env ("embedded null byte")."""
    path = write_variant("envbad", 'NCCL_PROTO = "LL"', '"NCCL_X\\n" = "1"\nNCCL_PROTO = "L\\u0000L"')
    problems = _problems(path)
    assert any("not valid environment variable names: 'NCCL_X\\n'" in p for p in problems), problems
    assert any("values hold a NUL byte: 'NCCL_PROTO'" in p for p in problems), problems


def test_git_url_that_is_an_option_is_rejected(write_variant: Variant) -> None:
    path = write_variant(
        "gitopt", 'git = "https://github.com/sgl-project/sglang"', 'git = "--upload-pack=touch /tmp/x"'
    )
    problems = _problems(path)
    assert any("'--upload-pack=touch /tmp/x' is not a git URL" in p for p in problems), problems


def test_sm_style_arch_gets_a_did_you_mean(write_variant: Variant) -> None:
    path = write_variant("smarch", 'target_archs = ["12.0a"]', 'target_archs = ["sm_120a"]')
    assert any("did you mean '12.0a'?" in p for p in _problems(path))


def test_removed_timeouts_name_their_replacement(write_variant: Variant) -> None:
    """schema_version 2 refuses the keys version 1 accepted and never read."""
    path = write_variant("oldtimeouts", "check_s = 120", "check_s = 120\nmodel_load_s = 1800")
    path.write_text(path.read_text().replace("schema_version = 1", "schema_version = 2", 1))
    problems = _problems(path)
    assert any(
        "validation.timeouts: model_load_s is now load_timeout_s of the serving "
        "profile" in p
        for p in problems
    ), problems
