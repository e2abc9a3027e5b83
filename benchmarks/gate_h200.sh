#!/usr/bin/env bash
# The whole upgrade-gate loop on a lent 2x H200 (issues 16, 18, 13.5), as one background job.
#
#   carry .carry: .carry/gpu (this repo), .carry/tool (pydantic, pyelftools, uv wheels for
#   stackgate itself), .carry/wh (`python -m builder wheelhouse h200-transformers --to .carry/wh`)
#   device run: cd .carry/gpu && bash benchmarks/device_session.sh benchmarks/gate_h200.sh 560
#
# Steps (each timed in steps.log), results under $RES, tarred to $RES.tgz at the end:
#  1. stackgate's own deps from wheels; recorded host facts (nvidia-smi, topo, nvcc, pip list)
#  2. builder build h200-transformers: the locked venv from the wheelhouse, offline, layered over
#     the machine's PyTorch site-packages (--base-site); the random 1.03B Llama made on CPUs
#     (seed 0, bf16) meanwhile, so every machine makes the same weights
#  3. issue 18: runtime group of cu130 on the machine's torch env at 2 ranks (--option ranks=2,
#     the profile is TP 8), PCIe profile vs NCCL defaults, symm-mem, SGLang decisions
#  4. issue 13.5: the gpu-marked probe tests (pytest), beside the reference run of step 5
#  5. the greedy reference (serve-bench --record-reference), once
#  6. baseline: 8 `validators run` of the stack over 4 concurrent streams (2 per GPU, 8 cores
#     each) where NVML attributes GPU memory to PIDs, else 2 (one per GPU, 16 cores each)
#  7. mark-good the 8 runs, export the record
#  8. passing candidate: 8 more runs of the same env, same layout; gate -> must pass
#  9. regressing candidate: the same env served without continuous batching
#     (benchmarks/gate_h200/nocb/h200-transformers.toml), same layout; gate -> must refuse
# NVLink multicast stays off (NCCL_NVLS_ENABLE=0 etc.; the probes force it too).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
REPO=$PWD
CARRY=$(dirname "$REPO")
RES=${RES:-/tmp/sg/res}
mkdir -p "$RES"/host "$RES"/runs
T0=$(date +%s)
step() { echo "== $(($(date +%s) - T0)) s: $*" | tee -a "$RES/steps.log"; }

