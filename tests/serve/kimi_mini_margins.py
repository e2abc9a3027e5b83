"""Does greedy decoding of the Kimi miniature survive bf16 noise? (issue 22, CPU proxy)

    python kimi_mini_margins.py WORK [--layers 4 --experts 8 --prompts 16 --tokens 32]

Makes the CPU-sized miniature (make_kimi_mini.py --small --unquantized) in both constructions,
loads each with transformers in fp32 and in bf16, and decodes the same seeded token-id prompts
greedily, one at a time, in both. bf16 against fp32 stands for the kernel-order noise between
two SGLang servers of one env (different reduction orders, batch shapes, prefix-cache hits):
a construction whose greedy outputs agree here has margins above that noise. Prints JSON:
per construction the exact-match rate over prompts, the token agreement (shared prefix over
the length), the smallest top-1 margin (logits, fp32) along the fp32 decode, and how much the
layers weigh: |final residual - embedding| / |embedding| at the decoded positions. Runs under
an interpreter with torch, transformers and tokenizers (the transformers-serve engine env).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))


def decode(model: Any, prompts: list[list[int]], tokens: int) -> tuple[list[list[int]], float]:
    """Greedy continuations and the smallest top-1 minus top-2 logit seen."""
    import torch

    outs: list[list[int]] = []
    smallest = float("inf")
    with torch.no_grad():
        for prompt in prompts:
            ids = torch.tensor([prompt])
            got: list[int] = []
            past = None
            step = ids
            for _ in range(tokens):
                res = model(input_ids=step, past_key_values=past, use_cache=True)
                past = res.past_key_values
                logits = res.logits[0, -1].float()
                top2 = torch.topk(logits, 2).values
                smallest = min(smallest, float(top2[0] - top2[1]))
                nxt = int(torch.argmax(logits))
                got.append(nxt)
                step = torch.tensor([[nxt]])
            outs.append(got)
    return outs, smallest


def layer_weight(model: Any, prompts: list[list[int]]) -> float:
    """Median over positions of |h_L - embedding| / |embedding| (h_L: residual before the final
    norm): how much the layers add to the stream the answer is read from."""
    import torch

    ratios: list[float] = []
    with torch.no_grad():
        for prompt in prompts:
            ids = torch.tensor([prompt])
            res = model(input_ids=ids, output_hidden_states=True)
            emb, last = res.hidden_states[0][0].float(), res.hidden_states[-1][0].float()
            # hidden_states[-1] is after the final norm in transformers; undo by comparing
            # directions: the layers' share is the part of the stream off the embedding's axis
            cos = torch.nn.functional.cosine_similarity(emb, last, dim=-1)
            ratios.extend((torch.sqrt(1 - cos.clamp(-1, 1) ** 2) / cos.clamp(min=1e-6)).tolist())
    ratios.sort()
    return ratios[len(ratios) // 2]


def agreement(a: list[list[int]], b: list[list[int]]) -> tuple[float, float]:
    exact = sum(x == y for x, y in zip(a, b, strict=True)) / len(a)
    shared = []
    for x, y in zip(a, b, strict=True):
        n = 0
        while n < min(len(x), len(y)) and x[n] == y[n]:
            n += 1
        shared.append(n / max(len(x), len(y)))
    return exact, sum(shared) / len(shared)


def check(work: Path, construction: str, args: argparse.Namespace) -> dict[str, Any]:
    import random

    import torch
    from make_kimi_mini import SMALL, make
    from transformers import AutoModelForCausalLM

    out = work / construction
    info = make(
        out, args.layers, args.experts, args.vocab, args.seed, "cpu",
        shapes=SMALL, construction=construction, quant=False,
    )  # fmt: skip
    rng = random.Random(1234)
    prompts = [[rng.randrange(100, info["vocab"]) for _ in range(16)] for _ in range(args.prompts)]
    runs: dict[str, list[list[int]]] = {}
    margins: dict[str, float] = {}
    for dtype in ("float32", "bfloat16"):
        model = AutoModelForCausalLM.from_pretrained(out, dtype=getattr(torch, dtype)).eval()
        runs[dtype], margins[dtype] = decode(model, prompts, args.tokens)
        if dtype == "float32":
            ratio = layer_weight(model, prompts)
    exact, tokens = agreement(runs["float32"], runs["bfloat16"])
    return {
        "construction": construction,
        "exact_match_fp32_vs_bf16": exact,
        "token_agreement_fp32_vs_bf16": round(tokens, 4),
        "min_top1_margin_fp32": round(margins["float32"], 4),
        "min_top1_margin_bf16": round(margins["bfloat16"], 4),
        "layers_off_axis_ratio_median": round(ratio, 4),
        "prompts": args.prompts,
        "tokens": args.tokens,
        "model": info,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("work", type=Path)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--experts", type=int, default=8)
    parser.add_argument("--vocab", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--construction", choices=("margin", "random"), action="append")
    args = parser.parse_args()
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(1)  # one reduction order per dtype on any machine
    kinds = args.construction or ["margin", "random"]
    print(json.dumps({"results": [check(args.work, k, args) for k in kinds]}, indent=1))


if __name__ == "__main__":
    main()
