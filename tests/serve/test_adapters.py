"""Profiles to argv + env. That every flag exists in the pinned engines' real parsers is
tests/serve/test_upstream_flags.py (network: reads the wheels)."""

from __future__ import annotations

import json

import pytest

from stackgate.errors import BadInput
from stackgate.manifest import ServingProfile
from stackgate.manifest.loading import load_stack
from validators.serve.adapters import build_launch

PCIE_NCCL = {
    "NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "NCCL_P2P_LEVEL": "SYS",
    "NCCL_MAX_NCHANNELS": "16", "NCCL_BUFFSIZE": "16777216", "NCCL_NTHREADS": "512",
}


def _launch(profile: str, topology: str | None = "pcie", port: int = 30000):
    manifest = load_stack("cu130").manifest
    return build_launch(manifest, manifest.serving[profile], python="/envs/cu130/bin/python",
                        host="127.0.0.1", port=port, topology=topology)


def test_kimi_k25_tp8_argv_and_env() -> None:
    spec = _launch("kimi-k25-tp8")
    assert spec.argv == [
        "/envs/cu130/bin/python", "-m", "sglang.launch_server",
        "--model-path", "/models/moonshotai/Kimi-K2.5",
        "--tp-size", "8",
        "--served-model-name", "kimi-k2.5",
        "--attention-backend", "flashinfer",
        "--cuda-graph-max-bs", "128",
        "--trust-remote-code",
        "--tool-call-parser", "kimi_k2",
        "--reasoning-parser", "kimi_k2",
        "--host", "127.0.0.1", "--port", "30000",
    ]
    for key, value in PCIE_NCCL.items():
        assert spec.env[key] == value
    assert spec.env["FLASHINFER_CUDA_ARCH_LIST"] == "12.0a"
    assert spec.env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert "SGLANG_ENABLE_SPEC_V2" not in spec.env
    assert spec.ready_pattern == "The server is fired up and ready to roll!"
    assert spec.health_path == "/health" and spec.model == "kimi-k2.5"
    assert spec.base_url == "http://127.0.0.1:30000"


def test_kimi_k25_eagle3_adds_speculative_flags_and_spec_v2() -> None:
    spec = _launch("kimi-k25-tp8-eagle3")
    tail = spec.argv[spec.argv.index("--speculative-algorithm"):]
    assert tail[:10] == [
        "--speculative-algorithm", "EAGLE3",
        "--speculative-draft-model-path", "/models/Kimi-K2.5-EAGLE3",
        "--speculative-num-steps", "3",
        "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "4",
    ]
    assert spec.env["SGLANG_ENABLE_SPEC_V2"] == "1"
    assert spec.argv[:spec.argv.index("--speculative-algorithm")] == _launch("kimi-k25-tp8").argv[:-4]


def test_nvlink_topology_leaves_the_pcie_nccl_profile_out() -> None:
    env = _launch("kimi-k25-tp8", topology="nvlink").env
    assert not set(PCIE_NCCL) & set(env)


def _profile(**fields: object) -> ServingProfile:
    return ServingProfile.model_validate({"model_path": "/m", **fields})


def test_eagle3_without_draft_path_is_refused_before_launch() -> None:
    manifest = load_stack("cu130").manifest
    bad = _profile(speculative={"algorithm": "EAGLE3", "num_steps": 3})
    with pytest.raises(BadInput) as err:
        build_launch(manifest, bad, python="p", host="127.0.0.1", port=1)
    assert "draft_model_path" in err.value.details[0]


def test_spec_v2_with_topk_above_one_is_refused() -> None:
    manifest = load_stack("cu130").manifest
    bad = _profile(speculative={"algorithm": "EAGLE3", "draft_model_path": "/d", "eagle_topk": 4},
                   env={"SGLANG_ENABLE_SPEC_V2": "1"})
    with pytest.raises(BadInput) as err:
        build_launch(manifest, bad, python="p", host="127.0.0.1", port=1)
    assert "topk = 1" in err.value.details[0]


def test_vllm_argv_for_the_same_profile() -> None:
    manifest = load_stack("cu130").manifest
    kimi = manifest.serving["kimi-k25-tp8-eagle3"].model_copy(update={"engine": "vllm"})
    spec = build_launch(manifest, kimi, python="py", host="127.0.0.1", port=8000)
    argv = spec.argv
    assert argv[:5] == ["py", "-m", "vllm.entrypoints.openai.api_server", "--model",
                        "/models/moonshotai/Kimi-K2.5"]
    assert argv[argv.index("--tensor-parallel-size") + 1] == "8"
    assert argv[argv.index("--attention-backend") + 1] == "FLASHINFER"
    assert "--enable-auto-tool-choice" in argv
    config = json.loads(argv[argv.index("--speculative-config") + 1])
    assert config == {"method": "eagle3", "model": "/models/Kimi-K2.5-EAGLE3",
                      "num_speculative_tokens": 4}
    assert spec.notes and "cuda_graph_max_bs" in spec.notes[0]
    assert spec.ready_pattern == r"Application startup complete\."


def test_openai_command_placeholders() -> None:
    manifest = load_stack("cu130").manifest
    prof = _profile(engine="openai-command", served_model_name="tiny",
                    command=["{bin}/transformers", "serve", "--port", "{port}", "--host", "{host}",
                             "{model_path}", "--name={served_model_name}"],
                    extra_args=["--x"])
    spec = build_launch(manifest, prof, python="/e/bin/python", host="127.0.0.1", port=4242)
    assert spec.argv == ["/e/bin/transformers", "serve", "--port", "4242", "--host", "127.0.0.1",
                         "/m", "--name=tiny", "--x"]
    assert spec.ready_pattern is None and spec.model == "tiny"


def test_openai_command_needs_a_command() -> None:
    manifest = load_stack("cu130").manifest
    with pytest.raises(BadInput):
        build_launch(manifest, _profile(engine="openai-command"), python="p", host="h", port=1)