step "tool wheels"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
  "$CARRY"/tool/*.whl >"$RES/host/pip-tool.log" 2>&1 || { step "tool wheels FAILED"; exit 3; }
# shellcheck source=benchmarks/device_env.sh
. "$REPO/benchmarks/device_env.sh"
# taskset where the image has it; otherwise run unpinned (and say so)
if command -v taskset >/dev/null; then pin() { taskset -c "$@"; }; else
  echo "no taskset: runs are not pinned to cores" | tee -a "$RES/steps.log"; pin() { shift; "$@"; }; fi

step "host facts"
nvidia-smi --query-gpu=index,name,driver_version,compute_cap,memory.used,memory.total,pci.bus_id \
  --format=csv >"$RES/host/nvidia-smi-before.csv" 2>&1
nvidia-smi topo -m >"$RES/host/nvidia-smi-topo.txt" 2>&1
nvcc --version >"$RES/host/nvcc-version.txt" 2>&1
uv --version >"$RES/host/uv-version.txt" 2>&1
nproc >"$RES/host/nproc.txt"; head -3 /proc/meminfo >"$RES/host/meminfo.txt"
python3 -m pip list 2>/dev/null | grep -i -E "^(torch|transformers|nvidia-nccl|accelerate|tokenizers|safetensors) " \
  >"$RES/host/pip-list.txt"

step "NVML per-process memory probe: 4 concurrent streams (2 per GPU) only if NVML attributes memory to PIDs"
# teardown tells a neighbour's server from a leak by NVML's per-process memory; without it only
# one run per GPU at a time can prove its memory came back.
STREAMS=$(python3 - 2>"$RES/host/nvml-probe.err" <<'EOF'
import os, torch, pynvml
x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda:0"); torch.cuda.synchronize()
pynvml.nvmlInit(); h = pynvml.nvmlDeviceGetHandleByIndex(0)
mine = [p.usedGpuMemory for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h) if p.pid == os.getpid()]
print(4 if mine and mine[0] else 2)
EOF
)
[ "$STREAMS" = 4 ] || STREAMS=2
echo "streams=$STREAMS" | tee -a "$RES/steps.log"

step "model on CPUs (cores 16-31, background) + build"
mkdir -p /tmp/stackgate-h200
pin 16-31 "$MPY" tests/serve/make_tiny_model.py /tmp/stackgate-h200/llama-1b \
  --hidden 2048 --intermediate 5632 --layers 22 --heads 32 --kv-heads 4 --vocab 32000 \
  --device cpu --dtype bfloat16 >"$RES/model.txt" 2>&1 &
MODEL_PID=$!
python3 -m builder build h200-transformers --wheelhouse "$CARRY/wh" --base-site "$SITE" \
  --python "$MPY" --json >"$RES/build.json" 2>"$RES/build.err"
echo "build rc=$?" | tee -a "$RES/steps.log"
ENV=$STACKGATE_VENV_ROOT/h200-transformers/current
cp "$ENV/stackgate/build-record.json" "$RES/build-record.json" 2>/dev/null

if [ -z "${SKIP_PROBES:-}" ]; then
step "issue 18: runtime cu130 at 2 ranks (cores 0-15), PCIe profile vs NCCL defaults"
pin 0-15 timeout 300 $SG run cu130 --env "$(dirname "$(dirname "$MPY")")" --only runtime \
  --topology pcie --keep-going --out-dir "$RES/rt18" --option ranks=2 --option nccl_iters=300 \
  --option probe_timeout=120 --json >"$RES/runtime18.json" 2>"$RES/runtime18.err"
echo "runtime18 rc=$?" | tee -a "$RES/steps.log"
fi
wait $MODEL_PID; echo "model rc=$?" | tee -a "$RES/steps.log"

step "5 + 4: greedy reference on GPU0 || gpu-marked probe tests"
REF="$REPO/stacks/references/h200-transformers-tf-cb.json"
CUDA_VISIBLE_DEVICES=0 pin 0-15 timeout 300 $SG serve-bench h200-transformers --env "$ENV" \
  --record-reference "$REF" --out-dir "$RES/ref" --json >"$RES/ref.json" 2>"$RES/ref.err" &
REF_PID=$!
mkdir -p "$RES/probes_gpu"
[ -n "${SKIP_PROBES:-}" ] || STACKGATE_GPU_PYTHON=$MPY pin 16-31 timeout 400 python3 -m pytest -p no:cacheprovider -W default \
  tests/validators/test_probes_gpu.py -v -rs --junitxml "$RES/probes_gpu/junit.xml" \
  >"$RES/probes_gpu/pytest.txt" 2>&1
echo "pytest gpu rc=$?" | tee -a "$RES/steps.log"
wait $REF_PID; echo "reference rc=$?" | tee -a "$RES/steps.log"

streams() {  # phase manifest: 8 runs over $STREAMS streams, stream s on GPU s%2, own cores
  local phase=$1 manifest=$2 per=$((8 / STREAMS)) width=$((32 / STREAMS))
  mkdir -p "$RES/runs/$phase"
  for s in $(seq 0 $((STREAMS - 1))); do
    (
      for i in $(seq 1 "$per"); do
        CUDA_VISIBLE_DEVICES=$((s % 2)) pin $((s * width))-$((s * width + width - 1)) timeout 400 \
          $SG run "$manifest" --env "$ENV" --keep-going --json \
          --out-dir "/tmp/sg/out/$phase/s$s-r$i" >"$RES/runs/$phase/s$s-r$i.json" \
          2>"$RES/runs/$phase/s$s-r$i.err"
        echo "$phase s$s r$i rc=$?" >>"$RES/steps.log"
      done
    ) &
  done
  wait
}

step "6: baseline, 8 runs over $STREAMS streams"
streams base h200-transformers
step "7: mark-good"
mkdir -p "$RES/records"
$SG mark-good h200-transformers $(for f in "$RES"/runs/base/*.json; do echo --run "$f"; done) \
  --env "$ENV" --export "$RES/records" --json \
  --note "EXAMPLE of the stackgate loop on a lent 2x H200 (SM90, NVLink), not a claim about SM120 or Kimi-K2.5. The env is the locked serving venv layered over the machine image's site-packages ($SITE): torch, transformers and the rest listed under build.raw.base_site were NOT built from the lock. Runs: $STREAMS concurrent streams (stream s on GPU s%2, 32/$STREAMS cores each)." \
  >"$RES/mark-good.json" 2>"$RES/mark-good.err"
echo "mark-good rc=$?" | tee -a "$RES/steps.log"

step "8: passing candidate (same env re-run), 8 runs over $STREAMS streams"
streams pass h200-transformers
$SG gate h200-transformers $(for f in "$RES"/runs/pass/*.json; do echo --run "$f"; done) \
  --baseline h200-transformers --env "$ENV" --html "$RES/gate-pass.html" --all --json \
  >"$RES/gate-pass.json" 2>"$RES/gate-pass.err"
echo "gate pass rc=$?" | tee -a "$RES/steps.log"

step "9: regressing candidate (no continuous batching), 8 runs over $STREAMS streams"
NOCB=benchmarks/gate_h200/nocb/h200-transformers.toml
streams nocb "$NOCB"
$SG gate "$NOCB" $(for f in "$RES"/runs/nocb/*.json; do echo --run "$f"; done) \
  --baseline h200-transformers --env "$ENV" --html "$RES/gate-nocb.html" --json \
  >"$RES/gate-nocb.json" 2>"$RES/gate-nocb.err"
echo "gate nocb rc=$?" | tee -a "$RES/steps.log"

step "done"
nvidia-smi --query-gpu=index,memory.used --format=csv >"$RES/host/nvidia-smi-after.csv" 2>&1
nvidia-smi --query-compute-apps=pid,used_memory --format=csv >>"$RES/host/nvidia-smi-after.csv" 2>&1
cp "$REF" "$RES/" 2>/dev/null
# server logs of one run per phase (the rest stay behind: the device returns 8 files)
for phase in base pass nocb; do
  cp /tmp/sg/out/$phase/s0-r1/serve-logs/*.log "$RES/runs/$phase/server-s0-r1.log" 2>/dev/null
done
cp -r "$RES" /tmp/sg/final && tar czf /tmp/sg/res.tgz -C /tmp/sg final
touch /tmp/sg/done
