#!/usr/bin/env bash
# Make the carry for benchmarks/h200_sglang/h200_sglang.sh (issue 22): the h200-sglang wheelhouse, exactly
# as the lock pins it (every sha256 checked by `stackgate wheelhouse`), plus the wheels of
# stackgate's own dependencies the machine's image lacks (uv, pyelftools, variantlib with
# platformdirs; pydantic comes from the wheelhouse), as ONE tar split into chunks small enough
# that each rides one device call beside the checkout (64 MiB a call, tree included).
#
#   bash benchmarks/h200_sglang/h200_sglang_carry.sh OUT_DIR [CHUNK_BYTES]
#
# OUT_DIR/carry.tar.part-* and OUT_DIR/SHA256SUMS. Each device call copies the one part it
# carries into /tmp/sg/chunks (kept while the machine stays warm); the last one also carries
# SHA256SUMS, and the driver checks every part before it joins them.
set -eu
OUT=$1
CHUNK=${2:-56000000}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d /tmp/h200-sglang-carry.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$WORK/carry/tool" "$OUT"
# PYTHON and PIP may be commands of several words (PIP="python3 -m pip"): split into arrays.
read -r -a PYTHON_CMD <<<"${PYTHON:-python}"
read -r -a PIP_CMD <<<"${PIP:-pip}"
(cd "$REPO" && "${PYTHON_CMD[@]}" -m builder wheelhouse h200-sglang --to "$WORK/carry/wh")
"${PIP_CMD[@]}" download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_17_x86_64 -d "$WORK/carry/tool" uv==0.13.9 pyelftools==0.33 \
  variantlib==0.2.2 platformdirs==4.14.9
tar cf - -C "$WORK" carry | split -b "$CHUNK" - "$OUT/carry.tar.part-"
(cd "$OUT" && sha256sum carry.tar.part-* >SHA256SUMS)
ls -l "$OUT"
