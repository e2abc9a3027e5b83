#!/usr/bin/env bash
# The gate's demonstration on one lent GPU (benchmarks/gate/prereg-dial.md), as one background
# job under benchmarks/device/device_session.sh, from the copy of the checkout the device call
# runs in (REPO=$PWD: a copy in /tmp/sg/repo-dial, which a re-sent checkout cannot remove).
# One device call of <= 500 s (timeout_s 500), after the carry's other parts are in
# /tmp/sg/chunks (one call each; this call carries the last part and SHA256SUMS):
#
#   mkdir -p /tmp/sg/chunks && cp .carry/sg/carry.tar.part-ak .carry/sg/SHA256SUMS /tmp/sg/chunks/ &&
#   rm -rf /tmp/sg/started /tmp/sg/done /tmp/sg/final /tmp/sg/res /tmp/sg/res.tgz /tmp/sg/repo-dial &&
#   cp -a . /tmp/sg/repo-dial && cd /tmp/sg/repo-dial &&
#   bash benchmarks/device/device_session.sh benchmarks/gate/gate_dial_device.sh 485
#
# Environment: ENV=PATH  an existing serving env (sglang 0.5.17), e.g. one built earlier in the
#                        same booking: then no carry, no build;
#              else      the h200-sglang carry in /tmp/sg/chunks (h200_sglang_carry.sh; pushed
#                        by earlier calls, one 56 MB part each), joined, checked and built exactly
#                        as benchmarks/h200_sglang/h200_sglang.sh does;
#              /tmp/sg/jit-carry (optional): JIT caches saved by an earlier machine, restored;
#              PAIRS (8), LAYERS (32), BUDGET_S (850: the demonstration's own seconds), CLIENTS (0), RES.
# The model: Kimi-K2.5's shape at LAYERS layers with bf16 experts (no INT4 Marlin module to
# compile: machine 2's first server spent ~400 s compiling), two servers fit one H100.
# Steps are timed in $RES/steps.log; the demo's own steps in $RES/demo/steps.jsonl.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
REPO=$PWD
RES=${RES:-/tmp/sg/res}
PAIRS=${PAIRS:-8}
BUDGET_S=${BUDGET_S:-850}
CLIENTS=${CLIENTS:-0}  # 1: SGLang's client beside ours first (machine 1 ran it; recorded)
LAYERS=${LAYERS:-32}
MODEL=/tmp/stackgate-gate/kimi-full-depth
mkdir -p "$RES"/host /tmp/sg
T0=$(date +%s)
step() { echo "== $(($(date +%s) - T0)) s: $*" | tee -a "$RES/steps.log"; }
finish() {
  step "finish: $*"
  nvidia-smi --query-gpu=index,memory.used,clocks.sm,temperature.gpu,power.draw --format=csv \
    >"$RES/host/nvidia-smi-after.csv" 2>&1
  [ -n "${NESTED:-}" ] && exit 0  # run by another driver (benchmarks/device/three_proofs.sh), which packs
  cp -r "$RES" /tmp/sg/final && tar czf /tmp/sg/res.tgz -C /tmp/sg final
  touch /tmp/sg/done
  exit 0
}

if [ -z "${ENV:-}" ]; then
  step "join carry"
  (cd /tmp/sg/chunks && sha256sum -c SHA256SUMS) >"$RES/host/chunks.txt" 2>&1 || finish "chunk sha256 mismatch"
  cat /tmp/sg/chunks/carry.tar.part-* | tar x -C /tmp/sg || finish "untar failed"
  WH=/tmp/sg/carry/wh
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
    /tmp/sg/carry/tool/*.whl "$WH"/pydantic-*.whl "$WH"/pydantic_core-*.whl \
    "$WH"/annotated_types-*.whl "$WH"/typing_inspection-*.whl >"$RES/host/pip-tool.log" 2>&1 \
    || finish "tool wheels failed"
fi
# shellcheck source=benchmarks/device/device_env.sh
. "$REPO/benchmarks/device/device_env.sh"
nvidia-smi --query-gpu=index,name,driver_version,memory.used,memory.total,clocks.sm,clocks.max.sm \
  --format=csv >"$RES/host/nvidia-smi-before.csv" 2>&1
if [ -z "${ENV:-}" ]; then
  step "build h200-sglang over the image's site ($SITE)"
  python3 -m builder build h200-sglang --wheelhouse /tmp/sg/carry/wh --offline --base-site "$SITE" \
    --python "$MPY" --json >"$RES/build.json" 2>"$RES/build.err"
  echo "build rc=$?" | tee -a "$RES/steps.log"
  ENV=$STACKGATE_VENV_ROOT/h200-sglang/current
fi
[ -x "$ENV/bin/python" ] || finish "no env at $ENV"
if [ -d /tmp/sg/jit-carry ]; then
  step "JIT caches carried from an earlier machine restored"
  bash "$REPO/benchmarks/h200_sglang/h200_sglang_jit_cache.sh" restore /tmp/sg/jit-carry \
    "$(realpath "$ENV")" "$RES/jit-restore.txt"
fi

step "Kimi-K2.5-shaped config ($LAYERS layers, 8 routed experts, bf16 experts), no weights"
"$ENV/bin/python" benchmarks/gate/kimi_full_depth.py "$MODEL" --layers "$LAYERS" --bf16-experts \
  >"$RES/model.json" 2>"$RES/model.err" || finish "config failed (model.err)"
cp "$MODEL/config.json" "$RES/model-config.json"

step "demonstration: $PAIRS ABBA pairs a gate, budget $BUDGET_S s"
timeout $((BUDGET_S + 60)) "$MPY" benchmarks/gate/gate_dial_demo.py --env "$ENV" --model-dir "$MODEL" \
  --res "$RES/demo" --pairs "$PAIRS" --budget-s "$BUDGET_S" $([ "$CLIENTS" = 1 ] || echo --no-client-comparison) \
  >"$RES/demo.log" 2>&1
echo "demo rc=$? $(tail -1 "$RES/demo.log")" | tee -a "$RES/steps.log"
finish "done"
