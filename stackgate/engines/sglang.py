"""SGLang. Flag names are SGLang 0.5.9's `server_args.py` (tests/serve/test_upstream_flags.py
reads them out of the pinned wheel); full names are used even where argparse would take a prefix (`--tp` works only
because `--tp-size` is the sole option starting with it)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from stackgate.engines.base import EngineProfile

# SGLang 0.5.9 http_server.py:1836, printed after the warm-up request succeeded.
SGLANG_READY = r"The server is fired up and ready to roll!"


@dataclass(frozen=True)
class SGLang:
    name: str = "sglang"
    default_port: int | None = 30000
    ready_pattern: str | None = SGLANG_READY
    packages: tuple[str, ...] = ("sglang", "sgl-kernel", "flashinfer-python", "torch")
    needs_env: bool = True
    loads_onto_gpus: bool = True

    def argv(
        self, profile: EngineProfile, python: str, host: str, port: int
    ) -> tuple[list[str], list[str]]:
        argv = [python, "-m", "sglang.launch_server", "--model-path", profile.model_path]
        argv += ["--tp-size", str(profile.tp)]
        if profile.served_model_name:
            argv += ["--served-model-name", profile.served_model_name]
        if profile.attention_backend:
            argv += ["--attention-backend", profile.attention_backend]
        if profile.cuda_graph_max_bs is not None:
            argv += ["--cuda-graph-max-bs", str(profile.cuda_graph_max_bs)]
        if profile.trust_remote_code:
            argv.append("--trust-remote-code")
        if profile.tool_call_parser:
            argv += ["--tool-call-parser", profile.tool_call_parser]
        if profile.reasoning_parser:
            argv += ["--reasoning-parser", profile.reasoning_parser]
        spec = profile.speculative
        if spec is not None:
            argv += ["--speculative-algorithm", spec.algorithm]
            if spec.draft_model_path:
                argv += ["--speculative-draft-model-path", spec.draft_model_path]
            if spec.num_steps is not None:
                argv += ["--speculative-num-steps", str(spec.num_steps)]
            if spec.eagle_topk is not None:
                argv += ["--speculative-eagle-topk", str(spec.eagle_topk)]
            if spec.num_draft_tokens is not None:
                argv += ["--speculative-num-draft-tokens", str(spec.num_draft_tokens)]
        argv += ["--host", host, "--port", str(port)]
        return argv + list(profile.extra_args), []

    def problems(self, profile: EngineProfile, env: Mapping[str, str]) -> list[str]:
        problems: list[str] = []
        spec = profile.speculative
        if spec is not None and spec.algorithm in ("EAGLE", "EAGLE3") and not spec.draft_model_path:
            # server_args.py:2398-2412: only DeepSeek-family MTP archs default the draft path;
            # KimiK25ForConditionalGeneration is not among them.
            problems.append(f"speculative {spec.algorithm} needs draft_model_path")
        spec_v2 = env.get("SGLANG_ENABLE_SPEC_V2", "").lower() in ("1", "true", "yes")
        if spec is not None and spec_v2 and (spec.eagle_topk or 1) > 1:
            # server_args.py:2369-2389 raises this at startup.
            problems.append("SGLANG_ENABLE_SPEC_V2 only supports speculative eagle_topk = 1")
        return problems


ENGINE = SGLang()
