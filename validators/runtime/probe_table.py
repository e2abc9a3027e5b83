"""The runtime probes, one table: each probe of probes/smoke.py, the check id it reports and
the distribution a stack must pin for it to run.

probes/smoke.py runs in the env's own interpreter with the stdlib only (it cannot import this
package), so it keeps its own name -> function map; tests/validators/test_runtime.py checks
that the two name the same probes. Adding a probe: its function in probes/smoke.py, its row
here, its check id in validators.core.checks.RuntimeCheck (mypy checks the row against it).
"""

from __future__ import annotations

from dataclasses import dataclass

from validators.core.checks import RuntimeCheck


@dataclass(frozen=True)
class RuntimeProbe:
    name: str  # probes/smoke.py's name for it (its argv[1])
    check: RuntimeCheck
    # The distribution a stack must pin for the probe to run; None: every stack (on a GPU).
    package: str | None
    # An import probe: run in this order after torch, one result each, on a host with GPUs.
    imports: bool = False


TORCH = RuntimeProbe("torch", "runtime.torch", None)
FLASHINFER_JIT = RuntimeProbe("flashinfer_jit", "runtime.flashinfer_jit", "flashinfer-python")
FLASHINFER_COMM_ARCH = RuntimeProbe(
    "flashinfer_comm_arch", "runtime.flashinfer_fusion_arch", "flashinfer-python"
)
PROBES: tuple[RuntimeProbe, ...] = (
    TORCH,
    RuntimeProbe("sgl_kernel", "runtime.sgl_kernel", "sgl-kernel", imports=True),
    RuntimeProbe("flashinfer", "runtime.flashinfer", "flashinfer-python", imports=True),
    RuntimeProbe("sglang", "runtime.sglang", "sglang", imports=True),
    FLASHINFER_JIT,
    FLASHINFER_COMM_ARCH,
)
