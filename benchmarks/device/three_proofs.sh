#!/usr/bin/env bash
# One booking of a lent GPU, three proofs in the order of their worth (pre-registered in
# three_proofs.md beside this file, committed before the booking):
#
#   1. the h200-sglang carry joined, stackgate's own wheels in /tmp/site, the plain env built
#      (the gate's and the miniature's), and `reproduce RECORD --no-validate` on this host's base site:
#      does the env tree match the record's?
#   2. the gate's demonstration (benchmarks/gate/gate_dial_device.sh, its prereg-dial.md rule)
#   3. build-time kernels (benchmarks/kernels_ahead/kernels_ahead_gpu.sh, its prereg.md): the
#      first server WITH them from a fresh HOME (the server without them is skipped: machine 2
#      measured ~513 s, a fresh H100 586 s)
#   4. `stackgate reproduce RECORD --runs 1` as a user types it, with what the budget leaves
#      (its first server pays SGLang's first-use compiles: a timeout is reported, not hidden)
#
# Run under benchmarks/device/device_session.sh from a copy of the checkout; the carry's parts in
# /tmp/sg/chunks (one a call; the last call also brings SHA256SUMS), the kernels carry
# (kernels.tar + kernels.tar.sha256) in /tmp/sg/ka-carry. PROOFS_S: this driver's seconds; DIAL=0 skips step 2;
# KA_WITHOUT=1 also starts the kernels proof's server without them (its own budget then 480 s).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
REPO=$PWD
RES=/tmp/sg/res
PROOFS_S=${PROOFS_S:-1400}  # this driver's seconds (not BUDGET_S: the nested drivers read that name)
unset BUDGET_S
DIAL=${DIAL:-1}
KA_WITHOUT=${KA_WITHOUT:-0}
KA=${KA:-1}  # 0: no kernels proof (steps 3a-3b), for a booking that only has room for the gate
RECORD=records/h200-sglang/20261202T011853-034d1e7a9e43.json
mkdir -p "$RES/host"
T0=$(date +%s)
step() { echo "== $(($(date +%s) - T0)) s: $*" | tee -a "$RES/steps.log"; }
left() { echo $((PROOFS_S - ($(date +%s) - T0))); }
finish() {
  step "finish: $*"
  nvidia-smi --query-gpu=index,memory.used,clocks.sm,temperature.gpu,power.draw --format=csv \
    >"$RES/host/nvidia-smi-after.csv" 2>&1
  rm -rf /tmp/sg/final && cp -r "$RES" /tmp/sg/final && tar czf /tmp/sg/res.tgz -C /tmp/sg final
  touch /tmp/sg/done
  exit 0
}

step "1a: join the carry, stackgate's own wheels"
(cd /tmp/sg/chunks && sha256sum -c SHA256SUMS) >"$RES/host/chunks.txt" 2>&1 || finish "chunk sha256 mismatch"
cat /tmp/sg/chunks/carry.tar.part-* | tar x -C /tmp/sg || finish "untar failed"
WH=/tmp/sg/carry/wh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
  /tmp/sg/carry/tool/*.whl "$WH"/pydantic-*.whl "$WH"/pydantic_core-*.whl \
  "$WH"/annotated_types-*.whl "$WH"/typing_inspection-*.whl >"$RES/host/pip-tool.log" 2>&1 \
  || finish "tool wheels failed"
# shellcheck source=benchmarks/device/device_env.sh
. "$REPO/benchmarks/device/device_env.sh"
nvidia-smi --query-gpu=index,name,driver_version,compute_cap,memory.used,memory.total,clocks.max.sm \
  --format=csv >"$RES/host/nvidia-smi-before.csv" 2>&1
$SG --version >"$RES/host/stackgate-version.txt" 2>&1

step "1b: build h200-sglang over the image's site ($SITE)"
python3 -m builder build h200-sglang --wheelhouse "$WH" --offline --base-site "$SITE" --python "$MPY" --json \
  >"$RES/build.json" 2>"$RES/build.err"
echo "build rc=$?" | tee -a "$RES/steps.log"
ENV=$STACKGATE_VENV_ROOT/h200-sglang/current
[ -x "$ENV/bin/python" ] || finish "no env at $ENV ($(tail -2 "$RES/build.err"))"

step "1c: reproduce $RECORD --no-validate (env tree only)"
timeout 300 $SG reproduce "$RECORD" --venv-root /tmp/sg/repro-envs --base-site "$SITE" \
  --wheelhouse "$WH" --python "$MPY" --no-validate --json >"$RES/reproduce-env.json" 2>"$RES/reproduce-env.err"
echo "reproduce --no-validate rc=$? $(tail -1 "$RES/reproduce-env.err")" | tee -a "$RES/steps.log"

if [ "$DIAL" = 1 ]; then
  step "2: the gate's demonstration (gate_dial_device.sh, ENV=$ENV)"
  mkdir -p "$RES/dial"
  NESTED=1 ENV=$ENV RES=$RES/dial bash benchmarks/gate/gate_dial_device.sh
  tail -1 "$RES/dial/demo.log" 2>/dev/null | tee -a "$RES/steps.log"
fi

if [ "$KA" = 1 ]; then
  step "3a: the 6-layer Kimi-K2.5-shaped INT4 miniature (the record's and the kernels proof's model)"
  mkdir -p /tmp/stackgate-h200
  "$ENV/bin/python" tests/serve/make_kimi_mini.py /tmp/stackgate-h200/kimi-mini --device cuda --layers 6 \
    >"$RES/model-kimi.json" 2>"$RES/model-kimi.err" || finish "make_kimi_mini failed"

  step "3b: build-time kernels, first server with them (left $(left) s)"
  mkdir -p "$RES/ka"
  RES=$RES/ka WITHOUT_SERVER=$KA_WITHOUT BUDGET_S=$((KA_WITHOUT ? 480 : 300)) bash benchmarks/kernels_ahead/kernels_ahead_gpu.sh /tmp/sg/ka-carry \
    >"$RES/ka-driver.log" 2>&1
  grep KERNELS-AHEAD "$RES/ka-driver.log" | tail -1 | tee -a "$RES/steps.log"
fi

CAP=$(($(left) - 20))
[ "$CAP" -gt 120 ] || finish "no time left for reproduce --runs 1 ($CAP s)"
step "4: reproduce $RECORD --runs 1, as a user types it (cap $CAP s)"
s=$(date +%s)
timeout "$CAP" $SG reproduce "$RECORD" --venv-root /tmp/sg/repro-envs --base-site "$SITE" \
  --wheelhouse "$WH" --python "$MPY" --runs 1 --json >"$RES/reproduce.json" 2>"$RES/reproduce.err"
RC=$?
echo "reproduce rc=$RC $(($(date +%s) - s)) s (124: cut at the cap) $(tail -1 "$RES/reproduce.err")" \
  | tee -a "$RES/steps.log"
cp "$STACKGATE_STATE_DIR"/out/*/serve-logs/*.log "$RES/" 2>/dev/null
finish "done"
