"""The runtime group: probes in subprocesses of the env's interpreter, on the GPUs of this host."""

from __future__ import annotations

import functools
from pathlib import Path

from packaging.version import InvalidVersion, Version

from stackgate.host.snapshot import host_snapshot
from stackgate.manifest import Manifest
from stackgate.manifest.values import arch_cc
from stackgate.topology import Topology
from validators.core.checks import RuntimeCheck
from validators.core.context import RunContext
from validators.core.results import Result, make_result
from validators.runtime import sglang_rules as sr
from validators.runtime.distributed import distributed_checks
from validators.runtime.probe_table import FLASHINFER_COMM_ARCH, FLASHINFER_JIT, PROBES, TORCH
from validators.runtime.runner import ProbeOutcome, probe_env, run_probe

GROUP = "runtime"


_r = functools.partial(make_result, group=GROUP)


def _from(check: RuntimeCheck, o: ProbeOutcome) -> Result:
    return _r(check, o.status, o.reason, o.evidence, o.seconds)


def run_group(ctx: RunContext) -> list[Result]:
    manifest = ctx.stack.manifest
    if ctx.env_path is None or ctx.python is None:
        return [_r("runtime.env", "SKIP", "no --env given: no interpreter to probe with")]
    python = ctx.python
    if not python.exists():
        return [_r("runtime.env", "ERROR", f"{ctx.env_path} has no interpreter at {python}")]
    timeout = ctx.options.runtime.probe_timeout or manifest.validation.timeouts.check_s
    host = host_snapshot()
    gpus = host.gpus
    inv = gpus.value
    topology: Topology | None = ctx.topology or host.topology
    stack_env = manifest.env_for(topology)
    env = probe_env(stack_env)
    nvcc = host.nvcc.value.version if host.nvcc.value else None
    out: list[Result] = []
    # Probes of SGLang's packages run for stacks that pin them; a stack without them (e.g. one
    # serving with `transformers serve`) gets no SKIP for what it never claimed to contain.
    pinned = {p.name for p in PROBES if p.package is None or manifest.package(p.package)}
    # The fusion module's arch gate needs no GPU when the stack names its archs.
    if FLASHINFER_COMM_ARCH.name in pinned and (
        env.get("FLASHINFER_CUDA_ARCH_LIST") or inv is not None
    ):
        out.append(_comm_arch(manifest, python, env, timeout, nvcc))
    if inv is None or not inv.gpus:
        why = gpus.reason or "the driver reports no GPU"
        out.append(_r("runtime.gpu", "SKIP", f"no GPU on this host: {why}"))
        return out

    torch_o = run_probe(python, TORCH.name, env=env, timeout=timeout)
    out.append(_from(TORCH.check, torch_o))
    out.append(_torch_cuda(manifest, torch_o))
    sglang_o = ProbeOutcome("SKIP", "not run")
    for probe in (p for p in PROBES if p.imports and p.name in pinned):
        o = run_probe(python, probe.name, env=env, timeout=timeout)
        sglang_o = o if probe.name == "sglang" else sglang_o
        out.append(_from(probe.check, o))
    devices = torch_o.evidence.get("devices") or []
    cc = tuple(devices[0]["cc"]) if devices else None
    if FLASHINFER_JIT.name in pinned:
        out.extend(_jit(ctx, python, env, cc, nvcc))
    if "sglang" in pinned:
        real_keys = sglang_o.evidence.get("symm_mem_max_sizes_keys")
        out.extend(_sglang_decisions(manifest, cc, topology, real_keys))
    out.extend(distributed_checks(ctx, python, env, stack_env, topology, len(devices), torch_o))
    return out


