#!/usr/bin/env bash
# The upgrade-gate loop on lent H200s (issues 16, 18, 13.5): one driver, a MODE per machine run.
# Was four near-identical drivers (gate_h200.sh, gate_h200_reproduce.sh, gate_h200_abba.sh,
# gate_h200_prereg.sh; the commits the results name hold them); merged without a GPU run since.
#
#   bash benchmarks/gate_h200/gate_h200.sh MODE [--dry-run]
#
#   loop       machine 1 (2x H200): build, runtime cu130 at 2 ranks (issue 18), the gpu-marked
#              probe tests (13.5), the greedy reference, 8 baseline runs over 4 or 2 concurrent
#              streams, mark-good, 8 runs of the same env (gate must pass), 8 runs served
#              without continuous batching (benchmarks/gate_h200/nocb/; gate must refuse).
#              SKIP_PROBES=1 leaves out steps 3-4.
#   reproduce  machine 2 (fresh 2x H200): `validators reproduce` of the committed record (8 runs,
#              GPU 0), then the rebuilt env gated against it with the baseline re-measured ABBA
#              (--interleave-with, 4 + 4 runs)
#   abba       machine 3 (ONE H200): the built env gated ABBA against the committed record:
#              equal candidate, 8 pairs (must pass); then the no-continuous-batching candidate,
#              3 pairs if the driver is under 760 s, 2 under 900 s, else skipped
#   prereg     machine 4 (ONE H200): the equal candidate gated ABBA with the PRE-REGISTERED
#              policy of stacks/h200-transformers.toml [validation.gate] passed as flags (why:
#              at that step), cut at GATE_S (470) s; PREREG=<commit> names the policy's commit;
#              results to /tmp/sg/machine4, tarred into $OUT with the gate's files beside it
#
#   --dry-run  print the mode's settings and steps and run nothing (a CPU test runs it:
#              tests/validators/test_gate_h200_driver.py)
#
# Carry and device run (loop, reproduce: the repo in .carry/gpu, tool wheels in .carry/tool,
# the wheelhouse in .carry/wh; abba, prereg: .carry/gpu2/{tool,wh} inside the repo):
#   cd .carry/gpu && bash benchmarks/device/device_session.sh benchmarks/gate_h200/gate_h200.sh 560 loop
#   mkdir -p /tmp/sg; [ -d /tmp/sg/repo ] || cp -a . /tmp/sg/repo; cd /tmp/sg/repo &&
#     bash benchmarks/device/device_session.sh benchmarks/gate_h200/gate_h200.sh 570 abba
#   PREREG=<commit> bash benchmarks/gate_h200/gate_h200.sh prereg
# Every step is timed in steps.log (epoch seconds too); NVLink multicast stays off.
set -u
usage() { echo "usage: bash $0 {loop|reproduce|abba|prereg} [--dry-run]" >&2; exit 2; }
MODE=${1:-}
DRY=
case "${2:-}" in --dry-run) DRY=1 ;; "") ;; *) usage ;; esac
[ $# -le 2 ] || usage
case "$MODE" in
  loop)      STEPS="tools host_facts streams_probe build_model runtime18 reference_and_probes baseline mark_good candidate_pass candidate_nocb" ;;
  reproduce) STEPS="tools host_facts model reproduce gate_rebuilt" ;;
  abba)      STEPS="tools host_facts build_model import_records gate_equal_abba gate_nocb_abba" ;;
  prereg)    STEPS="policy_shown tools host_facts build_model import_records gate_equal_prereg" ;;
  *) usage ;;
esac

export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
REPO=$PWD
case "$MODE" in
  loop|reproduce) CARRY=${CARRY:-$(dirname "$REPO")}; RES=${RES:-/tmp/sg/res} ;;
  abba)           CARRY=${CARRY:-$REPO/.carry/gpu2}; RES=${RES:-/tmp/sg/res} ;;
  prereg)         CARRY=${CARRY:-$REPO/.carry/gpu2}; RES=${RES:-/tmp/sg/machine4} ;;
