"""Make a Kimi-K2.5-SHAPED miniature, seeded, offline: the text backbone as SGLang 0.5.17 loads
it for Kimi-K2.5 (`DeepseekV3ForCausalLM`, model_type `deepseek_v3`: MLA attention, routed +
shared experts, the first layer dense, sigmoid/noaux_tc routing) and the published INT4
checkpoint's quantization format: compressed-tensors `pack-quantized`, INT4 symmetric, group 32,
routed experts only (attention, shared experts, the dense MLP and lm_head are in `ignore`).

    python make_kimi_mini.py OUT [--layers 4 --experts 16 --vocab 32000 --seed 0 --device cuda]

Per layer the shapes are Kimi-K2.5's own (hidden 7168, 64 heads, q_lora 1536, kv_lora 512,
rope 64 / nope 128 / v 128, expert width 2048, dense width 18432, 8 experts a token, one shared
expert); only the layer count, the routed expert count and the vocabulary are small. The INT4
expert weights are quantized and packed by the `compressed-tensors` library
(`PackedQuantizationCompressor.compress`), the format SGLang's `CompressedTensorsWNA16MoE`
(Marlin) reads. The tokenizer is make_tiny_model.py's BPE (same Python -> same tokenizer).
Runs under the serving env's interpreter (torch, transformers, tokenizers, compressed-tensors,
safetensors). Weights are drawn from one seeded generator on the named device, in a fixed order.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

HIDDEN, HEADS, Q_LORA, KV_LORA = 7168, 64, 1536, 512
ROPE, NOPE, V_HEAD = 64, 128, 128
MOE_WIDTH, DENSE_WIDTH, TOPK = 2048, 18432, 8
GROUP = 32

# Kimi-K2.5's quantization_config (text backbone), as its INT4 checkpoint publishes it.
QUANT_IGNORE = [
    "lm_head",
    "re:.*self_attn.*",
    "re:.*shared_experts.*",
    "re:.*mlp\\.(gate|up|gate_up|down)_proj.*",
]


def quantization_config() -> dict[str, Any]:
    weights = {
        "num_bits": 4, "type": "int", "symmetric": True, "strategy": "group",
        "group_size": GROUP, "dynamic": False, "actorder": None, "block_structure": None,
        "observer": "minmax", "observer_kwargs": {},
    }  # fmt: skip
    return {
        "quant_method": "compressed-tensors",
        "format": "pack-quantized",
        "quantization_status": "compressed",
        "config_groups": {
            "group_0": {
                "targets": ["Linear"],
                "weights": weights,
                "input_activations": None,
                "output_activations": None,
            }
        },
        "ignore": QUANT_IGNORE,
        "kv_cache_scheme": None,
    }


def model_config(layers: int, experts: int, vocab: int) -> dict[str, Any]:
    return {
        "architectures": ["DeepseekV3ForCausalLM"],
        "model_type": "deepseek_v3",
        "vocab_size": vocab,
        "hidden_size": HIDDEN,
        "intermediate_size": DENSE_WIDTH,
        "moe_intermediate_size": MOE_WIDTH,
        "num_hidden_layers": layers,
        "num_attention_heads": HEADS,
        "num_key_value_heads": HEADS,
        "q_lora_rank": Q_LORA,
        "kv_lora_rank": KV_LORA,
        "qk_rope_head_dim": ROPE,
        "qk_nope_head_dim": NOPE,
        "v_head_dim": V_HEAD,
        "n_routed_experts": experts,
        "n_shared_experts": 1,
        "num_experts_per_tok": TOPK,
        "first_k_dense_replace": 1,
        "moe_layer_freq": 1,
        "n_group": 1,
        "topk_group": 1,
        "topk_method": "noaux_tc",
        "scoring_func": "sigmoid",
        "norm_topk_prob": True,
        "routed_scaling_factor": 2.827,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-6,
        "max_position_embeddings": 131072,
        "rope_theta": 50000.0,
        "rope_scaling": {
            "type": "yarn",
            "factor": 32.0,
            "original_max_position_embeddings": 4096,
            "beta_fast": 1.0,
            "beta_slow": 1.0,
            "mscale": 1.0,
            "mscale_all_dim": 1.0,
        },
        "attention_bias": False,
        "attention_dropout": 0.0,
        "tie_word_embeddings": False,
        "num_nextn_predict_layers": 0,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "pad_token_id": 3,
        "torch_dtype": "bfloat16",
        "use_cache": True,
        "quantization_config": quantization_config(),
    }


def make(
    out: Path, layers: int, experts: int, vocab: int, seed: int, device: str
) -> dict[str, Any]:
    import torch
    from compressed_tensors.compressors.pack_quantized.base import PackedQuantizationCompressor
    from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme
    from compressed_tensors.quantization.utils import calculate_qparams
    from make_tiny_model import train_tokenizer
    from safetensors.torch import save_file
    from transformers import GenerationConfig

    tokenizer = train_tokenizer(vocab)
    vocab = len(tokenizer)
    gen = torch.Generator(device=device).manual_seed(seed)
    bf16 = torch.bfloat16
    scheme = QuantizationScheme(
        targets=["Linear"],
        weights=QuantizationArgs(
            num_bits=4, type="int", symmetric=True, strategy="group", group_size=GROUP
        ),
    )
    tensors: dict[str, torch.Tensor] = {}

    def dense(name: str, rows: int, cols: int) -> None:
        w = torch.empty(rows, cols, device=device, dtype=torch.float32)
        w.normal_(0.0, 0.02, generator=gen)
        tensors[name] = w.to(bf16).cpu()

    def norm(name: str, size: int) -> None:
        tensors[name] = torch.ones(size, dtype=bf16)

    def int4(name: str, rows: int, cols: int) -> None:
        w = torch.empty(rows, cols, device=device, dtype=torch.float32)
        w.normal_(0.0, 0.02, generator=gen)
        w = w.to(bf16)
        grouped = w.float().reshape(rows, cols // GROUP, GROUP)
        mins, maxs = grouped.amin(dim=-1), grouped.amax(dim=-1)
        scale, zero_point = calculate_qparams(mins, maxs, scheme.weights)
        state = {"weight": w, "weight_scale": scale.to(bf16), "weight_zero_point": zero_point}
        packed = PackedQuantizationCompressor.compress(state, scheme)
        for key in ("weight_packed", "weight_scale", "weight_shape"):
            tensors[f"{name}.{key}"] = packed[key].contiguous().cpu()

    dense("model.embed_tokens.weight", vocab, HIDDEN)
    for i in range(layers):
        p = f"model.layers.{i}"
        norm(f"{p}.input_layernorm.weight", HIDDEN)
        norm(f"{p}.post_attention_layernorm.weight", HIDDEN)
        a = f"{p}.self_attn"
        dense(f"{a}.q_a_proj.weight", Q_LORA, HIDDEN)
        norm(f"{a}.q_a_layernorm.weight", Q_LORA)
        dense(f"{a}.q_b_proj.weight", HEADS * (NOPE + ROPE), Q_LORA)
        dense(f"{a}.kv_a_proj_with_mqa.weight", KV_LORA + ROPE, HIDDEN)
        norm(f"{a}.kv_a_layernorm.weight", KV_LORA)
        dense(f"{a}.kv_b_proj.weight", HEADS * (NOPE + V_HEAD), KV_LORA)
        dense(f"{a}.o_proj.weight", HIDDEN, HEADS * V_HEAD)
        m = f"{p}.mlp"
        if i == 0:  # first_k_dense_replace = 1
            dense(f"{m}.gate_proj.weight", DENSE_WIDTH, HIDDEN)
            dense(f"{m}.up_proj.weight", DENSE_WIDTH, HIDDEN)
            dense(f"{m}.down_proj.weight", HIDDEN, DENSE_WIDTH)
            continue
        dense(f"{m}.gate.weight", experts, HIDDEN)
        bias = torch.empty(experts, device=device, dtype=torch.float32)
        tensors[f"{m}.gate.e_score_correction_bias"] = bias.normal_(0, 0.01, generator=gen).cpu()
        for e in range(experts):
            int4(f"{m}.experts.{e}.gate_proj", MOE_WIDTH, HIDDEN)
            int4(f"{m}.experts.{e}.up_proj", MOE_WIDTH, HIDDEN)
            int4(f"{m}.experts.{e}.down_proj", HIDDEN, MOE_WIDTH)
        dense(f"{m}.shared_experts.gate_proj.weight", MOE_WIDTH, HIDDEN)
        dense(f"{m}.shared_experts.up_proj.weight", MOE_WIDTH, HIDDEN)
        dense(f"{m}.shared_experts.down_proj.weight", HIDDEN, MOE_WIDTH)
    norm("model.norm.weight", HIDDEN)
    dense("lm_head.weight", vocab, HIDDEN)

    out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    config = model_config(layers, experts, vocab)
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    GenerationConfig(
        do_sample=False, eos_token_id=None, pad_token_id=3, bos_token_id=1
    ).save_pretrained(out)
    tokenizer.save_pretrained(out)
    int4_params = sum(
        int(t[0]) * int(t[1]) for k, t in tensors.items() if k.endswith(".weight_shape")
    )
    bf16_params = sum(t.numel() for k, t in tensors.items() if k.endswith("weight") or "bias" in k)
    return {
        "out": str(out), "architecture": "DeepseekV3ForCausalLM", "layers": layers,
        "routed_experts": experts, "vocab": vocab, "seed": seed, "device": device,
        "int4_params": int4_params, "bf16_params": bf16_params, "tensors": len(tensors),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--experts", type=int, default=16)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    if args.layers < 2 or args.experts < 8:
        parser.error("--layers >= 2 (one dense, then MoE) and --experts >= 8 (8 a token)")
    print(json.dumps(make(args.out, args.layers, args.experts, args.vocab, args.seed, args.device)))


if __name__ == "__main__":
    main()
