"""A FULL-DEPTH Kimi-K2.5-shaped model folder for SGLang's `--load-format dummy`: config.json
(61 layers, Kimi's MLA, expert and dense widths, 8 experts a token, INT4 compressed-tensors
routed experts as Kimi's checkpoint publishes them), the tokenizer and generation config; no
weights file. SGLang 0.5.17's DummyModelLoader builds the model from the config and fills the
floating-point parameters with uniform(-1e-3, 1e-3); the packed INT4 expert weights keep
whatever the allocation held (timing does not depend on their values), and the Marlin repack
(process_weights_after_loading) runs as for a real checkpoint.

Only the routed expert count (8 instead of 384: every token still uses 8 experts, Kimi's active
count) and the vocabulary (32,000) are small, so that two servers fit one 80 GB GPU at once.

    python kimi_full_depth.py OUT [--experts 8] [--vocab 32000] [--layers 61] [--bf16-experts]
    python kimi_full_depth.py --estimate [...]   # bytes per server, no files
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "serve"))

from make_kimi_mini import KIMI, TOPK, Shapes, model_config

LAYERS = 61
GIB = 1024**3


def weight_bytes(
    shapes: Shapes, layers: int, experts: int, vocab: int, int4: bool
) -> dict[str, int]:
    """Bytes of the weights SGLang holds (bf16 everywhere but INT4 routed experts: 0.5 byte a
    weight plus one bf16 scale per group of 32)."""
    h, heads = shapes.hidden, shapes.heads
    qk = shapes.nope + shapes.rope
    attn = (h * shapes.q_lora + shapes.q_lora * heads * qk + h * (shapes.kv_lora + shapes.rope)
            + shapes.kv_lora * heads * (shapes.nope + shapes.v_head) + heads * shapes.v_head * h)  # fmt: skip
    expert = 3 * h * shapes.moe_width
    per_expert = expert // 2 + expert // 32 * 2 if int4 else expert * 2
    moe_layers = layers - 1
    return {
        "attention": 2 * attn * layers,
        "dense_mlp": 2 * 3 * h * shapes.dense_width,
        "shared_experts": 2 * expert * moe_layers,
        "routed_experts": per_expert * experts * moe_layers,
        "embeddings": 2 * 2 * vocab * h,
    }


def kv_bytes_per_token(shapes: Shapes, layers: int) -> int:
    """MLA caches the compressed KV (kv_lora + rope) per layer, bf16."""
    return int(2 * (shapes.kv_lora + shapes.rope) * layers)


def write(out: Path, experts: int, vocab: int, layers: int, int4: bool) -> dict[str, Any]:
    from make_tiny_model import train_tokenizer
    from transformers import GenerationConfig

    out.mkdir(parents=True, exist_ok=True)
    tokenizer = train_tokenizer(vocab)
    config = model_config(KIMI, layers, experts, len(tokenizer), int4)
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    GenerationConfig(do_sample=False, eos_token_id=None, pad_token_id=3, bos_token_id=1
                     ).save_pretrained(out)  # fmt: skip
    tokenizer.save_pretrained(out)
    return estimate(experts, len(tokenizer), layers, int4) | {"out": str(out)}


def estimate(experts: int, vocab: int, layers: int, int4: bool) -> dict[str, Any]:
    parts = weight_bytes(KIMI, layers, experts, vocab, int4)
    total = sum(parts.values())
    return {"layers": layers, "routed_experts": experts, "experts_per_token": TOPK,
            "vocab": vocab, "int4_experts": int4, "weights_gib": round(total / GIB, 2),
            "parts_gib": {k: round(v / GIB, 2) for k, v in parts.items()},
            "kv_kib_per_token": round(kv_bytes_per_token(KIMI, layers) / 1024, 1)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out", type=Path, nargs="?")
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--layers", type=int, default=LAYERS)
    ap.add_argument("--bf16-experts", action="store_true", help="no quantization_config")
    ap.add_argument("--estimate", action="store_true")
    args = ap.parse_args()
    if args.experts < TOPK:
        ap.error(f"--experts >= {TOPK} (Kimi routes each token to {TOPK})")
    int4 = not args.bf16_experts
    if args.estimate or args.out is None:
        print(json.dumps(estimate(args.experts, args.vocab, args.layers, int4)))
        return
    print(json.dumps(write(args.out, args.experts, args.vocab, args.layers, int4)))


if __name__ == "__main__":
    main()
