#!/usr/bin/env bash
# The builder's and the validators' topology decisions on a real multi-GPU host, side by side,
# plus the gpu-marked tests that read NVML. Run from the repo root on the lent H200 x2:
#   device run: bash benchmarks/runtime_h200/topology_h200.sh   (carry: [".carry"]; .carry/tool as in runtime_h200.sh)
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .carry/tool/*.whl \
  >"$OUT/pip.log" 2>&1 || { cat "$OUT/pip.log"; exit 1; }
export PYTHONPATH="/tmp/site:$PWD"
nvidia-smi topo -m | tee "$OUT/nvidia-smi-topo.txt"
python3 - <<'PY' | tee "$OUT/topology.json"
import json
from builder.venv.topology import detect_topology
from stackgate.host.snapshot import host_snapshot
from validators.records.fingerprint import probe_host

b = detect_topology()
snap = host_snapshot()
probed = snap.gpus
v = snap.topology
print(json.dumps({
    "builder": {"topology": b.topology, "source": b.source, "detail": b.detail},
    "validators": {"topology": v, "links": probed.value.links if probed.value else None,
                   "why_unknown": probed.reason if probed.value is None else None},
    "record": probe_host().interconnect,
    "agree": b.topology == v,
}, indent=2))
PY
python3 -m pytest -q -p no:cacheprovider tests/foundation/test_topology.py \
  tests/builder/test_record_topology.py 2>&1 | tee "$OUT/pytest.txt" | tail -5
python3 -m validators preflight cu130 --json > "$OUT/preflight-cu130.json" 2>"$OUT/preflight-cu130.err"
echo "preflight exit $?"; tail -15 "$OUT/preflight-cu130.err"
