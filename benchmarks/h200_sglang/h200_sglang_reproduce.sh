#!/usr/bin/env bash
# Reproduce the committed h200-sglang record on a fresh lent GPU machine, as a user types it:
#
#   stackgate reproduce records/h200-sglang/20261202T011853-034d1e7a9e43.json \
#     --base-site /opt/torch/.venv/lib/python3.12/site-packages --wheelhouse WH --runs 1 --json
#
# run as one background job across device calls (benchmarks/device/device_session.sh), from
# the checkout the call sends. The carry is benchmarks/h200_sglang/h200_sglang_carry.sh's (the
# stack's wheelhouse + stackgate's own missing wheels, one tar in parts that consecutive calls
# drop in $SG/chunks; the last call also brings SHA256SUMS).
#
# Steps, each timed in $SG/res/steps.log:
#  1. check every part's sha256, join, unpack; stackgate's own wheels into $SG/site
#  2. the Kimi-K2.5-shaped INT4 miniature the record's serving profile loads, made on the GPU
#     (tests/serve/make_kimi_mini.py, seeded, 6 layers, as the record's machine made it) with an
#     env of its own ($SG/model-envs): reproduce's env is built by reproduce, from nothing
#  3. the reproduce command above (the record's own greedy outputs are its correctness
#     reference; one validation run: the first server pays SGLang's first-use JIT compiles)
#  4. the verdict JSON, the verdict line, reproduce's own step times and the GPU seconds
#     (wall time of the steps that hold the GPU: model and reproduce) printed and in res.tgz
#
# On a host without a GPU (tested there as far as it goes): SG a folder of its own, BASE_SITE a
# stand-in base site, TOOL_PY a Python with stackgate's dependencies (TOOL_WHEELS=0: none
# installed), ENV_PY the Python 3.12 to build with, MAKE_MODEL=0 skips step 2 and
# REPRODUCE_ARGS=--no-validate stops reproduce at the env tree.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
REPO=$PWD
SG=${SG:-/tmp/sg}
RES=$SG/res
RECORD=records/h200-sglang/20261202T011853-034d1e7a9e43.json
BASE_SITE=${BASE_SITE:-/opt/torch/.venv/lib/python3.12/site-packages}
TOOL_PY=${TOOL_PY:-python3}
LAYERS=${LAYERS:-6}
mkdir -p "$RES/host"
T0=$(date +%s)
step() { echo "== $(($(date +%s) - T0)) s: $*" | tee -a "$RES/steps.log"; }
finish() {
  step "finish: $*"
  nvidia-smi --query-gpu=index,name,memory.used,clocks.sm,temperature.gpu,power.draw \
    --format=csv >"$RES/host/nvidia-smi-after.csv" 2>&1
  cp "$SG"/out/*/serve-logs/*.log "$RES/" 2>/dev/null
  cp -r "$RES" "$SG/final" && tar czf "$SG/res.tgz" -C "$SG" final
  touch "$SG/done"
  exit 0
}

step "1: join the carry"
(cd "$SG/chunks" && sha256sum -c SHA256SUMS) >"$RES/host/chunks.txt" 2>&1 || finish "chunk sha256 mismatch"
cat "$SG"/chunks/carry.tar.part-* | tar x -C "$SG" || finish "untar failed"
WH=$SG/carry/wh
if [ "${TOOL_WHEELS:-1}" = 1 ]; then
  "$TOOL_PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SG/site" \
    "$SG"/carry/tool/*.whl "$WH"/pydantic-*.whl "$WH"/pydantic_core-*.whl \
    "$WH"/annotated_types-*.whl "$WH"/typing_inspection-*.whl >"$RES/host/pip-tool.log" 2>&1 \
    || finish "tool wheels failed"
fi
export PYTHONPATH="$SG/site:$REPO" PATH="$SG/site/bin:$PATH"
export STACKGATE_STATE_DIR=$SG/state STACKGATE_VENV_ROOT=$SG/envs
# the interpreter the env is built with: the image's python3, as the record's was
MPY=${ENV_PY:-$("$TOOL_PY" -c 'import sys; print(sys.executable)')}
# the runtime probes start `python`: one beside the image venv's python3 (device_env.sh's rule)
[ -e "$(dirname "$MPY")/python" ] || ln -s python3 "$(dirname "$MPY")/python"
nvidia-smi --query-gpu=index,name,driver_version,compute_cap,memory.used,memory.total \
  --format=csv >"$RES/host/nvidia-smi-before.csv" 2>&1
"$TOOL_PY" -m validators --version >"$RES/host/stackgate-version.txt" 2>&1
echo "base site $BASE_SITE; python $MPY; $(ls "$WH" | wc -l) wheels" | tee -a "$RES/steps.log"

GPU_S=0
if [ "${MAKE_MODEL:-1}" = 1 ]; then
  step "2: the miniature the profile loads (an env of its own to make it)"
  s=$(date +%s)
  STACKGATE_VENV_ROOT=$SG/model-envs "$TOOL_PY" -m builder build h200-sglang --wheelhouse "$WH" \
    --offline --base-site "$BASE_SITE" --python "$MPY" --json >"$RES/model-env.json" 2>"$RES/model-env.err" \
    || finish "the model's env did not build"
  mkdir -p /tmp/stackgate-h200
  "$SG/model-envs/h200-sglang/current/bin/python" tests/serve/make_kimi_mini.py \
    /tmp/stackgate-h200/kimi-mini --device cuda --layers "$LAYERS" \
    >"$RES/model-kimi.json" 2>"$RES/model-kimi.err" || finish "make_kimi_mini failed"
  (cd /tmp/stackgate-h200/kimi-mini && sha256sum ./*.safetensors ./config.json) >"$RES/model-kimi.sha256" 2>&1
  GPU_S=$((GPU_S + $(date +%s) - s))
fi

step "3: stackgate reproduce $RECORD --base-site $BASE_SITE --wheelhouse WH --runs 1 --json ${REPRODUCE_ARGS:-}"
s=$(date +%s)
# shellcheck disable=SC2086  # REPRODUCE_ARGS: extra words on purpose
timeout 1500 "$TOOL_PY" -m validators reproduce "$RECORD" --base-site "$BASE_SITE" --wheelhouse "$WH" \
  --runs 1 --python "$MPY" --json ${REPRODUCE_ARGS:-} >"$RES/reproduce.json" 2>"$RES/reproduce.err"
RC=$?
REPRO_S=$(($(date +%s) - s))
GPU_S=$((GPU_S + REPRO_S))
echo "reproduce rc=$RC ${REPRO_S} s" | tee -a "$RES/steps.log"

step "4: the verdict"
tail -1 "$RES/reproduce.err" | tee -a "$RES/steps.log"
"$TOOL_PY" - "$RES/reproduce.json" <<'EOF' | tee "$RES/verdict.txt" | tee -a "$RES/steps.log"
import json, sys
out = json.load(open(sys.argv[1]))
print("verdict", out["verdict"], "ok", out["ok"])
for part, state in out["parts"].items():
    print(f"  {part}: {state}")
print("  env tree", out["env_tree"])
print("  reproduce timings_s", out["timings_s"])
for reason in out["reasons"]:
    print("  -", reason)
EOF
echo "gpu seconds (model + reproduce wall time): $GPU_S; reproduce ${REPRO_S} s; driver $(($(date +%s) - T0)) s" \
  | tee -a "$RES/steps.log"
finish "reproduce rc=$RC"
