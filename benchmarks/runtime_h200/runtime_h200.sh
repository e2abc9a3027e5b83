#!/usr/bin/env bash
# Runtime probes on a lent GPU machine (2x H200, NVLink), in one call. Writes under $OUT:
#   preflight.json  static.json  runtime.json  recorded.tgz (nvidia-smi/nvcc/meminfo + rank logs)
# Carry: .carry/tool (pydantic, pyelftools for the validators), .carry/env (flashinfer-python
# 0.6.4 + apache-tvm-ffi for the env under test), made here with (.carry/ is git-ignored):
#   P="python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
#      --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64"
#   $P -d .carry/tool pydantic==2.14.4 pydantic-core==2.50.5 annotated-types typing-inspection pyelftools==0.33
#   $P --platform manylinux_2_24_x86_64 -d .carry/env flashinfer-python==0.6.4 apache-tvm-ffi==0.1.15.post2
# Run from the repo root:  device run: bash benchmarks/runtime_h200/runtime_h200.sh   (carry: [".carry"])
# NVLink multicast stays off on shared hosts (NCCL_NVLS_ENABLE=0 etc.); the probes force it too.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/rec"
REC="$OUT/rec"
T0=$(date +%s)
step() { echo "== $(($(date +%s) - T0)) s: $*" | tee -a "$REC/steps.log"; }

step "tool wheels"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .carry/tool/*.whl \
  >"$REC/pip-tool.log" 2>&1 || { cat "$REC/pip-tool.log"; exit 1; }
export PYTHONPATH="/tmp/site:$PWD"

TORCH_PY=$(python3 -c 'import sys; print(sys.executable)')
TORCH_ENV=$(python3 -c 'import sys; print(sys.prefix)')
TORCH_SITE=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
step "torch env: $TORCH_ENV ($TORCH_PY)"

# An env under test = a venv whose site-packages holds flashinfer and sees torch's site through
# a .pth (nothing can be downloaded there; flashinfer travels as wheels).
"$TORCH_PY" -m venv --without-pip /tmp/env >"$REC/venv.log" 2>&1
ENV_SITE=$(/tmp/env/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$ENV_SITE" .carry/env/*.whl \
  >"$REC/pip-env.log" 2>&1
echo "$TORCH_SITE" > "$ENV_SITE/zz-torch-site.pth"

step "recorded host outputs"
nvidia-smi --query-gpu=index,name,driver_version,compute_cap,memory.total,pci.bus_id --format=csv,noheader,nounits \
  >"$REC/nvidia-smi-query.csv" 2>&1
nvidia-smi topo -m >"$REC/nvidia-smi-topo.txt" 2>&1
nvidia-smi >"$REC/nvidia-smi.txt" 2>&1
nvcc --version >"$REC/nvcc-version.txt" 2>&1
cat /proc/meminfo >"$REC/meminfo.txt"; cat /proc/swaps >"$REC/swaps.txt"
python3 - >"$REC/nvml.json" 2>&1 <<'EOF'
import json
from stackgate.host.gpus import probe_nvml
p = probe_nvml()
print(json.dumps({"value": p.value.model_dump(mode="json") if p.value else None, "reason": p.reason}, indent=1))
EOF
python3 -m pip list 2>/dev/null | grep -i -E "^(torch|nvidia|triton|flashinfer|apache)" >"$REC/pip-list.txt"

step "preflight cu130"
python3 -m validators preflight cu130 --env /tmp/env --json >"$OUT/preflight.json" 2>"$REC/preflight.err"
echo "rc=$?" >>"$REC/steps.log"

step "runtime cu130 (--topology pcie: the PCIe profile vs NCCL defaults on NVLink)"
timeout 420 python3 -m validators run cu130 --env /tmp/env --only runtime --topology pcie --keep-going \
  --out-dir "$REC" --option nccl_iters=300 --option jit_timeout=200 --option probe_timeout=120 \
  --json >"$OUT/runtime.json" 2>"$REC/runtime.err"
echo "rc=$?" >>"$REC/steps.log"

step "static on the machine's own torch env ($TORCH_ENV)"
( time timeout 120 python3 -m validators static cu130 --env "$TORCH_ENV" --json >"$OUT/static.json" \
  2>"$REC/static.err" ) 2>>"$REC/steps.log"
echo "rc=$?" >>"$REC/steps.log"
step "done"
cp -r "$HOME/.cache/flashinfer" "$REC/flashinfer-cache-listing" 2>/dev/null && \
  find "$REC/flashinfer-cache-listing" -type f ! -name '*.log' ! -name '*.ninja' -delete 2>/dev/null
tar czf "$OUT/recorded.tgz" -C "$OUT" rec && rm -rf "$REC"
cat "$OUT/recorded.tgz" >/dev/null
