#!/usr/bin/env bash
# Issue 22: carry SGLang's first-use compiles from one lent H200 to the next (read from the
# 0.5.17 / flashinfer 0.6.15.post1 / apache-tvm-ffi 0.1.15.post2 sources; see
# benchmarks/h200_sglang/results/jit-caches.md for what compiles when and why these steps).
#
#   bash benchmarks/h200_sglang/h200_sglang_jit_cache.sh list RES_FILE
#   bash benchmarks/h200_sglang/h200_sglang_jit_cache.sh save OUT_DIR [PART_BYTES]
#   bash benchmarks/h200_sglang/h200_sglang_jit_cache.sh restore CARRY_DIR ENV_ROOT REPORT_FILE
#
# The three caches (each honours its own variable, as the libraries do):
#   flashinfer  ${FLASHINFER_WORKSPACE_BASE:-$HOME}/.cache/flashinfer  (ninja builds: .o, .so,
#               build.ninja, .ninja_log/.ninja_deps per module under <ver>/<arch>/cached_ops)
#   tvm-ffi     ${TVM_FFI_CACHE_DIR:-$HOME/.cache/tvm-ffi}  (SGLang's own JIT kernels, e.g. the
#               INT4 Marlin MoE GEMM; loaded straight from <module>__arch_*__tvmffi_*/<module>.so)
#   triton      ${TRITON_CACHE_DIR:-$HOME/.triton/cache}  (keyed by source and target hash)
# save: one tar of the three (mtimes kept), split into parts of PART_BYTES (default 60,000,000:
#   one part rides one device call's 64 MiB), SHA256SUMS beside them, a listing in MANIFEST.txt.
# restore: checks the parts' sha256, unpacks each cache to its place (mtimes kept), then makes
#   FlashInfer's ninja see its carried modules as built: ninja rebuilds a module when any input
#   is newer than the output's entry in .ninja_log, and this machine's env was just installed
#   (uv writes files at install time), so every header of ENV_ROOT that a module's deps log or
#   build.ninja names, and that is newer than that module's oldest output, gets that mtime minus
#   one second (content untouched; stackgate's digests key on mtime and ctime, so they re-hash).
#   Then `ninja -n -d explain` per module writes to REPORT_FILE whether it would still compile.
#   The tvm-ffi and triton caches need nothing: they are looked up by content hash.
# Exit: 0 done (restore: also when nothing was carried: the report says so), 2 bad use,
# 3 a part failed its sha256 (nothing unpacked).
set -u
FI=${FLASHINFER_WORKSPACE_BASE:-$HOME}/.cache/flashinfer
TVM=${TVM_FFI_CACHE_DIR:-$HOME/.cache/tvm-ffi}
TRI=${TRITON_CACHE_DIR:-$HOME/.triton/cache}
usage() { echo "usage: $0 list RES_FILE | save OUT_DIR [PART_BYTES] | restore CARRY_DIR ENV_ROOT REPORT_FILE" >&2; exit 2; }

list() {  # every cached file: mtime, size, path (what compiled, and when)
  for d in "$FI" "$TVM" "$TRI"; do
    [ -d "$d" ] && find "$d" -type f \( -name "*.so" -o -name "*.cubin" -o -name "*.json" \) \
      -printf '%TY-%Tm-%Td %TT %s %p\n'
  done | sort
}