def _jit(
    ctx: RunContext,
    python: Path,
    env: dict[str, str],
    cc: tuple[int, ...] | None,
    nvcc: Version | None,
) -> list[Result]:
    """JIT one kernel with the stack's arch list; again for the device's own arch if the list
    leaves it out (a host that is not the stack's target still proves JIT works)."""
    timeout = ctx.options.runtime.jit_timeout
    arch_list = env.get("FLASHINFER_CUDA_ARCH_LIST")
    out = [
        _explained(
            FLASHINFER_JIT.check,
            run_probe(python, FLASHINFER_JIT.name, env=env, timeout=timeout),
            cc,
            nvcc,
            arch_list,
        )
    ]
    if cc is not None and arch_list and out[0].status == "FAIL":
        listed = {a.rstrip("af") for a in arch_list.split()}
        if f"{cc[0]}.{cc[1]}" not in listed:
            # Not the stack's target GPU: the stack's arch list cannot run here by design. JIT
            # for this device's arch instead, so the compile-and-run path is still proven.
            own = {k: v for k, v in env.items() if k != "FLASHINFER_CUDA_ARCH_LIST"}
            o = run_probe(python, FLASHINFER_JIT.name, env=own, timeout=timeout)
            out.append(_explained("runtime.flashinfer_jit.device_arch", o, cc, nvcc, None))
            out[0] = out[0].model_copy(
                update={
                    "status": "SKIP",
                    "reason": f"host is SM{cc[0]}{cc[1]}, FLASHINFER_CUDA_ARCH_LIST={arch_list!r}: the "
                    f"kernel built for the stack's archs cannot launch here ({out[0].reason[:300]}); "
                    "see runtime.flashinfer_jit.device_arch",
                }
            )
    return out


def _explained(
    check: RuntimeCheck,
    o: ProbeOutcome,
    cc: tuple[int, ...] | None,
    nvcc: Version | None,
    arch_list: str | None,
) -> Result:
    why = sr.explain_flashinfer_jit(o.reason, cc, nvcc, arch_list)  # type: ignore[arg-type]
    if why:
        o = ProbeOutcome(o.status, f"{o.reason} -- real cause: {why}", o.evidence, o.seconds)
    return _from(check, o)


def _comm_arch(
    manifest: Manifest, python: Path, env: dict[str, str], timeout: float, nvcc: Version | None
) -> Result:
    """FlashInfer's all-reduce fusion module vs the target archs; FAIL only when it will be used."""
    o = run_probe(python, FLASHINFER_COMM_ARCH.name, env=env, timeout=timeout)
    result = _explained(
        FLASHINFER_COMM_ARCH.check, o, None, nvcc, env.get("FLASHINFER_CUDA_ARCH_LIST")
    )
    _, flags = _profile_flags(manifest)
    if result.status == "FAIL" and "--enable-flashinfer-allreduce-fusion" not in flags:
        majors = sorted({arch_cc(a)[0] for a in manifest.host.target_archs})
        if not any(m in (9, 10) for m in majors):
            return result.model_copy(
                update={
                    "status": "SKIP",
                    "reason": f"SGLang 0.5.9 does not use FlashInfer all-reduce fusion on SM{majors}; "
                    f"were it enabled: {result.reason}",
                }
            )
    return result


def _torch_cuda(manifest: Manifest, o: ProbeOutcome) -> Result:
    have = o.evidence.get("cuda")
    want = Version(manifest.host.cuda)
    if not have:
        return _r("runtime.torch_cuda", "SKIP", f"torch probe gave no CUDA version ({o.status})")
    try:
        got = Version(str(have))
    except InvalidVersion:
        return _r("runtime.torch_cuda", "ERROR", f"unreadable torch.version.cuda {have!r}")
    ok = (got.major, got.minor) == (want.major, want.minor)
    return _r(
        "runtime.torch_cuda",
        "PASS" if ok else "FAIL",
        f"torch.version.cuda is {got}, the stack says CUDA {want}"
        + ("" if ok else ": a torch build for another CUDA is installed"),
        {"torch_cuda": str(got)},
    )


def _profile_flags(manifest: Manifest) -> tuple[int, set[str]]:
    name = manifest.validation.serve_profile
    profile = manifest.serving.get(name) if name else None
    if profile is None:
        return 1, set()
    return profile.tp, {a.split("=", 1)[0] for a in profile.extra_args}


