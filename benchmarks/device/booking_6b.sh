#!/usr/bin/env bash
# Booking 6, part B (benchmarks/device/booking_6.md): on the machine part A left warm (its carry
# joined, env built, tool wheels in /tmp/site), the kernels proof of
# benchmarks/kernels_ahead/prereg-2.md and prereg-3.md: the miniature made, then
# kernels_ahead_gpu.sh with the rebuilt carry in /tmp/sg/ka-carry. Run under device_session.sh.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
RES=/tmp/sg/res
mkdir -p "$RES"
T0=$(date +%s)
step() { echo "== $(($(date +%s) - T0)) s: $*" | tee -a "$RES/steps.log"; }
ENV=/tmp/sg/envs/h200-sglang/current
step "3a: the 6-layer Kimi-K2.5-shaped INT4 miniature"
mkdir -p /tmp/stackgate-h200
"$ENV/bin/python" tests/serve/make_kimi_mini.py /tmp/stackgate-h200/kimi-mini --device cuda --layers 6 \
  >"$RES/model-kimi.json" 2>"$RES/model-kimi.err" || step "make_kimi_mini failed"
step "3b: build-time kernels (prereg-2, prereg-3: BYTECODE_ARM=1)"
mkdir -p "$RES/ka"
RES=$RES/ka WITHOUT_SERVER=0 BYTECODE_ARM=1 BUDGET_S=${BUDGET_S:-420} \
  bash benchmarks/kernels_ahead/kernels_ahead_gpu.sh /tmp/sg/ka-carry >"$RES/ka-driver.log" 2>&1
grep KERNELS-AHEAD "$RES/ka-driver.log" | tail -1 | tee -a "$RES/steps.log"
step "finish"
rm -rf /tmp/sg/final && cp -r "$RES" /tmp/sg/final && tar czf /tmp/sg/res.tgz -C /tmp/sg final
touch /tmp/sg/done
