#!/usr/bin/env bash
# Issue 16.3 on a lent ONE-GPU H200 (machine 3): the interleaved (ABBA) gate against the committed
# h200-transformers record (made on a 2x H200 NVLink machine), for an equal candidate (must pass)
# and for the no-continuous-batching candidate (must be refused naming metrics).
#
#   carry .carry/gpu2: tool/ (stackgate's own wheels the image lacks), wh/ (the stack's
#   wheelhouse: `python -m builder wheelhouse h200-transformers --to .carry/gpu2/wh`)
#   device run (the driver runs from a COPY outside the tree the next call re-sends):
#     mkdir -p /tmp/sg; [ -d /tmp/sg/repo ] || cp -a . /tmp/sg/repo; cd /tmp/sg/repo &&
#     bash benchmarks/device_session.sh benchmarks/gate_h200_abba.sh 570
#
# Steps (timed in steps.log, epoch seconds too), results under $RES, tarred at the end:
#  1. stackgate's own deps from wheels; host facts (nvidia-smi before, topo, nvcc, pip list)
#  2. builder build h200-transformers from the wheelhouse, offline, over the image's
#     site-packages (--base-site), with the record's --topology (nvlink), as gate_h200.sh;
#     the random 1.03B Llama (seed 0) meanwhile
#  3. gate A: the built env as candidate, the same env as re-measured baseline, 8 ABBA pairs
#     (8 runs a side = the default --min-repeats), default tolerances; every run kept
#  4. gate B: benchmarks/gate_h200/nocb/h200-transformers.toml (same env, no continuous
#     batching) vs the same baseline env, ABBA; 3 pairs (--min-repeats 3) when the driver has
#     run < 760 s, 2 when < 900 s, else skipped: this helper's device time is 1,400 s at most
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
REPO=$PWD
CARRY=$REPO/.carry/gpu2
RES=${RES:-/tmp/sg/res}
mkdir -p "$RES"/host
T0=$(date +%s)
step() { echo "== $(($(date +%s) - T0)) s (epoch $(date +%s)): $*" | tee -a "$RES/steps.log"; }
RECORD=$(ls "$REPO"/records/h200-transformers/*.json | head -1)
NOCB=$REPO/benchmarks/gate_h200/nocb/h200-transformers.toml

step "tool wheels (driver in $REPO)"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
  "$CARRY"/tool/*.whl >"$RES/host/pip-tool.log" 2>&1 || { step "tool wheels FAILED"; touch /tmp/sg/done; exit 3; }
# shellcheck source=benchmarks/device_env.sh
. "$REPO/benchmarks/device_env.sh"

step "host facts"
nvidia-smi --query-gpu=index,name,driver_version,compute_cap,memory.used,memory.total,pci.bus_id,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
  --format=csv >"$RES/host/nvidia-smi-before.csv" 2>&1
nvidia-smi topo -m >"$RES/host/nvidia-smi-topo.txt" 2>&1
nvcc --version >"$RES/host/nvcc-version.txt" 2>&1
uv --version >"$RES/host/uv-version.txt" 2>&1
nproc >"$RES/host/nproc.txt"; head -3 /proc/meminfo >"$RES/host/meminfo.txt"
python3 -m pip list 2>/dev/null | grep -i -E "^(torch|transformers|nvidia-nccl|accelerate|tokenizers|safetensors) " \
  >"$RES/host/pip-list.txt"

step "model on CPUs (background) + build"
mkdir -p /tmp/stackgate-h200
"$MPY" tests/serve/make_tiny_model.py /tmp/stackgate-h200/llama-1b \
  --hidden 2048 --intermediate 5632 --layers 22 --heads 32 --kv-heads 4 --vocab 32000 \
  --device cpu --dtype bfloat16 >"$RES/model.txt" 2>&1 &
MODEL_PID=$!
# The record's env was built with its host's NVLink profile (build.topology): that choice is a
# file in site-packages (_stackgate_env_profile.py), so the same env here needs the same flag,
# as `validators reproduce` passes it (a first try without it hashed differently: exit 2).
TOPO=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['build']['topology'] or '')" "$RECORD")
python3 -m builder build h200-transformers --wheelhouse "$CARRY/wh" --base-site "$SITE" \
  --python "$MPY" ${TOPO:+--topology "$TOPO"} --json >"$RES/build.json" 2>"$RES/build.err"
echo "build rc=$?" | tee -a "$RES/steps.log"
ENV=$STACKGATE_VENV_ROOT/h200-transformers/current
cp "$ENV/stackgate/build-record.json" "$RES/build-record.json" 2>/dev/null
wait $MODEL_PID; echo "model rc=$?" | tee -a "$RES/steps.log"
$SG records import --dir "$REPO/records" >"$RES/import.txt" 2>&1
echo "records import rc=$?" | tee -a "$RES/steps.log"

step "gate A: equal candidate (same env), baseline re-measured ABBA, 8 pairs, default policy"
timeout 1100 $SG gate h200-transformers --env "$ENV" --interleave-with "$ENV" --baseline "$RECORD" \
  --repeats 8 --keep-runs "$RES/runs-equal" --html "$RES/gate-equal-abba.html" --all --json \
  >"$RES/gate-equal-abba.json" 2>"$RES/gate-equal-abba.err"
echo "gate A rc=$?" | tee -a "$RES/steps.log"

EL=$(($(date +%s) - T0))
PAIRS=0
if [ "$EL" -lt 760 ]; then PAIRS=3; elif [ "$EL" -lt 900 ]; then PAIRS=2; fi
if [ "$PAIRS" -gt 0 ]; then
  step "gate B: no continuous batching vs the same baseline env, ABBA, $PAIRS pairs (--min-repeats $PAIRS)"
  timeout 600 $SG gate "$NOCB" --env "$ENV" --interleave-with "$ENV" --baseline "$RECORD" \
    --repeats "$PAIRS" --min-repeats "$PAIRS" --keep-runs "$RES/runs-nocb" \
    --html "$RES/gate-nocb-abba.html" --all --json \
    >"$RES/gate-nocb-abba.json" 2>"$RES/gate-nocb-abba.err"
  echo "gate B rc=$?" | tee -a "$RES/steps.log"
else
  step "gate B skipped: driver at $EL s, not enough device time left"
fi

step "done"
nvidia-smi --query-gpu=index,memory.used,clocks.sm,temperature.gpu,power.draw --format=csv \
  >"$RES/host/nvidia-smi-after.csv" 2>&1
nvidia-smi --query-compute-apps=pid,used_memory --format=csv >>"$RES/host/nvidia-smi-after.csv" 2>&1
# server logs (each child's serve-bench writes /tmp/stackgate-serve-*/serve-logs/): a listing
# in time order with sizes, and the first and last log
ls -1tr /tmp/stackgate-serve-*/serve-logs/*.log >"$RES/server-logs.txt" 2>/dev/null
ls -ltr /tmp/stackgate-serve-*/serve-logs/*.log >"$RES/server-logs-sizes.txt" 2>/dev/null
mkdir -p "$RES/server-logs"
for f in $(head -1 "$RES/server-logs.txt") $(tail -1 "$RES/server-logs.txt"); do
  cp "$f" "$RES/server-logs/$(basename "$(dirname "$(dirname "$f")")")-$(basename "$f")" 2>/dev/null
done
cp -r "$RES" /tmp/sg/final && tar czf /tmp/sg/res.tgz -C /tmp/sg final
touch /tmp/sg/done
