#!/usr/bin/env bash
# serve-bench on a real GPU: `transformers serve` (the engine the H200 image can run: no SGLang
# there, no registry) with a random-weight ~1.1B Llama (TinyLlama shape, bf16) made on the
# machine. Two runs of the same stack: continuous batching (recorded as the known-good
# reference), then plain generate (compared against it). Teardown must see the server's PIDs
# leave NVML and the GPU memory come back. Also runs the harness-accuracy benchmark on this
# machine's cores. Writes logs and results under $OUT.
#
#   bash benchmarks/serve/serve_gpu_h200.sh      (wheels for fastapi/uvicorn/openai/pydantic in .whl-serve)
set -uo pipefail
OUT=${OUT:-/tmp/serve-gpu-out}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
if [ -d .whl-serve ] && [ -z "${SKIP_WHEELS:-}" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl-serve/*.whl || exit 3
  export PYTHONPATH=/tmp/site:$PWD
fi
WORK=${WORK:-/tmp/serve-gpu}
DEVICE=${DEVICE:-cuda:0}
MODEL_ARGS=${MODEL_ARGS:---hidden 2048 --intermediate 5632 --layers 22 --heads 32 --kv-heads 4 --vocab 32000 --device cuda --dtype bfloat16}
mkdir -p $WORK
nvidia-smi --query-gpu=index,name,memory.used,memory.total --format=csv > "$OUT/nvidia-smi-before.csv"
# The image's python3 lives in a venv (/opt/torch/.venv): serve from that environment itself.
ENV=$(dirname "$(dirname "$(command -v python3)")")
[ -e "$ENV/bin/python" ] || ln -s python3 "$ENV/bin/python"
python3 -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__, "gpus", torch.cuda.device_count())' | tee "$OUT/versions.txt"

start=$(date +%s)
python3 tests/serve/make_tiny_model.py $WORK/llama-1b $MODEL_ARGS 2>&1 | tail -1 | tee "$OUT/model.txt"
echo "model made in $(( $(date +%s) - start )) s" | tee -a "$OUT/model.txt"

cat > $WORK/h200.toml <<EOF
schema_version = 1
name = "h200"
description = "transformers serve on one H200, random-weight 1.1B Llama"
python = "3.12"
[host]
min_driver = "580"
cuda = "13.0"
target_archs = ["9.0a"]
[packages]
[environment.common]
NCCL_NVLS_ENABLE = "0"
TORCH_SYMM_MEM_DISABLE_MULTICAST = "1"
HF_HUB_OFFLINE = "1"
[validation]
serve_profile = "tf-cb"
[serving.tf-cb]
engine = "openai-command"
model_path = "$WORK/llama-1b"
command = ["{python}", "-m", "transformers.cli.transformers", "serve", "--host", "{host}", "--port", "{port}", "--device", "$DEVICE", "--dtype", "bfloat16", "--continuous-batching", "--log-level", "info", "{model_path}"]
load_timeout_s = 300
hang_timeout_s = 180
stop_grace_s = 20
[serving.tf-cb.bench]
input_len = 256
output_len = 128
concurrencies = [1, 16, 64]
rounds = 2
single_stream_requests = 4
prompt_format = "text"
ignore_eos = false
request_timeout_s = 300
[serving.tf-plain]
extends = "tf-cb"
command = ["{python}", "-m", "transformers.cli.transformers", "serve", "--host", "{host}", "--port", "{port}", "--device", "$DEVICE", "--dtype", "bfloat16", "--log-level", "info", "{model_path}"]
EOF
cp $WORK/h200.toml "$OUT/h200.toml"

run() {  # profile, extra args...
  local profile=$1; shift
  timeout 280 python3 -m validators serve-bench $WORK/h200.toml --env "$ENV" --profile "$profile" \
    --out-dir $WORK/out-$profile --jsonl "$OUT/serve-bench.jsonl" --json "$@" \
    > "$OUT/result-$profile.json" 2> "$OUT/stderr-$profile.txt"
  echo "$profile exit $?"
  cp $WORK/out-$profile/serve-logs/*.log "$OUT/server-$profile.log" 2>/dev/null
  nvidia-smi --query-gpu=index,memory.used --format=csv,noheader >> "$OUT/nvidia-smi-after.csv"
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader >> "$OUT/nvidia-smi-after.csv"
}
run tf-cb --record-reference "$OUT/reference.json"
run tf-plain --reference "$OUT/reference.json" --concurrency 1
python3 - "$OUT" <<'PY'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
for f in sorted(out.glob("result-*.json")):
    try:
        data = json.loads(f.read_text())
    except ValueError:
        print(f.name, "no JSON"); continue
    for r in data.get("results", []):
        print(f"{f.stem:16} {r['status']:5} {r['check']:36} {r['reason'][:110]}")
PY
[ -n "${SKIP_HARNESS:-}" ] || timeout 150 python3 benchmarks/serve/serve_harness_accuracy.py --out "$OUT/harness_accuracy_h200.json"
# The device returns at most 8 files: everything else travels in one archive.
tar -czf "$OUT/all.tar.gz" -C "$OUT" --exclude all.tar.gz --exclude run.txt . 2>/dev/null
find "$OUT" -type f ! -name all.tar.gz ! -name run.txt ! -name harness_accuracy_h200.json ! -name 'result-*.json' -delete
