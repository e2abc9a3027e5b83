#!/usr/bin/env bash
# The carry of build-time kernels: what `builder kernels STACK --env ENV` listed in
# ENV/stackgate/kernels.json, or, for an env `builder build --kernels` built, the `kernels` of
# its build record (ENV/stackgate/build-record.json), and only that (the record as
# stackgate/kernels.json plus each listed file, at its path relative to ENV), as ONE tar with
# its sha256 beside it. On the GPU host it is unpacked into a
# folder that `builder build --kernels ... --kernels-from FOLDER` reads like the env itself.
#
#   bash benchmarks/kernels_ahead/kernels_ahead_export.sh ENV OUT_DIR
#
# OUT_DIR/kernels.tar and OUT_DIR/kernels.tar.sha256; prints the size in MiB.
set -eu
ENV=$1
OUT=$2
LIST="$ENV/stackgate/kernels.json"
BUILT="$ENV/stackgate/build-record.json"
[ -f "$LIST" ] || [ -f "$BUILT" ] || {
  echo "REFUSED: neither $LIST nor $BUILT found (run builder kernels or builder build --kernels)" >&2
  exit 2
}
mkdir -p "$OUT/stage/stackgate"
python3 - "$LIST" "$BUILT" "$OUT/stage/stackgate/kernels.json" >"$OUT/files.txt" <<'PY' || exit 2
import json, os, sys
listed, built, staged = sys.argv[1:4]
if os.path.isfile(listed):
    record = json.load(open(listed))
else:
    record = json.load(open(built)).get("kernels")
    if record is None:
        sys.exit(f"REFUSED: {built}: kernels: none (the env was built without --kernels)")
with open(staged, "w") as out:
    json.dump(record, out, indent=2)
    out.write("\n")
for kernel in record["kernels"]:
    for f in kernel.get("files", []) if kernel["ok"] else []:
        print(f["path"])
PY
tar cf "$OUT/kernels.tar" -C "$OUT/stage" stackgate/kernels.json -C "$ENV" -T "$OUT/files.txt"
rm -rf "$OUT/stage"
(cd "$OUT" && sha256sum kernels.tar >kernels.tar.sha256)
bytes=$(stat -c %s "$OUT/kernels.tar")
echo "OK $(wc -l <"$OUT/files.txt") kernel files, kernels.tar $((bytes / 1048576)) MiB ($bytes bytes) in $OUT"
