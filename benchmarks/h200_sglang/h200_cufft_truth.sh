#!/usr/bin/env bash
# Device side of the cuFFT ground truth (issue 22 item 5): the two real nvidia-cufft-cu12 wheels
# (11.3.0.4, 11.2.1.3; PyPI, sha256 below) carried as one tar in 56 MB chunks to /tmp/fft
# (SHA256SUMS beside them), then per version: libcufft.so.11 taken out of the wheel, its hash
# checked against the wheel's RECORD, a real FFT on the GPU (benchmarks/h200_sglang/h200_cufft_truth.py),
# and what cuobjdump lists in it (ELF cubins, PTX). Results to $OUT.
#   wheels: 768160ac89f6f7b459bee747e8d175dbf53619cfe74b2a5636264163138013ca  11.3.0.4
#           f083fc24912aa410be21fa16d157fed2055dab1cc4b6934a0e03cba69eb242b9  11.2.1.3
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
HERE=$(cd "$(dirname "$0")" && pwd)
cd /tmp/fft && sha256sum -c SHA256SUMS && cat fft.tar.part-* | tar x || exit 3
sha256sum nvidia_cufft_cu12-*.whl
for v in 11.3.0.4:jn9S9etCsousKZQ6EhPZQL9MWb-fcwJyhkdKfY99yKI 11.2.1.3:85IcQTOSUkJFnr_b95AdtOv65rvP_53FzlOx_xP7Qv8; do
  ver=${v%%:*}; rec=sha256=${v#*:}
  # the image has no unzip
  python3 -c "import zipfile,glob,sys; zipfile.ZipFile(glob.glob(sys.argv[1])[0]).extract(\"nvidia/cufft/lib/libcufft.so.11\", sys.argv[2])" "nvidia_cufft_cu12-$ver-*.whl" "$ver"
  lib=$ver/nvidia/cufft/lib/libcufft.so.11
  python3 "$HERE/h200_cufft_truth.py" "$lib" --sha256 "$rec" >"$OUT/cufft-$ver.json" 2>"$OUT/cufft-$ver.err"
  echo "$ver fft rc=$?"
  cuobjdump --list-elf "$lib" 2>&1 | sed 's/.*\.\(sm_[0-9a-z]*\)\..*/\1/' | sort | uniq -c >"$OUT/cuobjdump-list-elf-$ver.txt"
  cuobjdump --list-ptx "$lib" 2>&1 | sed 's/.*\.\(sm_[0-9a-z]*\)\..*/\1/' | sort | uniq -c >"$OUT/cuobjdump-list-ptx-$ver.txt"
  tail -8 "$OUT/cufft-$ver.json"
done