save() {
  local out=$1 part=${2:-60000000} stage
  stage=$(mktemp -d)
  mkdir -p "$out"
  for pair in "flashinfer:$FI" "tvm-ffi:$TVM" "triton:$TRI"; do
    local name=${pair%%:*} dir=${pair#*:}
    [ -d "$dir" ] && tar czf "$stage/$name.tgz" -C "$dir" .
  done
  list >"$stage/MANIFEST.txt"
  tar cf - -C "$stage" . | split -b "$part" -d - "$out/jit.tar.part-"
  (cd "$out" && sha256sum jit.tar.part-* >SHA256SUMS)
  cp "$stage/MANIFEST.txt" "$out/"
  du -b "$stage"/*.tgz >"$out/SIZES.txt"
  rm -rf "$stage"
}

freshen() {  # $1 module dir (holds build.ninja), $2 env root: inputs from the env made older
  local mod=$1 env_root=$2 ref
  # one second before the module's oldest output (.o or .so): older than every log entry
  ref=$(find "$mod" -maxdepth 1 \( -name "*.so" -o -name "*.o" \) -printf '%T@\n' | sort -n | head -1)
  [ -n "$ref" ] || return 0
  ref=$((${ref%.*} - 1))
  { "$NINJA" -C "$mod" -f "$mod/build.ninja" -t deps 2>/dev/null | sed -n 's/^    //p'
    sed -n 's/^build [^:]*: [^ ]* //p' "$mod/build.ninja" | tr ' ' '\n'
  } | sort -u | while read -r dep; do
    case "$dep" in
      "$env_root"/*) [ -f "$dep" ] && [ "$(stat -c %Y "$dep")" -gt "$ref" ] && touch -d "@$ref" "$dep" ;;
    esac
  done
}

restore() {
  local carry=$1 env_root report=$3 tmp
  env_root=$(realpath "$2")
  # the ninja FlashInfer will run: the server starts with the env's bin/ first on PATH
  # (validators.serve's path_prepend), so the env's own (pip `ninja`) when it has one
  NINJA=$env_root/bin/ninja
  [ -x "$NINJA" ] || NINJA=$(command -v ninja) || { echo "no ninja" >>"$report"; exit 2; }
  if ! ls "$carry"/jit.tar.part-* >/dev/null 2>&1; then
    echo "no JIT cache carried ($carry): every module compiles on first use" >"$report"
    return 0
  fi
  (cd "$carry" && sha256sum -c SHA256SUMS) >"$report" 2>&1 || { echo "sha256 mismatch" >>"$report"; exit 3; }
  tmp=$(mktemp -d)
  cat "$carry"/jit.tar.part-* | tar xf - -C "$tmp"
  for pair in "flashinfer:$FI" "tvm-ffi:$TVM" "triton:$TRI"; do
    local name=${pair%%:*} dir=${pair#*:}
    [ -f "$tmp/$name.tgz" ] && mkdir -p "$dir" && tar xzf "$tmp/$name.tgz" -C "$dir"
  done
  rm -rf "$tmp"
  local stale=0 mods=0
  while read -r ninja_file; do
    local mod
    mod=$(dirname "$ninja_file")
    mods=$((mods + 1))
    freshen "$mod" "$env_root"
    if "$NINJA" -C "$mod" -f "$ninja_file" -n -d explain >"$mod/.dry-run" 2>&1 \
        && grep -q "no work to do" "$mod/.dry-run"; then
      echo "flashinfer $(basename "$mod"): built (no work to do)" >>"$report"
    else
      stale=$((stale + 1))
      { echo "flashinfer $(basename "$mod"): WOULD COMPILE"; sed 's/^/    /' "$mod/.dry-run" | head -5; } >>"$report"
    fi
    rm -f "$mod/.dry-run"
  done < <(find "$FI" -name build.ninja 2>/dev/null | sort)
  echo "flashinfer modules: $mods carried, $stale would compile again" >>"$report"
  echo "tvm-ffi modules: $(find "$TVM" -name "*.so" 2>/dev/null | wc -l) carried;" \
    "triton kernels: $(find "$TRI" -name "*.json" ! -name "__grp__*" 2>/dev/null | wc -l) carried" >>"$report"
}

case "${1:-}" in
  list) [ $# = 2 ] || usage; list >"$2" ;;
  save) [ $# -ge 2 ] || usage; save "$2" "${3:-60000000}" ;;
  restore) [ $# = 4 ] || usage; [ -d "$3" ] || { echo "$0: ENV_ROOT: no such folder: $3" >&2; exit 2; }; restore "$2" "$3" "$4" ;;
  *) usage ;;
esac
