#!/usr/bin/env bash
# The predictions that benchmarks/compat/compat_truth_compare.py scores against truth.json: validators
# compat on every (package version, torch) pair of the ground truth, from byte ranges only.
#
#   STACKGATE_CACHE=/tmp/some-empty-dir bash benchmarks/compat/results/pred.sh [OUTDIR]
#
# Runs from the checkout that holds this script (its .venv, made by `uv sync --group dev`).
# STACKGATE_CACHE must be set (an empty directory gives the cold run); OUTDIR defaults to the
# directory of this script. Per package: pred-NAME.json (the --json output), pred-NAME.err
# (stderr, then one line from /usr/bin/time: wall, user, sys, max RSS); load averages before and
# after go to OUTDIR/pred.load.txt. Then it scores OUTDIR against truth.json
# (benchmarks/compat/compat_truth_compare.py -> OUTDIR/truth_compare.md) and, when OUTDIR is not this
# directory, diffs the verdicts against the committed pred-*.json (benchmarks/compat/compat_pred_diff.py:
# exit 1 when a pair's verdict, evidence or reason changed).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(git -C "$here" rev-parse --show-toplevel)
out=$(mkdir -p "${1:-$here}" && cd "${1:-$here}" && pwd)
: "${STACKGATE_CACHE:?set STACKGATE_CACHE to the cache root (an empty directory for a cold run)}"
export STACKGATE_CACHE
cd "$root"
A=(--against torch==2.8.0 --against torch==2.9.1 --against torch==2.10.0)
run() {
  local name=$1
  shift
  /usr/bin/time -f "time: %e s wall, %U s user, %S s sys, %M KB max RSS" \
    .venv/bin/python -m validators compat "$name" "$@" "${A[@]}" --json \
    >"$out/pred-$name.json" 2>"$out/pred-$name.err"
}
{ date -u +%FT%TZ; git rev-parse HEAD; echo "before: $(cat /proc/loadavg)"; } >"$out/pred.load.txt"
run torchvision --versions ==0.23.0 --versions ==0.24.1 --versions ==0.25.0
run torchaudio --versions ==2.8.0 --versions ==2.9.1 --versions ==2.10.0
run xformers --versions ==0.0.32.post2 --versions ==0.0.33.post2 --versions ==0.0.34 --versions ==0.0.35
run torchao --versions ==0.13.0 --versions ==0.14.1 --versions ==0.15.0
run torch-memory-saver --versions ==0.0.8 --versions ==0.0.9
run sgl-kernel --versions ==0.3.9.post2 --versions ==0.3.16.post5 --versions ==0.3.21
echo "after: $(cat /proc/loadavg)" >>"$out/pred.load.txt"
# the score against the stored truth, and (OUTDIR elsewhere) the diff against the committed outputs
bench=$(cd "$here/../.." && pwd)
.venv/bin/python "$bench/compat_truth_compare.py" "$here/truth.json" "$out"/pred-*.json --md "$out/truth_compare.md"
if [ "$out" != "$here" ]; then .venv/bin/python "$bench/compat_pred_diff.py" "$here" "$out"; fi
