"""Make a Kimi-K2.5-SHAPED miniature, seeded, offline: the text backbone as SGLang 0.5.17 loads
it for Kimi-K2.5 (`DeepseekV3ForCausalLM`, model_type `deepseek_v3`: MLA attention, routed +
shared experts, the first layer dense, sigmoid/noaux_tc routing) and the published INT4
checkpoint's quantization format: compressed-tensors `pack-quantized`, INT4 symmetric, group 32,
routed experts only (attention, shared experts, the dense MLP and lm_head are in `ignore`).

    python make_kimi_mini.py OUT [--layers 4 --experts 16 --vocab 32000 --seed 0 --device cuda]
        [--construction margin|random] [--small --unquantized  (the CPU check)]

Per layer the shapes are Kimi-K2.5's own (hidden 7168, 64 heads, q_lora 1536, kv_lora 512,
rope 64 / nope 128 / v 128, expert width 2048, dense width 18432, 8 experts a token, one shared
expert); only the layer count, the routed expert count and the vocabulary are small. The INT4
expert weights are quantized and packed by the `compressed-tensors` library
(`PackedQuantizationCompressor.compress`), the format SGLang's `CompressedTensorsWNA16MoE`
(Marlin) reads. The tokenizer is make_tiny_model.py's BPE (same Python -> same tokenizer).
Runs under the serving env's interpreter (torch, transformers, tokenizers, compressed-tensors,
safetensors). Weights are drawn from one seeded generator on the named device, in a fixed order.

The default "margin" construction (see LAYER_GAIN below) gives greedy decoding a wide top-1
margin by construction, so two servers of one env agree on greedy outputs; "random" is the
N(0, 0.02) model of machine 1 (same draws), whose near-ties made outputs differ across
restarts. kimi_mini_margins.py checks both on a CPU (fp32 vs bf16 greedy decoding).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

GROUP = 32
TOPK = 8


@dataclass(frozen=True)
class Shapes:
    """Per-layer widths. KIMI: Kimi-K2.5's own; SMALL: the same structure narrow enough to run
    in fp32 and bf16 on a CPU (the margin check, kimi_mini_margins.py)."""

    hidden: int
    heads: int
    q_lora: int
    kv_lora: int
    rope: int
    nope: int
    v_head: int
    moe_width: int
    dense_width: int


KIMI = Shapes(7168, 64, 1536, 512, 64, 128, 128, 2048, 18432)
SMALL = Shapes(256, 4, 64, 32, 16, 32, 32, 128, 512)

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


def model_config(shapes: Shapes, layers: int, experts: int, vocab: int, quant: bool) -> dict[str, Any]:
    config: dict[str, Any] = {
        "architectures": ["DeepseekV3ForCausalLM"],
        "model_type": "deepseek_v3",
        "vocab_size": vocab,
        "hidden_size": shapes.hidden,
        "intermediate_size": shapes.dense_width,
        "moe_intermediate_size": shapes.moe_width,
        "num_hidden_layers": layers,
        "num_attention_heads": shapes.heads,
        "num_key_value_heads": shapes.heads,
        "q_lora_rank": shapes.q_lora,
        "kv_lora_rank": shapes.kv_lora,
        "qk_rope_head_dim": shapes.rope,
        "qk_nope_head_dim": shapes.nope,
        "v_head_dim": shapes.v_head,
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
    }
    if quant:
        config["quantization_config"] = quantization_config()
    return config


# The "margin" construction (the default). A random-weight network has near-ties between its
# top next-token choices, so bf16 kernel-order noise flips greedy choices and outputs diverge
# between two servers of the same env (machine 1: 56-62% exact match across SGLang restarts).
# Here the answer is built in with a wide margin, and every layer still runs and still adds to
# the residual stream:
#  - token embeddings are N(0, 1) rows (RMS 1), the residual stream's main path;
#  - every projection INTO a block has std 1/sqrt(fan_in) (its outputs have RMS ~1), every
#    projection OUT of one (o_proj, the dense / shared / routed experts' down_proj) std
#    LAYER_GAIN/sqrt(fan_in): each block adds about LAYER_GAIN x the embedding's size, in a
#    direction set by its own weights (attention, the INT4 experts the router picks, ...);
#  - lm_head row PERM[t] = LOGIT_SCALE x embedding(t) / hidden: after the final RMSNorm, the
#    next token's logit is ~LOGIT_SCALE x cos(residual, embedding(t)), every other token's
#    ~LOGIT_SCALE x N(0, 1/sqrt(hidden)). So greedy decoding walks a fixed permutation of the
#    vocabulary (special tokens 0-3 map to themselves), with a top-1 margin of many logits,
#    far above bf16 noise, while the logits' values depend on every layer's output.
LAYER_GAIN = 0.25
LOGIT_SCALE = 32.0
SPECIAL = 4  # <unk> <s> </s> <pad>


def permutation(vocab: int, seed: int) -> list[int]:
    """Next token of each token in the margin construction, seeded; the special tokens map to
    themselves (a prompt never ends on one)."""
    import random

    rest = list(range(SPECIAL, vocab))
    shuffled = rest[:]
    random.Random(seed).shuffle(shuffled)
    table = list(range(vocab))
    for token, nxt in zip(rest, shuffled, strict=True):
        table[token] = nxt
    return table


def make(
    out: Path,
    layers: int,
    experts: int,
    vocab: int,
    seed: int,
    device: str,
    *,
    shapes: Shapes = KIMI,
    construction: str = "margin",
    quant: bool = True,
) -> dict[str, Any]:
    """Write the model. quant=False writes the routed experts as bf16 weights that went through
    the same INT4 group grid (quantized and dequantized here, no library), for transformers
    on a CPU; quant=True packs them with the compressed-tensors library for SGLang."""
    import torch
    from make_tiny_model import train_tokenizer
    from safetensors.torch import save_file
    from transformers import GenerationConfig

    tokenizer = train_tokenizer(vocab)
    vocab = len(tokenizer)
    gen = torch.Generator(device=device).manual_seed(seed)
    bf16 = torch.bfloat16
    margin = construction == "margin"
    h = shapes.hidden
    tensors: dict[str, torch.Tensor] = {}
    pack = _packer() if quant else None

    def draw(rows: int, cols: int, std: float) -> torch.Tensor:
        w = torch.empty(rows, cols, device=device, dtype=torch.float32)
        return w.normal_(0.0, std, generator=gen)

    def std(cols: int, out_proj: bool = False) -> float:
        if not margin:
            return 0.02
        return (LAYER_GAIN if out_proj else 1.0) / cols**0.5

    def dense(name: str, rows: int, cols: int, out_proj: bool = False) -> None:
        tensors[name] = draw(rows, cols, std(cols, out_proj)).to(bf16).cpu()

    def norm(name: str, size: int) -> None:
        tensors[name] = torch.ones(size, dtype=bf16)

    def int4(name: str, rows: int, cols: int, out_proj: bool = False) -> None:
        w = draw(rows, cols, std(cols, out_proj)).to(bf16)
        if pack is not None:
            tensors.update({f"{name}.{k}": v for k, v in pack(w).items()})
        else:
            tensors[f"{name}.weight"] = _int4_grid(w).to(bf16).cpu()

    embed = draw(vocab, h, 1.0 if margin else 0.02).to(bf16)
    tensors["model.embed_tokens.weight"] = embed.cpu()
    for i in range(layers):
        p = f"model.layers.{i}"
        norm(f"{p}.input_layernorm.weight", h)
        norm(f"{p}.post_attention_layernorm.weight", h)
        a = f"{p}.self_attn"
        dense(f"{a}.q_a_proj.weight", shapes.q_lora, h)
        norm(f"{a}.q_a_layernorm.weight", shapes.q_lora)
        dense(f"{a}.q_b_proj.weight", shapes.heads * (shapes.nope + shapes.rope), shapes.q_lora)
        dense(f"{a}.kv_a_proj_with_mqa.weight", shapes.kv_lora + shapes.rope, h)
        norm(f"{a}.kv_a_layernorm.weight", shapes.kv_lora)
        dense(f"{a}.kv_b_proj.weight", shapes.heads * (shapes.nope + shapes.v_head), shapes.kv_lora)
        dense(f"{a}.o_proj.weight", h, shapes.heads * shapes.v_head, out_proj=True)
        m = f"{p}.mlp"
        if i == 0:  # first_k_dense_replace = 1
            dense(f"{m}.gate_proj.weight", shapes.dense_width, h)
            dense(f"{m}.up_proj.weight", shapes.dense_width, h)
            dense(f"{m}.down_proj.weight", h, shapes.dense_width, out_proj=True)
            continue
        tensors[f"{m}.gate.weight"] = draw(experts, h, 0.02).to(bf16).cpu()
        bias = torch.empty(experts, device=device, dtype=torch.float32)
        tensors[f"{m}.gate.e_score_correction_bias"] = bias.normal_(0, 0.01, generator=gen).cpu()
        for e in range(experts):
            int4(f"{m}.experts.{e}.gate_proj", shapes.moe_width, h)
            int4(f"{m}.experts.{e}.up_proj", shapes.moe_width, h)
            int4(f"{m}.experts.{e}.down_proj", h, shapes.moe_width, out_proj=True)
        dense(f"{m}.shared_experts.gate_proj.weight", shapes.moe_width, h)
        dense(f"{m}.shared_experts.up_proj.weight", shapes.moe_width, h)
        dense(f"{m}.shared_experts.down_proj.weight", h, shapes.moe_width, out_proj=True)
    norm("model.norm.weight", h)
    if margin:
        nxt = torch.tensor(permutation(vocab, seed), device=device)
        head = torch.empty(vocab, h, device=device, dtype=bf16)
        head[nxt] = (embed.float() * (LOGIT_SCALE / h)).to(bf16)
        tensors["lm_head.weight"] = head.cpu()
    else:
        dense("lm_head.weight", vocab, h)

    out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    config = model_config(shapes, layers, experts, vocab, quant)
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
        "construction": construction, "layer_gain": LAYER_GAIN if margin else None,
        "logit_scale": LOGIT_SCALE if margin else None, "quantized": quant,
        "hidden": h, "int4_params": int4_params, "bf16_params": bf16_params,
        "tensors": len(tensors),
    }  # fmt: skip


def _int4_grid(w: Any) -> Any:
    """Symmetric INT4, group GROUP along the input dim: quantized and dequantized (the values
    the INT4 kernels see, up to the scale's own rounding), for the unquantized CPU copy."""
    rows, cols = w.shape
    g = w.float().reshape(rows, cols // GROUP, GROUP)
    scale = g.abs().amax(dim=-1, keepdim=True).clamp(min=1e-8) / 7.5
    return ((g / scale).round().clamp(-8, 7) * scale).reshape(rows, cols)


def _packer() -> Any:
    """compressed-tensors' own INT4 pack (the published checkpoint's format)."""
    import torch
    from compressed_tensors.compressors.pack_quantized.base import PackedQuantizationCompressor
    from compressed_tensors.quantization import QuantizationArgs, QuantizationScheme
    from compressed_tensors.quantization.utils import calculate_qparams

    scheme = QuantizationScheme(
        targets=["Linear"],
        weights=QuantizationArgs(
            num_bits=4, type="int", symmetric=True, strategy="group", group_size=GROUP
        ),
    )

    def pack(w: torch.Tensor) -> dict[str, torch.Tensor]:
        rows, cols = w.shape
        grouped = w.float().reshape(rows, cols // GROUP, GROUP)
        mins, maxs = grouped.amin(dim=-1), grouped.amax(dim=-1)
        assert scheme.weights is not None
        scale, zero_point = calculate_qparams(mins, maxs, scheme.weights)
        state = {"weight": w, "weight_scale": scale.to(torch.bfloat16), "weight_zero_point": zero_point}
        packed = PackedQuantizationCompressor.compress(state, scheme)
        return {k: packed[k].contiguous().cpu() for k in ("weight_packed", "weight_scale", "weight_shape")}

    return pack


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out", type=Path)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--experts", type=int, default=16)
    parser.add_argument("--vocab", type=int, default=32000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--construction",
        choices=("margin", "random"),
        default="margin",
        help="margin (default): greedy answers built in with a wide logit margin; random: "
        "N(0, 0.02) everywhere (machine 1's model, whose greedy outputs are not reproducible)",
    )
    parser.add_argument("--small", action="store_true", help="CPU-sized widths (SMALL)")
    parser.add_argument(
        "--unquantized",
        action="store_true",
        help="experts as bf16 on the INT4 grid, no quantization_config (transformers on CPU)",
    )
    args = parser.parse_args()
    if args.layers < 2 or args.experts < TOPK:
        parser.error(f"--layers >= 2 (one dense, then MoE) and --experts >= {TOPK} ({TOPK} a token)")
    info = make(
        args.out, args.layers, args.experts, args.vocab, args.seed, args.device,
        shapes=SMALL if args.small else KIMI, construction=args.construction,
        quant=not args.unquantized,
    )  # fmt: skip
    print(json.dumps(info))


if __name__ == "__main__":
    main()
