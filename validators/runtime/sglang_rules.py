"""How SGLang 0.5.9 decides its communication paths, as pure functions (read from the released
0.5.9 wheel), and what real failures mean.

Kept as data and small functions so a GPU-less test can check each decision, and so the
runtime group can state, for the host it runs on and for the stack's target archs, what
SGLang will do before a 10-minute model load finds out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.version import Version

# srt/distributed/device_communicators/custom_all_reduce.py
CUSTOM_AR_WORLD_SIZES = (2, 4, 6, 8)
CUSTOM_AR_MAX_BYTES = 8192 * 1024
# srt/distributed/device_communicators/all_reduce_utils.py: keyed by CC major, 9 and 10 only.
TORCH_SYMM_MEM_MAX_SIZES: dict[int, dict[int, int]] = {
    9: {2: 64 << 20, 4: 64 << 20, 6: 128 << 20, 8: 128 << 20},
    10: {2: 64 << 20, 4: 64 << 20, 6: 128 << 20, 8: 128 << 20},
}
# FlashInfer added SM12x to its trtllm_comm (all-reduce fusion) module in 0.6.17.
FLASHINFER_SM12X_FUSION = Version("0.6.17")
SGLANG_TABLE_VERSION = Version("0.5.9")


@dataclass(frozen=True)
class Decision:
    enabled: bool
    reason: str


def custom_all_reduce(world_size: int, full_nvlink: bool, p2p_ok: bool = True) -> Decision:
    if world_size == 1:
        return Decision(False, "world size 1: no all-reduce")
    if world_size not in CUSTOM_AR_WORLD_SIZES:
        return Decision(
            False, f"unsupported world size {world_size} (supported {list(CUSTOM_AR_WORLD_SIZES)})"
        )
    if world_size > 2 and not full_nvlink:
        return Decision(
            False, "not supported on more than two PCIe-only GPUs: NCCL does every all-reduce"
        )
    if not p2p_ok:
        return Decision(False, "GPU P2P unavailable or the P2P test failed")
    return Decision(True, f"enabled for tensors <= {CUSTOM_AR_MAX_BYTES >> 20} MiB")


def flashinfer_fusion(cc_major: int, flashinfer_version: Version | None) -> Decision:
    """SGLang 0.5.9 auto-enables (and applies) the fusion only on SM90/SM100 (is_sm100 = major 10)."""
    if cc_major in (9, 10):
        return Decision(
            True, f"SM{cc_major}x: auto-enabled for DeepSeek-V3/Kimi-K2.5 architectures"
        )
    why = f"SGLang 0.5.9 applies it only on SM90/SM100 (device major {cc_major})"
    if cc_major == 12 and (
        flashinfer_version is None or flashinfer_version < FLASHINFER_SM12X_FUSION
    ):
        have = flashinfer_version or "not installed"
        why += f"; SM12x fusion also needs flashinfer >= {FLASHINFER_SM12X_FUSION} (have {have})"
    return Decision(False, why)


def torch_symm_mem(cc_major: int, world_size: int) -> Decision:
    """What TorchSymmMemCommunicator.__init__ does (enabled only with --enable-torch-symm-mem)."""
    if cc_major < 9:
        return Decision(False, f"SM{cc_major}x < 9: disabled quietly")
    table = TORCH_SYMM_MEM_MAX_SIZES.get(cc_major)
    if table is None:
        return Decision(
            False,
            f"KeyError: {cc_major} -- SGLang {SGLANG_TABLE_VERSION}'s "
            f"TORCH_SYMM_MEM_ALL_REDUCE_MAX_SIZES has entries for CC 9 and 10 only; "
            "the server dies at start-up. Remedy: remove --enable-torch-symm-mem",
        )
    if world_size not in table:
        return Decision(False, f"world size {world_size} not in {sorted(table)}: disabled")
    return Decision(True, f"up to {table[world_size] >> 20} MiB per all-reduce")


_NO_ARCH = re.compile(r"No supported CUDA architectures found for major versions \[([\d,\s]*)\]")


def explain_flashinfer_jit(
    error: str, cc: tuple[int, int] | None, nvcc: Version | None, arch_list: str | None
) -> str | None:
    """The real cause behind FlashInfer's "No supported CUDA architectures found" error."""
    match = _NO_ARCH.search(error)
    if match is None:
        return None
    majors = [int(m) for m in re.findall(r"\d+", match.group(1))]
    causes: list[str] = []
    if arch_list:
        listed = sorted(
            {int(a.split(".")[0]) for a in arch_list.split() if a.split(".")[0].isdigit()}
        )
        if not set(listed) & set(majors):
            causes.append(
                f"FLASHINFER_CUDA_ARCH_LIST={arch_list!r} names SM majors {listed}, but this "
                f"FlashInfer module is built only for majors {majors}"
                + (
                    f" (SM12x came to the all-reduce fusion module in {FLASHINFER_SM12X_FUSION})"
                    if 12 in listed and majors == [9, 10]
                    else ""
                )
            )
    if cc is not None and cc[0] not in majors:
        causes.append(
            f"this FlashInfer module is compiled only for SM majors {majors}; the device is "
            f"SM{cc[0]}{cc[1]} -- the module does not support this arch in this FlashInfer "
            f"(all-reduce fusion gained SM12x in {FLASHINFER_SM12X_FUSION})"
        )
    if cc is not None and cc[0] == 12 and nvcc is not None and nvcc < Version("12.9"):
        causes.append(f"nvcc {nvcc} is too old for SM12x (needs >= 12.9)")
    if not causes:
        causes.append(f"the module's supported majors are {majors}")
    return "; ".join(causes)
