#!/usr/bin/env bash
# Issue 22: the whole stackgate loop with SGLang 0.5.17 on ONE lent H200, as one background job
# (benchmarks/device_session.sh), from a copy of the checkout in /tmp/sg/repo.
#
# Carry (benchmarks/h200_sglang_carry.sh makes it): the stack's wheelhouse (`builder wheelhouse
# h200-sglang`, 126 wheels, 0.53 GiB, sglang-kernel 0.4.5's real 383 MB wheel among them) plus
# uv/pyelftools wheels for stackgate itself, as one tar split in chunks that consecutive calls
# drop in /tmp/sg/chunks; this driver checks their sha256 list, joins and unpacks them.
#
# Steps (each timed in steps.log; results under $RES, tarred at the end):
#  1. stackgate's own wheels; host facts
#  2. builder build h200-sglang: the locked venv from the wheelhouse, offline, layered over the
#     image's site-packages (--base-site); the models made on the GPU meanwhile (seeded):
#     the Kimi-K2.5-shaped INT4 miniature (tests/serve/make_kimi_mini.py) and the 1.03B Llama
#  3. SGLang 0.5.17's own parser on the profile's argv (prepare_server_args); ground truth of
#     the GPU libraries: real sgl_kernel / flashinfer ops and a cuFFT on the H200
#  4. the greedy reference (serve-bench --record-reference), then validators run (host, static,
#     runtime, serve-bench) x RUNS0 -> mark-good, export record. Machine 1 (benchmarks/results/
#     h200_sglang/README.md): greedy outputs of the random-weight miniature matched a reference
#     from another server only 56-62%, so mark-good refuses; that is the stack's real state.
#  5. the llama-1b control profile, one serve-bench
#  6. equal candidate: interleaved gate (ABBA, PAIRS pairs) under the tool's DEFAULT policy
#  7. the pre-registered rule (benchmarks/gate_h200_tolerance.py, committed before this run) on
#     step 6's runs only -> tolerance / tail tolerance for PAIRS pairs
#  8. regressing candidate (benchmarks/h200_sglang/mrr15: --max-running-requests 15 at C=16),
#     interleaved gate under step 7's policy: must be REFUSED
#  9. equal candidate again under step 7's policy (the deciding equal run): must PASS
# Phases 8-9 start only while DRIVER_BUDGET_S allows them (estimated from measured run times).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
REPO=$PWD
RES=${RES:-/tmp/sg/res}
DRIVER_BUDGET_S=${DRIVER_BUDGET_S:-1000}
RUNS0=${RUNS0:-3}
mkdir -p "$RES"/host /tmp/sg
T0=$(date +%s)
step() { echo "== $(($(date +%s) - T0)) s: $*" | tee -a "$RES/steps.log"; }
left() { echo $((DRIVER_BUDGET_S - ($(date +%s) - T0))); }
finish() {
  step "finish: $*"
  nvidia-smi --query-gpu=index,memory.used,clocks.sm,temperature.gpu,power.draw --format=csv \
    >"$RES/host/nvidia-smi-after.csv" 2>&1
  mkdir -p "$RES/server-logs"
  for f in $(ls -1tr /tmp/stackgate-serve-*/serve-logs/*.log /tmp/sg/out/*/serve-logs/*.log 2>/dev/null | sed -n '1p;$p'); do
    cp "$f" "$RES/server-logs/$(basename "$(dirname "$(dirname "$f")")")-$(basename "$f")" 2>/dev/null
  done
  cp -r "$RES" /tmp/sg/final && tar czf /tmp/sg/res.tgz -C /tmp/sg final
  touch /tmp/sg/done
  exit 0
}

step "join carry"
(cd /tmp/sg/chunks && sha256sum -c SHA256SUMS) >"$RES/host/chunks.txt" 2>&1 || finish "chunk sha256 mismatch"
cat /tmp/sg/chunks/carry.tar.part-* | tar x -C /tmp/sg || finish "untar failed"
WH=/tmp/sg/carry/wh
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
  /tmp/sg/carry/tool/*.whl "$WH"/pydantic-*.whl "$WH"/pydantic_core-*.whl \
  "$WH"/annotated_types-*.whl "$WH"/typing_inspection-*.whl >"$RES/host/pip-tool.log" 2>&1 \
  || finish "tool wheels failed"
# shellcheck source=benchmarks/device_env.sh
. "$REPO/benchmarks/device_env.sh"

step "host facts"
nvidia-smi --query-gpu=index,name,driver_version,compute_cap,memory.used,memory.total,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
  --format=csv >"$RES/host/nvidia-smi-before.csv" 2>&1
nvcc --version >"$RES/host/nvcc-version.txt" 2>&1
nproc >"$RES/host/nproc.txt"; head -3 /proc/meminfo >"$RES/host/meminfo.txt"
python3 -m pip list 2>/dev/null >"$RES/host/pip-list.txt"

step "build h200-sglang over the image's site ($SITE)"
python3 -m builder build h200-sglang --wheelhouse "$WH" --offline --base-site "$SITE" \
  --python "$MPY" --json >"$RES/build.json" 2>"$RES/build.err"
echo "build rc=$?" | tee -a "$RES/steps.log"
ENV=$STACKGATE_VENV_ROOT/h200-sglang/current
EPY=$ENV/bin/python
cp "$ENV/stackgate/build-record.json" "$RES/build-record.json" 2>/dev/null
[ -x "$EPY" ] || finish "no env"

step "models on the GPU (seeded): Kimi-K2.5-shaped INT4 miniature, then the 1.03B Llama"
mkdir -p /tmp/stackgate-h200
"$EPY" tests/serve/make_kimi_mini.py /tmp/stackgate-h200/kimi-mini --device cuda \
  >"$RES/model-kimi.json" 2>"$RES/model-kimi.err"
echo "kimi-mini rc=$?" | tee -a "$RES/steps.log"
"$EPY" tests/serve/make_tiny_model.py /tmp/stackgate-h200/llama-1b \
  --hidden 2048 --intermediate 5632 --layers 22 --heads 32 --kv-heads 4 --vocab 32000 \
  --device cuda --dtype bfloat16 >"$RES/model-llama.txt" 2>&1 &
LLAMA_PID=$!
du -sb /tmp/stackgate-h200/kimi-mini/* >>"$RES/model-kimi.json" 2>/dev/null

wait $LLAMA_PID; echo "llama rc=$?" | tee -a "$RES/steps.log"

step "SGLang 0.5.17's own parser on the profiles' argv"
timeout 300 "$EPY" benchmarks/h200_sglang_truth.py parse --repo "$REPO" >"$RES/parse.json" 2>"$RES/parse.err"
echo "parse rc=$?" | tee -a "$RES/steps.log"

step "greedy reference of kimi-mini (the profile's correctness_reference)"
timeout 400 $SG serve-bench h200-sglang --env "$ENV" --out-dir /tmp/sg/out/ref \
  --record-reference stacks/references/h200-sglang-kimi-mini.json --json >"$RES/ref.json" 2>"$RES/ref.err"
echo "reference rc=$?" | tee -a "$RES/steps.log"
cp stacks/references/h200-sglang-kimi-mini.json "$RES/" 2>/dev/null

step "validators run x $RUNS0 (host, static, runtime, serve-bench: kimi-mini)"
mkdir -p "$RES/runs0"
for i in $(seq 1 "$RUNS0"); do
  s=$(date +%s)
  timeout 600 $SG run h200-sglang --env "$ENV" --keep-going --json --out-dir "/tmp/sg/out/run0-$i" \
    >"$RES/runs0/run-$i.json" 2>"$RES/runs0/run-$i.err"
  rc=$?
  RUN_S=$(($(date +%s) - s))
  echo "run0 $i rc=$rc ${RUN_S} s" | tee -a "$RES/steps.log"
  [ "$i" = 1 ] && cp /tmp/sg/out/run0-1/serve-logs/*.log "$RES/runs0/" 2>/dev/null
  [ "$i" = 1 ] && [ "$rc" -gt 1 ] && finish "first run rc=$rc"
  if [ "$i" = 1 ]; then
    step "GPU ground truth: sgl_kernel / flashinfer ops, cuFFT, each static.arch result of run 1"
    timeout 300 "$EPY" benchmarks/h200_sglang_truth.py ops --report "$RES/runs0/run-1.json" \
      >"$RES/ops.json" 2>"$RES/ops.err"
    echo "ops rc=$?" | tee -a "$RES/steps.log"
  fi
done

step "mark-good"
mkdir -p "$RES/records"
$SG mark-good h200-sglang $(for f in "$RES"/runs0/run-*.json; do echo --run "$f"; done) \
  --env "$ENV" --export "$RES/records" --json \
  --note "EXAMPLE of the stackgate loop with SGLang 0.5.17 on ONE lent H200 (SM90), not a claim about SM120 or Kimi-K2.5 itself: the model is a seeded Kimi-K2.5-shaped miniature (DeepseekV3ForCausalLM, MLA, 16 routed + 1 shared experts, compressed-tensors pack-quantized INT4 experts). The venv is layered over the machine image's site-packages ($SITE): torch and the rest listed under build.raw.base_site were NOT built from the lock." \
  >"$RES/mark-good.json" 2>"$RES/mark-good.err"
echo "mark-good rc=$?" | tee -a "$RES/steps.log"

step "control: llama-1b serve-bench"
timeout 400 $SG serve-bench h200-sglang --profile llama-1b --env "$ENV" --out-dir /tmp/sg/out/llama \
  --json >"$RES/llama-serve-bench.json" 2>"$RES/llama-serve-bench.err"
echo "llama serve-bench rc=$?" | tee -a "$RES/steps.log"

# pairs per gate from the measured run time: 3 gates of PAIRS pairs (2 runs a pair) must fit
PAIRS=${PAIRS:-$(( $(left) / (6 * (RUN_S + 5)) ))}
[ "$PAIRS" -gt 4 ] && PAIRS=4
[ "$PAIRS" -lt 2 ] && PAIRS=2
echo "pairs=$PAIRS (run ${RUN_S} s, $(left) s of the driver budget left)" | tee -a "$RES/steps.log"

gate() {  # name candidate extra-flags...
  local name=$1 cand=$2; shift 2
  timeout $(( $(left) > 60 ? $(left) : 60 )) $SG gate "$cand" --env "$ENV" --interleave-with "$ENV" \
    --baseline h200-sglang --repeats "$PAIRS" --min-repeats "$PAIRS" "$@" --keep-runs "$RES/gate-$name" \
    --html "$RES/gate-$name.html" --all --json >"$RES/gate-$name.json" 2>"$RES/gate-$name.err"
  echo "gate $name rc=$?" | tee -a "$RES/steps.log"
}

step "6: equal candidate, tool's default policy, $PAIRS pairs"
gate equal-default h200-sglang

step "7: pre-registered rule on step 6's runs only"
python3 benchmarks/gate_h200_tolerance.py --runs "$RES/gate-equal-default" --pairs "$PAIRS" \
  --trials 1000 --out "$RES/tolerance" >"$RES/tolerance.txt" 2>&1
echo "tolerance rc=$?" | tee -a "$RES/steps.log"
POLICY=$(python3 -c "import json,sys; t=json.load(open(sys.argv[1])); print(f\"--tolerance {t['tolerance']} --tail-tolerance {t['tail_tolerance']}\")" "$RES/tolerance/tolerance.json" 2>/dev/null)
[ -n "$POLICY" ] || finish "no pre-registered policy"
echo "policy: $POLICY" | tee -a "$RES/steps.log"

PHASE_S=$(( 2 * PAIRS * (RUN_S + 5) ))
[ "$(left)" -gt "$PHASE_S" ] || finish "no time for the regressing gate ($(left) s left, ~$PHASE_S needed)"
step "8: regressing candidate (--max-running-requests 15), $POLICY"
# shellcheck disable=SC2086
gate mrr15 benchmarks/h200_sglang/mrr15/h200-sglang.toml $POLICY

[ "$(left)" -gt "$PHASE_S" ] || finish "no time for the deciding equal gate ($(left) s left)"
step "9: equal candidate, $POLICY"
# shellcheck disable=SC2086
gate equal-prereg h200-sglang $POLICY
finish "all steps"
