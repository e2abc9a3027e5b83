#!/usr/bin/env bash
# Issue 16.3, machine 4 (ONE lent H200): the equal candidate gated ABBA against the committed
# h200-transformers record with the PRE-REGISTERED policy of stacks/h200-transformers.toml
# [validation.gate] (tolerance, tail tolerance, pairs), derived before this run from machine 3's
# runs only (benchmarks/gate_h200_tolerance.py -> benchmarks/results/gate_h200/tolerance/).
# One attempt, in ONE device call (the session had 618 device-seconds: no second call):
#
#   carry .carry/gpu2 (tool/: stackgate's own wheels the image lacks; wh/: the stack's
#   wheelhouse, `python -m builder wheelhouse h200-transformers --to .carry/gpu2/wh`)
#   device run:  PREREG=<commit> bash benchmarks/gate_h200_prereg.sh   ($OUT/machine4.tgz + gate files)
#
# Steps as benchmarks/gate_h200_abba.sh (steps.log, epoch seconds): stackgate's wheels, host
# facts (nvidia-smi before/after), build over the image's site-packages with the record's
# --topology, the random 1.03B Llama (seed 0), then ONE gate: the built env as candidate and as
# the re-measured baseline, the manifest's [validation.gate] numbers given as flags (why: below),
# every run kept. The gate is cut at GATE_S so the results still come back inside the call's limit.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
REPO=$PWD
CARRY=$REPO/.carry/gpu2
# $OUT returns at most 8 files (/work/.library/device/README.md): machine 4 lost its kept run
# reports and host facts that way. Results go to /tmp/sg/machine4, tarred into $OUT at the end,
# with the gate's JSON/HTML/stderr and steps.log beside the tarball (6 files).
RES=${RES:-/tmp/sg/machine4}
GATE_S=${GATE_S:-470}
mkdir -p "$RES"/host /tmp/sg
T0=$(date +%s)
step() { echo "== $(($(date +%s) - T0)) s (epoch $(date +%s)): $*" | tee -a "$RES/steps.log"; }
RECORD=$(ls "$REPO"/records/h200-transformers/*.json | head -1)

step "pre-registered policy: commit ${PREREG:-unknown}; driver in $REPO"
sed -n '/^\[validation.gate\]/,/^$/p' "$REPO/stacks/h200-transformers.toml" | tee -a "$RES/steps.log"
step "tool wheels"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
  "$CARRY"/tool/*.whl >"$RES/host/pip-tool.log" 2>&1 || { step "tool wheels FAILED"; exit 3; }
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
# the record's env was built with its host's NVLink profile, a file in site-packages
TOPO=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['build']['topology'] or '')" "$RECORD")
python3 -m builder build h200-transformers --wheelhouse "$CARRY/wh" --base-site "$SITE" \
  --python "$MPY" ${TOPO:+--topology "$TOPO"} --json >"$RES/build.json" 2>"$RES/build.err"
echo "build rc=$?" | tee -a "$RES/steps.log"
ENV=$STACKGATE_VENV_ROOT/h200-transformers/current
cp "$ENV/stackgate/build-record.json" "$RES/build-record.json" 2>/dev/null
wait $MODEL_PID; echo "model rc=$?" | tee -a "$RES/steps.log"
$SG records import --dir "$REPO/records" >"$RES/import.txt" 2>&1
echo "records import rc=$?" | tee -a "$RES/steps.log"

# The policy's one home is the manifest's [validation.gate]; it is passed as FLAGS because the
# committed record was proven under a manifest without that table, and since 5df73af the
# working tree's table may only tighten a gate against such a record (validators/gate/
# stack_policy.py under_baseline): read from the manifest alone it would apply 1.25% and
# 8 runs a side to these 4 pairs (TOO_FEW). A flag is the operator's explicit choice, shown in
# the gate's JSON policy.
POLICY=$(python3 -c "import tomllib,sys; g=tomllib.load(open(sys.argv[1],'rb'))['validation']['gate']; print(f\"--tolerance {g['tolerance']} --tail-tolerance {g['tail_tolerance']} --repeats {g['repeats']} --min-repeats {g['repeats']}\")" "$REPO/stacks/h200-transformers.toml")
step "gate: equal candidate (same env), baseline re-measured ABBA, $POLICY"
# shellcheck disable=SC2086
timeout "$GATE_S" $SG gate h200-transformers --env "$ENV" --interleave-with "$ENV" --baseline "$RECORD" \
  $POLICY --keep-runs "$RES/runs-equal" --html "$RES/gate-equal-prereg.html" --all --json \
  >"$RES/gate-equal-prereg.json" 2>"$RES/gate-equal-prereg.err"
echo "gate rc=$?" | tee -a "$RES/steps.log"

step "done"
nvidia-smi --query-gpu=index,memory.used,clocks.sm,temperature.gpu,power.draw --format=csv \
  >"$RES/host/nvidia-smi-after.csv" 2>&1
nvidia-smi --query-compute-apps=pid,used_memory --format=csv >>"$RES/host/nvidia-smi-after.csv" 2>&1
ls -ltr /tmp/stackgate-serve-*/serve-logs/*.log >"$RES/server-logs-sizes.txt" 2>/dev/null
mkdir -p "$RES/server-logs"
for f in $(ls -1tr /tmp/stackgate-serve-*/serve-logs/*.log 2>/dev/null | sed -n '1p;$p'); do
  cp "$f" "$RES/server-logs/$(basename "$(dirname "$(dirname "$f")")")-$(basename "$f")" 2>/dev/null
done
if [ -n "${OUT:-}" ]; then
  tar czf "$OUT/machine4.tgz" -C "$(dirname "$RES")" "$(basename "$RES")"
  cp "$RES"/steps.log "$RES"/gate-equal-prereg.* "$OUT/" 2>/dev/null
fi
