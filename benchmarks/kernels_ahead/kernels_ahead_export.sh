#!/usr/bin/env bash
# The carry of build-time kernels: what `builder kernels STACK --env ENV` listed in
# ENV/stackgate/kernels.json, and only that (the record plus each listed file, at its path
# relative to ENV), as ONE tar with its sha256 beside it. On the GPU host it is unpacked into a
# folder that `builder build --kernels ... --kernels-from FOLDER` reads like the env itself.
#
#   bash benchmarks/kernels_ahead/kernels_ahead_export.sh ENV OUT_DIR
#
# OUT_DIR/kernels.tar and OUT_DIR/kernels.tar.sha256; prints the size in MiB.
set -eu
ENV=$1
OUT=$2
LIST="$ENV/stackgate/kernels.json"
[ -f "$LIST" ] || { echo "REFUSED: $LIST not found (run builder kernels first)" >&2; exit 2; }
mkdir -p "$OUT"
python3 - "$LIST" >"$OUT/files.txt" <<'EOF'
import json, sys
record = json.load(open(sys.argv[1]))
print("stackgate/kernels.json")
for kernel in record["kernels"]:
    for f in kernel.get("files", []) if kernel["ok"] else []:
        print(f["path"])
EOF
tar cf "$OUT/kernels.tar" -C "$ENV" -T "$OUT/files.txt"
(cd "$OUT" && sha256sum kernels.tar >kernels.tar.sha256)
bytes=$(stat -c %s "$OUT/kernels.tar")
echo "OK $(($(wc -l <"$OUT/files.txt") - 1)) kernel files, kernels.tar $((bytes / 1048576)) MiB ($bytes bytes) in $OUT"