esac
GATE_S=${GATE_S:-470}
NOCB=$REPO/benchmarks/gate_h200/nocb/h200-transformers.toml
MODEL_ARGS=(--hidden 2048 --intermediate 5632 --layers 22 --heads 32 --kv-heads 4 --vocab 32000
  --device cpu --dtype bfloat16)  # the random 1.03B Llama, seed 0: every machine makes the same

if [ -n "$DRY" ]; then
  echo "mode=$MODE repo=$REPO carry=$CARRY res=$RES"
  [ "$MODE" = prereg ] && echo "gate_s=$GATE_S prereg=${PREREG:-unknown}"
  echo "steps: $STEPS"
  exit 0
fi

mkdir -p "$RES"/host /tmp/sg
T0=$(date +%s)
step() { echo "== $(($(date +%s) - T0)) s (epoch $(date +%s)): $*" | tee -a "$RES/steps.log"; }
RECORD=$(ls "$REPO"/records/h200-transformers/*.json 2>/dev/null | head -1)
# taskset where the image has it; otherwise run unpinned (and say so)
if command -v taskset >/dev/null; then pin() { taskset -c "$@"; }; else
  echo "no taskset: runs are not pinned to cores" | tee -a "$RES/steps.log"; pin() { shift; "$@"; }; fi

policy_shown() {
  step "pre-registered policy: commit ${PREREG:-unknown}; driver in $REPO"
  sed -n '/^\[validation.gate\]/,/^$/p' "$REPO/stacks/h200-transformers.toml" | tee -a "$RES/steps.log"
}

tools() {
  step "tool wheels (driver in $REPO, mode $MODE)"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
    "$CARRY"/tool/*.whl >"$RES/host/pip-tool.log" 2>&1 || { step "tool wheels FAILED"; touch /tmp/sg/done; exit 3; }
  # shellcheck source=benchmarks/device/device_env.sh
  . "$REPO/benchmarks/device/device_env.sh"
}

host_facts() {
  step "host facts"
  nvidia-smi --query-gpu=index,name,driver_version,compute_cap,memory.used,memory.total,pci.bus_id,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
    --format=csv >"$RES/host/nvidia-smi-before.csv" 2>&1
  nvidia-smi topo -m >"$RES/host/nvidia-smi-topo.txt" 2>&1
  nvcc --version >"$RES/host/nvcc-version.txt" 2>&1
  uv --version >"$RES/host/uv-version.txt" 2>&1
  nproc >"$RES/host/nproc.txt"; head -3 /proc/meminfo >"$RES/host/meminfo.txt"
  python3 -m pip list 2>/dev/null | grep -i -E "^(torch|transformers|nvidia-nccl|accelerate|tokenizers|safetensors) " \
    >"$RES/host/pip-list.txt"
}

streams_probe() {
  # teardown tells a neighbour's server from a leak by NVML's per-process memory; without it
  # only one run per GPU at a time can prove its memory came back.
  step "NVML per-process memory probe: 4 concurrent streams (2 per GPU) only if NVML attributes memory to PIDs"
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
}

model() {
  step "model on CPUs (same seed and shape as the record's)"
  mkdir -p /tmp/stackgate-h200
  "$MPY" tests/serve/make_tiny_model.py /tmp/stackgate-h200/llama-1b "${MODEL_ARGS[@]}" >"$RES/model.txt" 2>&1
  echo "model rc=$?" | tee -a "$RES/steps.log"
}

build_model() {
  step "model on CPUs (background) + build"
  mkdir -p /tmp/stackgate-h200
  if [ "$MODE" = loop ]; then  # beside runtime18 on cores 0-15; one-GPU machines: unpinned
    pin 16-31 "$MPY" tests/serve/make_tiny_model.py /tmp/stackgate-h200/llama-1b "${MODEL_ARGS[@]}" \
      >"$RES/model.txt" 2>&1 &
  else
    "$MPY" tests/serve/make_tiny_model.py /tmp/stackgate-h200/llama-1b "${MODEL_ARGS[@]}" \
      >"$RES/model.txt" 2>&1 &
  fi
  MODEL_PID=$!
  # Gating against the committed record: its env was built with its host's NVLink profile
  # (build.topology), a file in site-packages (_stackgate_env_profile.py), so the same env
  # here needs the same flag, as `validators reproduce` passes it (without it: exit 2).
  local topo=
  if [ "$MODE" != loop ]; then
    topo=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['build']['topology'] or '')" "$RECORD")
  fi
  python3 -m builder build h200-transformers --wheelhouse "$CARRY/wh" --base-site "$SITE" \
    --python "$MPY" ${topo:+--topology "$topo"} --json >"$RES/build.json" 2>"$RES/build.err"
  echo "build rc=$?" | tee -a "$RES/steps.log"
  ENV=$STACKGATE_VENV_ROOT/h200-transformers/current
  cp "$ENV/stackgate/build-record.json" "$RES/build-record.json" 2>/dev/null
  if [ "$MODE" != loop ]; then wait $MODEL_PID; echo "model rc=$?" | tee -a "$RES/steps.log"; fi
}

runtime18() {
  [ -z "${SKIP_PROBES:-}" ] || return 0
  step "issue 18: runtime cu130 at 2 ranks (cores 0-15), PCIe profile vs NCCL defaults"
  pin 0-15 timeout 300 $SG run cu130 --env "$(dirname "$(dirname "$MPY")")" --only runtime \
    --topology pcie --keep-going --out-dir "$RES/rt18" --option ranks=2 --option nccl_iters=300 \
    --option probe_timeout=120 --json >"$RES/runtime18.json" 2>"$RES/runtime18.err"
  echo "runtime18 rc=$?" | tee -a "$RES/steps.log"
}

reference_and_probes() {
  wait $MODEL_PID; echo "model rc=$?" | tee -a "$RES/steps.log"
  step "5 + 4: greedy reference on GPU0 || gpu-marked probe tests"
  REF="$REPO/stacks/references/h200-transformers-tf-cb.json"
  CUDA_VISIBLE_DEVICES=0 pin 0-15 timeout 300 $SG serve-bench h200-transformers --env "$ENV" \
    --record-reference "$REF" --out-dir "$RES/ref" --json >"$RES/ref.json" 2>"$RES/ref.err" &
  local ref_pid=$!
  mkdir -p "$RES/probes_gpu"
  [ -n "${SKIP_PROBES:-}" ] || STACKGATE_GPU_PYTHON=$MPY pin 16-31 timeout 400 python3 -m pytest -p no:cacheprovider -W default \
    tests/validators/test_probes_gpu.py -v -rs --junitxml "$RES/probes_gpu/junit.xml" \
    >"$RES/probes_gpu/pytest.txt" 2>&1
  echo "pytest gpu rc=$?" | tee -a "$RES/steps.log"
  wait $ref_pid; echo "reference rc=$?" | tee -a "$RES/steps.log"
}

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

runs_of() { for f in "$RES"/runs/"$1"/*.json; do echo --run "$f"; done; }

baseline() {
  step "6: baseline, 8 runs over $STREAMS streams"
  streams base h200-transformers
}

mark_good() {
  step "7: mark-good"
  mkdir -p "$RES/records"
  # shellcheck disable=SC2046
  $SG mark-good h200-transformers $(runs_of base) --env "$ENV" --export "$RES/records" --json \
    --note "EXAMPLE of the stackgate loop on a lent 2x H200 (SM90, NVLink), not a claim about SM120 or Kimi-K2.5. The env is the locked serving venv layered over the machine image's site-packages ($SITE): torch, transformers and the rest listed under build.raw.base_site were NOT built from the lock. Runs: $STREAMS concurrent streams (stream s on GPU s%2, 32/$STREAMS cores each)." \
    >"$RES/mark-good.json" 2>"$RES/mark-good.err"
  echo "mark-good rc=$?" | tee -a "$RES/steps.log"
}

candidate_pass() {
  step "8: passing candidate (same env re-run), 8 runs over $STREAMS streams"
  streams pass h200-transformers
  # shellcheck disable=SC2046
  $SG gate h200-transformers $(runs_of pass) --baseline h200-transformers --env "$ENV" \
    --html "$RES/gate-pass.html" --all --json >"$RES/gate-pass.json" 2>"$RES/gate-pass.err"
  echo "gate pass rc=$?" | tee -a "$RES/steps.log"
}

candidate_nocb() {
  step "9: regressing candidate (no continuous batching), 8 runs over $STREAMS streams"
  streams nocb "$NOCB"
  # shellcheck disable=SC2046
  $SG gate "$NOCB" $(runs_of nocb) --baseline h200-transformers --env "$ENV" \
    --html "$RES/gate-nocb.html" --json >"$RES/gate-nocb.json" 2>"$RES/gate-nocb.err"
  echo "gate nocb rc=$?" | tee -a "$RES/steps.log"
}

reproduce() {
  step "reproduce $(basename "$RECORD") (8 runs, one at a time, GPU 0)"
  CUDA_VISIBLE_DEVICES=0 timeout 700 $SG reproduce "$RECORD" --wheelhouse "$CARRY/wh" --python "$MPY" \
    --venv-root /tmp/sg/envs --runs 8 --json >"$RES/reproduce.json" 2>"$RES/reproduce.err"
  echo "reproduce rc=$?" | tee -a "$RES/steps.log"
  ENV=/tmp/sg/envs/h200-transformers/current
  cp "$ENV/stackgate/build-record.json" "$RES/build-record.json" 2>/dev/null
}

import_records() {
  $SG records import --dir "$REPO/records" >"$RES/import.txt" 2>&1
  echo "records import rc=$?" | tee -a "$RES/steps.log"
}

gate_rebuilt() {
  step "gate: the rebuilt env vs the record, baseline re-measured ABBA (4 + 4 runs, GPU 0)"
  import_records
  CUDA_VISIBLE_DEVICES=0 timeout 600 $SG gate h200-transformers --env "$ENV" --interleave-with "$ENV" \
    --baseline "$RECORD" --repeats 4 --min-repeats 4 --html "$RES/gate-rebuilt-abba.html" --all --json \
    >"$RES/gate-rebuilt-abba.json" 2>"$RES/gate-rebuilt-abba.err"
  echo "gate abba rc=$?" | tee -a "$RES/steps.log"
}

gate_equal_abba() {
  step "gate A: equal candidate (same env), baseline re-measured ABBA, 8 pairs, default policy"
  timeout 1100 $SG gate h200-transformers --env "$ENV" --interleave-with "$ENV" --baseline "$RECORD" \
    --repeats 8 --keep-runs "$RES/runs-equal" --html "$RES/gate-equal-abba.html" --all --json \
    >"$RES/gate-equal-abba.json" 2>"$RES/gate-equal-abba.err"
  echo "gate A rc=$?" | tee -a "$RES/steps.log"
}

gate_nocb_abba() {
  local el=$(($(date +%s) - T0)) pairs=0
  if [ "$el" -lt 760 ]; then pairs=3; elif [ "$el" -lt 900 ]; then pairs=2; fi
  if [ "$pairs" -eq 0 ]; then step "gate B skipped: driver at $el s, not enough device time left"; return 0; fi
  step "gate B: no continuous batching vs the same baseline env, ABBA, $pairs pairs (--min-repeats $pairs)"
  timeout 600 $SG gate "$NOCB" --env "$ENV" --interleave-with "$ENV" --baseline "$RECORD" \
    --repeats "$pairs" --min-repeats "$pairs" --keep-runs "$RES/runs-nocb" \
    --html "$RES/gate-nocb-abba.html" --all --json \
    >"$RES/gate-nocb-abba.json" 2>"$RES/gate-nocb-abba.err"
  echo "gate B rc=$?" | tee -a "$RES/steps.log"
}

gate_equal_prereg() {
  # The policy's one home is the manifest's [validation.gate]; it is passed as FLAGS because
  # the committed record was proven under a manifest without that table, and since 5df73af the
  # working tree's table may only tighten a gate against such a record (validators/gate/
  # stack_policy.py under_baseline): read from the manifest alone it would apply 1.25% and
  # 8 runs a side to these 4 pairs (TOO_FEW). A flag is the operator's explicit choice, shown
  # in the gate's JSON policy.
  local policy
  policy=$(python3 -c "import tomllib,sys; g=tomllib.load(open(sys.argv[1],'rb'))['validation']['gate']; print(f\"--tolerance {g['tolerance']} --tail-tolerance {g['tail_tolerance']} --repeats {g['repeats']} --min-repeats {g['repeats']}\")" "$REPO/stacks/h200-transformers.toml")
  step "gate: equal candidate (same env), baseline re-measured ABBA, $policy"
  # shellcheck disable=SC2086
  timeout "$GATE_S" $SG gate h200-transformers --env "$ENV" --interleave-with "$ENV" --baseline "$RECORD" \
    $policy --keep-runs "$RES/runs-equal" --html "$RES/gate-equal-prereg.html" --all --json \
    >"$RES/gate-equal-prereg.json" 2>"$RES/gate-equal-prereg.err"
  echo "gate rc=$?" | tee -a "$RES/steps.log"
}

finish() {
  step "done"
  nvidia-smi --query-gpu=index,memory.used,clocks.sm,temperature.gpu,power.draw --format=csv \
    >"$RES/host/nvidia-smi-after.csv" 2>&1
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv >>"$RES/host/nvidia-smi-after.csv" 2>&1
  if [ "$MODE" = loop ]; then
    cp "$REF" "$RES/" 2>/dev/null
    # server logs of one run per phase (the rest stay behind: the device returns 8 files)
    for phase in base pass nocb; do
      cp /tmp/sg/out/$phase/s0-r1/serve-logs/*.log "$RES/runs/$phase/server-s0-r1.log" 2>/dev/null
    done
  elif [ "$MODE" != reproduce ]; then
    # each child's serve-bench writes /tmp/stackgate-serve-*/serve-logs/: a listing in time
    # order with sizes, and the first and last log
    ls -1tr /tmp/stackgate-serve-*/serve-logs/*.log >"$RES/server-logs.txt" 2>/dev/null
    ls -ltr /tmp/stackgate-serve-*/serve-logs/*.log >"$RES/server-logs-sizes.txt" 2>/dev/null
    mkdir -p "$RES/server-logs"
    for f in $(sed -n '1p;$p' "$RES/server-logs.txt"); do
      cp "$f" "$RES/server-logs/$(basename "$(dirname "$(dirname "$f")")")-$(basename "$f")" 2>/dev/null
    done
  fi
  if [ "$MODE" = prereg ]; then
    # $OUT returns at most 8 files: the tarball plus the gate's files and steps.log beside it
    if [ -n "${OUT:-}" ]; then
      tar czf "$OUT/machine4.tgz" -C "$(dirname "$RES")" "$(basename "$RES")"
      cp "$RES"/steps.log "$RES"/gate-equal-prereg.* "$OUT/" 2>/dev/null
    fi
    return 0
  fi
  rm -rf /tmp/sg/final && cp -r "$RES" /tmp/sg/final && tar czf /tmp/sg/res.tgz -C /tmp/sg final
  touch /tmp/sg/done
}

for s in $STEPS; do "$s"; done
finish
