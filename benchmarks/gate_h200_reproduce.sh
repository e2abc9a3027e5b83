#!/usr/bin/env bash
# Issue 16.4 on a second, fresh 2x H200 (after the first was given back): rebuild the committed
# h200-transformers record the same way and compare (REPRODUCED / DIFFERS / FAILED), then gate
# the rebuilt env against the record with the baseline re-measured in ABBA order
# (--interleave-with), which cancels the host drift that refused a plain re-run on machine 1.
#   device run: cd .carry/gpu && bash benchmarks/device_session.sh benchmarks/gate_h200_reproduce.sh 560
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
REPO=$PWD
CARRY=$(dirname "$REPO")
RES=${RES:-/tmp/sg/res}
mkdir -p "$RES"/host
T0=$(date +%s)
step() { echo "== $(($(date +%s) - T0)) s: $*" | tee -a "$RES/steps.log"; }
RECORD=$(ls "$REPO"/records/h200-transformers/*.json | head -1)

step "tool wheels"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
  "$CARRY"/tool/*.whl >"$RES/host/pip-tool.log" 2>&1 || { step "tool wheels FAILED"; exit 3; }
export PYTHONPATH="/tmp/site:$REPO" PATH="/tmp/site/bin:$PATH"
export STACKGATE_STATE_DIR=/tmp/sg/state STACKGATE_VENV_ROOT=/tmp/sg/envs
MPY=$(python3 -c 'import sys; print(sys.executable)')
SG="python3 -m validators"
nvidia-smi --query-gpu=index,name,driver_version,compute_cap,memory.used,memory.total,pci.bus_id \
  --format=csv >"$RES/host/nvidia-smi-before.csv" 2>&1
nvidia-smi topo -m >"$RES/host/nvidia-smi-topo.txt" 2>&1
python3 -m pip list 2>/dev/null | grep -i -E "^(torch|transformers|nvidia-nccl) " >"$RES/host/pip-list.txt"

step "model on CPUs (same seed and shape as the record's)"
mkdir -p /tmp/stackgate-h200
"$MPY" tests/serve/make_tiny_model.py /tmp/stackgate-h200/llama-1b \
  --hidden 2048 --intermediate 5632 --layers 22 --heads 32 --kv-heads 4 --vocab 32000 \
  --device cpu --dtype bfloat16 >"$RES/model.txt" 2>&1
echo "model rc=$?" | tee -a "$RES/steps.log"

step "reproduce $(basename "$RECORD") (8 runs, one at a time, GPU 0)"
CUDA_VISIBLE_DEVICES=0 timeout 700 $SG reproduce "$RECORD" --wheelhouse "$CARRY/wh" --python "$MPY" \
  --venv-root /tmp/sg/envs --runs 8 --json >"$RES/reproduce.json" 2>"$RES/reproduce.err"
echo "reproduce rc=$?" | tee -a "$RES/steps.log"
ENV=/tmp/sg/envs/h200-transformers/current
cp "$ENV/stackgate/build-record.json" "$RES/build-record.json" 2>/dev/null

step "gate: the rebuilt env vs the record, baseline re-measured ABBA (4 + 4 runs, GPU 0)"
$SG records import --dir "$REPO/records" >"$RES/import.txt" 2>&1
CUDA_VISIBLE_DEVICES=0 timeout 600 $SG gate h200-transformers --env "$ENV" --interleave-with "$ENV" \
  --baseline "$RECORD" --repeats 4 --min-repeats 4 --html "$RES/gate-rebuilt-abba.html" --all --json \
  >"$RES/gate-rebuilt-abba.json" 2>"$RES/gate-rebuilt-abba.err"
echo "gate abba rc=$?" | tee -a "$RES/steps.log"

step "done"
nvidia-smi --query-gpu=index,memory.used --format=csv >"$RES/host/nvidia-smi-after.csv" 2>&1
cp -r "$RES" /tmp/sg/final && tar czf /tmp/sg/res.tgz -C /tmp/sg final
touch /tmp/sg/done
