#!/usr/bin/env bash
# Build-time kernels on a lent H200/H100: the first server's ready time with them vs without,
# (budget BUDGET_S=480 s by default: ~130 s for steps 1-3, the rest caps step 4),
# and what the JIT caches hold before and after each (pre-registration: prereg.md beside it).
# ONE device command, on the machine that already ran benchmarks/h200_sglang/h200_sglang.sh's
# first steps (it reuses from there: the joined wheelhouse /tmp/sg/carry/wh, stackgate's own
# wheels in /tmp/site, the miniature at /tmp/stackgate-h200/kimi-mini, and, for "without",
# the env it built, /tmp/sg/envs/h200-sglang/current, when that env has no build-time kernels).
#
#   bash benchmarks/kernels_ahead/kernels_ahead_gpu.sh [KERNELS_DIR]
#
# KERNELS_DIR (default benchmarks/kernels_ahead/carry): kernels.tar + kernels.tar.sha256 made
# on the CPU by kernels_ahead_export.sh (carried with the checkout: it is a few MiB).
# Steps (times in $RES/steps.log; results in $RES, default $OUT/ka or /tmp/ka/res):
#  1. check the carry's sha256, unpack it to /tmp/ka/export
#  2. builder build h200-sglang --kernels (both requests) --kernels-from /tmp/ka/export into
#     /tmp/ka/envs: every kernel copied, none compiled (the record says `how` per kernel)
#  3. server WITH the kernels, HOME a fresh empty folder (FlashInfer, TVM-FFI and Triton caches
#     empty, as on a fresh host): ready seconds, greedy outputs against the committed reference;
#     the caches listed after it, and `builder verify` of the env (a TVM-FFI module compiled at
#     run time would land in the env and be named there)
#  4. server WITHOUT them (the env of step 0, or one built now without --kernels), fresh HOME,
#     waited for at most what the budget leaves (a timeout is a lower bound); caches listed
#  5. (BYTECODE_ARM=1, prereg-3.md) the env of step 3 with every __pycache__ of its
#     site-packages removed (an env as builds made it before the byte-code step: same kernels,
#     same tree hash), fresh HOME: ready seconds, against step 3's
# Last line: KERNELS-AHEAD with=<s> without=<s or >s> ... (or INCOMPLETE naming what is missing).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
REPO=$PWD
CARRY=${1:-benchmarks/kernels_ahead/carry}
KA=/tmp/ka
RES=${RES:-${OUT:-/tmp/ka}/ka-res}
BUDGET_S=${BUDGET_S:-480}
WITHOUT_SERVER=${WITHOUT_SERVER:-1}  # 0: skip step 4 (the baseline is machine 2's ~513 s)
BYTECODE_ARM=${BYTECODE_ARM:-0}  # 1: step 5, the same env without its build-time byte-code
REF=stacks/references/h200-sglang-kimi-mini.json
REQS=(--kernels benchmarks/kernels_ahead/flashinfer-h200-sglang.json
      --kernels benchmarks/kernels_ahead/sglang-h200-sglang.json)
mkdir -p "$RES" "$KA"
T0=$(date +%s)
step() { echo "== $(($(date +%s) - T0)) s: $*" | tee -a "$RES/steps.log"; }
left() { echo $((BUDGET_S - ($(date +%s) - T0))); }
stop() { step "INCOMPLETE: $*"; echo "INCOMPLETE: $*"; exit 3; }
caches() {  # what a first server compiled: every file of the three caches under HOME $1
  find "$1/.cache/flashinfer" "$1/.cache/tvm-ffi" "$1/.triton" -type f \
    -printf '%TY-%Tm-%Td %TH:%TM:%TS %10s %p\n' 2>/dev/null | sort
}

for need in /tmp/sg/carry/wh /tmp/site /tmp/stackgate-h200/kimi-mini "$CARRY/kernels.tar"; do
  [ -e "$need" ] || stop "$need not found (run benchmarks/h200_sglang/h200_sglang.sh's carry, build and model steps first; carry $CARRY)"
done
. "$REPO/benchmarks/device/device_env.sh"
WH=/tmp/sg/carry/wh

step "1. unpack the kernels carry"
(cd "$CARRY" && sha256sum -c kernels.tar.sha256) >"$RES/carry-check.txt" 2>&1 || stop "kernels.tar sha256 mismatch"
rm -rf "$KA/export" && mkdir -p "$KA/export" && tar xf "$CARRY/kernels.tar" -C "$KA/export" || stop "untar"
du -sb "$KA/export" | tee -a "$RES/steps.log"

step "2. build h200-sglang with the kernels copied from the carry"
# the base site is the image's, not the env's: the build compiles none of it
echo "  .pyc in the base site $SITE: $(find "$SITE" -name '*.pyc' 2>/dev/null | wc -l)" | tee -a "$RES/steps.log"
python3 -m builder build h200-sglang --wheelhouse "$WH" --offline --base-site "$SITE" --python "$MPY" \
  --venv-root "$KA/envs" "${REQS[@]}" --kernels-from "$KA/export" --json \
  >"$RES/build-with.json" 2>"$RES/build-with.err"
echo "build rc=$?" | tee -a "$RES/steps.log"
WITH=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["env"])' "$RES/build-with.json" 2>/dev/null) \
  || stop "build with kernels failed: $(tail -3 "$RES/build-with.err")"
python3 - "$RES/build-with.json" <<'EOF' | tee -a "$RES/steps.log"
import json, sys
k = json.load(open(sys.argv[1]))["record"]["kernels"]
for x in k["kernels"]:
    print(f"  kernel {x['name'] or x['call']}: {x['how']} {sum(f['bytes'] for f in x['files'])} B")