def _sglang_decisions(
    manifest: Manifest,
    cc: tuple[int, ...] | None,
    topology: Topology | None,
    real_keys: list[int] | None = None,
) -> list[Result]:
    """SGLang's choices for this stack, from the installed SGLang's own table where it could be
    read (runtime.sglang probe), else from the table recorded from the 0.5.9 wheel."""
    tp, flags = _profile_flags(manifest)
    known = set(real_keys) if real_keys else set(sr.TORCH_SYMM_MEM_MAX_SIZES)
    source_note = (
        "SGLang's table read from the installed sglang"
        if real_keys
        else f"table recorded from SGLang {sr.SGLANG_TABLE_VERSION}"
    )
    pin = manifest.package("sglang")
    pinned = pin.version or (pin.ref or "").lstrip("v") if pin else None
    if pinned and not real_keys and pinned != str(sr.SGLANG_TABLE_VERSION):
        source_note += f" (the stack pins sglang {pinned}: re-check on upgrade)"
    sources = {f"target {a}": arch_cc(a)[0] for a in manifest.host.target_archs}
    if cc is not None:
        sources[f"device SM{cc[0]}{cc[1]}"] = int(cc[0])
    fi_pin = manifest.package("flashinfer-python")
    fi_version = Version(fi_pin.version) if fi_pin and fi_pin.version else None
    return [
        _symm_mem_result(sources, known, tp, "--enable-torch-symm-mem" in flags, source_note),
        _custom_allreduce_result(tp, topology),
        _fusion_result(sources, fi_version, "--enable-flashinfer-allreduce-fusion" in flags),
    ]


def _symm_mem_result(
    sources: dict[str, int], known: set[int], tp: int, wanted: bool, source_note: str
) -> Result:
    """torch symmetric memory: SGLang's size table has no row for an arch (KeyError: 12)."""
    table = {
        where: {ws: sr.torch_symm_mem(major, ws).reason for ws in (2, 4, 6, 8)}
        for where, major in sources.items()
    }
    evidence = {"table": table, "keys": sorted(known)}
    check: RuntimeCheck = "runtime.sglang.torch_symm_mem"
    bad = [where for where, major in sources.items() if major not in known and major >= 9]
    if bad and wanted:
        reason = sr.torch_symm_mem(sources[bad[0]], tp).reason
        return _r(check, "FAIL", f"{', '.join(bad)}: {reason} ({source_note})", evidence)
    if bad:
        return _r(
            check,
            "SKIP",
            "the serving profile does not pass --enable-torch-symm-mem; on "
            f"{', '.join(bad)} it would raise KeyError: {sources[bad[0]]} "
            f"(keys {sorted(known)}; {source_note})",
            evidence,
        )
    return _r(
        check,
        "PASS",
        "SGLang's torch-symm-mem tables cover " + ", ".join(sources) + f" ({source_note})",
        evidence,
    )


def _custom_allreduce_result(tp: int, topology: Topology | None) -> Result:
    """Custom all-reduce on or off for this TP size and interconnect (said, never a failure)."""
    full_nvlink = topology == "nvlink"
    car = {ws: sr.custom_all_reduce(ws, full_nvlink).reason for ws in (2, 4, 6, 8)}
    decision = sr.custom_all_reduce(tp, full_nvlink)
    return _r(
        "runtime.sglang.custom_allreduce",
        "PASS",
        f"TP {tp} on {topology or 'unknown'} interconnect: custom all-reduce "
        f"{'on' if decision.enabled else 'off'} ({decision.reason})",
        {"by_world_size": car, "tp": tp, "topology": topology},
    )


def _fusion_result(sources: dict[str, int], fi_version: Version | None, wanted: bool) -> Result:
    """FlashInfer all-reduce fusion: a flag that is a no-op on SM12x fails the profile."""
    fusion = {
        where: sr.flashinfer_fusion(major, fi_version).reason for where, major in sources.items()
    }
    check: RuntimeCheck = "runtime.sglang.allreduce_fusion"
    targets_sm12 = any(m == 12 for w, m in sources.items() if w.startswith("target "))
    if wanted and targets_sm12:
        return _r(
            check,
            "FAIL",
            "the profile passes --enable-flashinfer-allreduce-fusion, a no-op on SM12x: "
            + sr.flashinfer_fusion(12, fi_version).reason,
            {"by_arch": fusion},
        )
    no_fusion = [w for w, m in sources.items() if not sr.flashinfer_fusion(m, fi_version).enabled]
    return _r(
        check,
        "PASS",
        ("FlashInfer all-reduce fusion off on " + ", ".join(no_fusion))
        if no_fusion
        else "FlashInfer all-reduce fusion available",
        {"by_arch": fusion},
    )