b = json.load(open(sys.argv[1]))["record"].get("bytecode") or {}
print(f"  bytecode: {b.get('pyc_files')} .pyc, {b.get('pyc_bytes')} B, {b.get('seconds')} s, "
      f"{b.get('jobs')} job(s), {b.get('failed')} failed")
EOF

step "3. first server WITH build-time kernels (fresh HOME)"
rm -rf "$KA/home-with" && mkdir -p "$KA/home-with"
caches "$KA/home-with" >"$RES/caches-with-before.txt"
HOME=$KA/home-with python3 benchmarks/kernels_ahead/kernels_ahead_ready.py h200-sglang --env "$WITH" \
  --reference "$REF" --load-timeout-s 240 --out "$RES/ready-with.json" >"$RES/ready-with.log" 2>&1
echo "server with rc=$?" | tee -a "$RES/steps.log"
caches "$KA/home-with" >"$RES/caches-with-after.txt"
echo "  caches after: $(wc -l <"$RES/caches-with-after.txt") files" | tee -a "$RES/steps.log"
cp "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["log"])' "$RES/ready-with.json")" \
  "$RES/server-with.log" 2>/dev/null
python3 -m builder verify h200-sglang --venv-root "$KA/envs" --env "$WITH" >"$RES/verify-with.txt" 2>&1
echo "verify rc=$? (1: something was written into the env at run time)" | tee -a "$RES/steps.log"
# every module in the env's TVM-FFI folder with its mtime: one compiled at run time is named here
# in full (verify names only its first differing paths)
find "$WITH" -path '*/_stackgate_kernels/*' -name '*.so' -printf '%TY-%Tm-%Td %TH:%TM:%TS %10s %P\n' \
  2>/dev/null | sort >"$RES/env-kernels-after.txt"
echo "  env TVM-FFI modules after: $(wc -l <"$RES/env-kernels-after.txt")" | tee -a "$RES/steps.log"

step "4. first server WITHOUT them (fresh HOME), at most what the budget leaves"
[ "$WITHOUT_SERVER" = 1 ] || { echo "KERNELS-AHEAD step 4 skipped (WITHOUT_SERVER=0)"; }
if [ "$WITHOUT_SERVER" = 1 ]; then
WITHOUT=/tmp/sg/envs/h200-sglang/current
if ! python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); sys.exit(r.get("kernels") is not None)' \
    "$WITHOUT/stackgate/build-record.json" 2>/dev/null; then
  python3 -m builder build h200-sglang --wheelhouse "$WH" --offline --base-site "$SITE" --python "$MPY" \
    --venv-root "$KA/envs-without" --json >"$RES/build-without.json" 2>"$RES/build-without.err"
  WITHOUT=$KA/envs-without/h200-sglang/current
fi
rm -rf "$KA/home-without" && mkdir -p "$KA/home-without"
CAP=$(($(left) - 45))
[ "$CAP" -gt 60 ] || stop "no time left for the server without kernels ($CAP s)"
HOME=$KA/home-without python3 benchmarks/kernels_ahead/kernels_ahead_ready.py h200-sglang --env "$WITHOUT" \
  --load-timeout-s "$CAP" --out "$RES/ready-without.json" >"$RES/ready-without.log" 2>&1
echo "server without rc=$? (cap $CAP s)" | tee -a "$RES/steps.log"
caches "$KA/home-without" >"$RES/caches-without-after.txt"
fi

if [ "$BYTECODE_ARM" = 1 ]; then
step "5. the same env without its build-time byte-code (fresh HOME)"
CAP=$(($(left) - 30))
[ "$CAP" -gt 60 ] || stop "no time left for the server without byte-code ($CAP s)"
find "$WITH"/lib/python3.*/site-packages -type d -name __pycache__ -prune -exec rm -rf {} + 2>/dev/null
echo "  .pyc left in the env: $(find "$WITH" -name '*.pyc' | wc -l)" | tee -a "$RES/steps.log"
rm -rf "$KA/home-nopyc" && mkdir -p "$KA/home-nopyc"
HOME=$KA/home-nopyc python3 benchmarks/kernels_ahead/kernels_ahead_ready.py h200-sglang --env "$WITH" \
  --reference "$REF" --load-timeout-s "$CAP" --out "$RES/ready-nopyc.json" >"$RES/ready-nopyc.log" 2>&1
echo "server without byte-code rc=$? (cap $CAP s)" | tee -a "$RES/steps.log"
python3 -m builder verify h200-sglang --venv-root "$KA/envs" --env "$WITH" >"$RES/verify-nopyc.txt" 2>&1
echo "verify rc=$? (0: removing byte-code leaves the tree hash)" | tee -a "$RES/steps.log"
fi

python3 - "$RES" <<'EOF' | tee -a "$RES/steps.log"
import json, sys
from pathlib import Path
res = Path(sys.argv[1])
def ready(name):
    try:
        r = json.loads((res / f"ready-{name}.json").read_text())["ready"]
    except (OSError, KeyError, ValueError):
        return "none"
    return f"{r['seconds']}" if r["verdict"] == "ready" else f">{r['seconds']}({r['verdict']})"
try:
    g = json.loads((res / "ready-with.json").read_text()).get("greedy", {})
except (OSError, ValueError):
    g = {}
n = lambda f: sum(1 for _ in open(res / f)) if (res / f).exists() else -1
print(f"KERNELS-AHEAD with={ready('with')} s without={ready('without')} s "
      f"greedy_exact={g.get('exact_match')} caches_after_with={n('caches-with-after.txt')} "
      f"caches_after_without={n('caches-without-after.txt')} nopyc={ready('nopyc')} s")
EOF
step "done"
