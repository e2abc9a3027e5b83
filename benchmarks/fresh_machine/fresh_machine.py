"""Prove the README's set-up on a machine that has never seen the project (`nox -s fresh-machine`).

Builds a pristine Debian 12 root with debootstrap (variant minbase: no Python, no git), copies
the checkout in (git's tracked and untracked-not-ignored files, nothing built), enters it with
chroot and runs the README's `setup-commands` and `test-commands` blocks verbatim, one command
at a time: the tools command, then the fast test subset (`--full`: the full test command instead). Every step is
timed; the Debian package count and disk use are taken before and after. Results go to
benchmarks/fresh_machine/results/fresh_machine.{json,md}. Needs root, debootstrap and Debian's mirror.

    python benchmarks/fresh_machine/fresh_machine.py [--full] [--keep] [--mirror URL] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "fresh_machine" / "results"
SUITE = "bookworm"  # Debian 12
CHROOT_ENV = {
    "HOME": "/root",
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "C.UTF-8",
    "TERM": "dumb",
}


# The network's own settings (a TLS-intercepting egress here): its CA files and the variables
# that point clients at the system bundle or a proxy are the only things taken from the host.
NETWORK_VARS = ("SSL_CERT_FILE", "SSL_CERT_DIR", "PIP_CERT", "REQUESTS_CA_BUNDLE",
                "CURL_CA_BUNDLE", "GIT_SSL_CAINFO", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
                "http_proxy", "https_proxy", "no_proxy")
HOST_CA_DIR = Path("/usr/local/share/ca-certificates")


def network_env() -> dict[str, str]:
    return {k: os.environ[k] for k in NETWORK_VARS if k in os.environ}


def readme_block(name: str) -> list[str]:
    """The commands of one of the README's marked blocks, comments dropped, in order."""
    text = (ROOT / "README.md").read_text()
    block = text.split(f"<!-- {name}")[1].split(f"<!-- /{name} -->")[0]
    body = block.split("```bash", 1)[1].split("```", 1)[0]
    return [line.strip() for line in body.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def readme_commands() -> list[str]:
    """The set-up command, then the two test commands (full, fast subset)."""
    return readme_block("setup-commands") + readme_block("test-commands")


def checkout_files() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, check=True,
    ).stdout.decode()
    return [f for f in out.split("\0") if f and (ROOT / f).is_file()]


def run_logged(argv: list[str], log: Path, timeout: float | None = None) -> tuple[int, float]:
    start = time.monotonic()
    with log.open("ab") as fh:
        fh.write(f"\n$ {' '.join(argv)}\n".encode())
        fh.flush()
        try:
            rc = subprocess.run(argv, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = 124
    return rc, time.monotonic() - start


def chroot_argv(rootfs: Path, command: str, cwd: str = "/root/stackgate") -> list[str]:
    env = [f"{k}={v}" for k, v in {**CHROOT_ENV, **network_env()}.items()]
    return ["chroot", str(rootfs), "/usr/bin/env", "-i", *env,
            "/bin/bash", "-c", f"cd {cwd} && {command}"]


def chroot_out(rootfs: Path, command: str) -> str:
    # From "/": the pristine probes run before the checkout is copied in.
    done = subprocess.run(chroot_argv(rootfs, command, cwd="/"), capture_output=True, text=True,
                          check=False)
    return done.stdout.strip()


def du_mb(path: Path) -> float:
    done = subprocess.run(["du", "-sxm", str(path)], capture_output=True, text=True, check=False)
    return float(done.stdout.split()[0]) if done.stdout else 0.0


def tail(log: Path, lines: int = 15) -> list[str]:
    return log.read_text(errors="replace").splitlines()[-lines:]


_PYTEST_SUMMARY = re.compile(r"^=+ (.+?) in ([\d.]+)s(?: \([\d:]+\))? =+$", re.M)
_PYTEST_COUNT = re.compile(r"(\d+) (passed|failed|skipped|deselected|xfailed|xpassed|errors?|warnings?)")
_BOOTSTRAP_MARK = re.compile(r"^bootstrap: (?!still )(.+) \((\d+) s\)$", re.M)  # not the heartbeats


def measured(section: str) -> dict[str, object]:
    """From one command's part of the log: each pytest run's counts and seconds (its summary
    line), and the bootstrap's marks (what, seconds since it started)."""
    runs = [{**{kind: int(n) for n, kind in _PYTEST_COUNT.findall(m.group(1))},
             "seconds": float(m.group(2))} for m in _PYTEST_SUMMARY.finditer(section)]
    marks = [{"what": m.group(1), "at_s": int(m.group(2))} for m in _BOOTSTRAP_MARK.finditer(section)]
    return {"pytest": runs, "bootstrap": marks}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--full", action="store_true", help="run the full test command, not the fast subset")
    ap.add_argument("--keep", action="store_true", help="keep the root afterwards")
    ap.add_argument("--mirror", default="http://deb.debian.org/debian")
    ap.add_argument("--workdir", type=Path, default=Path("/var/tmp/stackgate-fresh-machine"))
    ap.add_argument("--timeout", type=float, default=5400, help="per command, seconds")
    args = ap.parse_args()
    if os.geteuid() != 0 or shutil.which("debootstrap") is None or shutil.which("chroot") is None:
        print("fresh-machine: needs root, debootstrap (apt-get install debootstrap) and chroot", file=sys.stderr)
        return 3
    commands = readme_commands()
    if len(commands) != 3:
        print(f"fresh-machine: README setup-commands + test-commands blocks have {len(commands)} commands, expected 3", file=sys.stderr)
        return 2
    to_run = [commands[0], commands[1] if args.full else commands[2]]

    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    work = args.workdir / stamp
    rootfs = work / "rootfs"
    log = work / "fresh_machine.log"
    work.mkdir(parents=True)
    cache = Path.home() / ".cache" / "stackgate" / "debootstrap"  # .debs only: the root stays pristine
    cache.mkdir(parents=True, exist_ok=True)
    steps: list[dict[str, object]] = []
    mounted: list[Path] = []
    pristine: dict[str, object] = {}
    after: dict[str, object] = {}
    ok = True
    try:
        print(f"fresh-machine: debootstrap {SUITE} into {rootfs} (log {log})", flush=True)
        rc, secs = run_logged(["debootstrap", "--variant=minbase", f"--cache-dir={cache}",
                               SUITE, str(rootfs), args.mirror], log)
        steps.append({"step": f"debootstrap --variant=minbase {SUITE}", "rc": rc, "seconds": round(secs, 1)})
        print(f"fresh-machine: debootstrap rc={rc} {secs:.0f} s", flush=True)
        if rc != 0:
            return 1
        # The root must be a mount point of its own: containers/storage (buildah, podman)
        # remounts "/" private when it applies a layer, which fails on a plain chroot folder.
        # Private from the start, so the mounts below never propagate back to the host's "/".
        subprocess.run(["mount", "--bind", str(rootfs), str(rootfs)], check=True)
        subprocess.run(["mount", "--make-private", str(rootfs)], check=True)
        mounted.append(rootfs)
        # /proc, /sys and /dev as on a booted machine. /sys and /dev are bound recursively:
        # the cgroup hierarchies are mounts of their own under /sys/fs/cgroup (v1 controllers
        # on a hybrid host like this one, cgroup2 elsewhere), /dev/pts and /dev/shm under /dev.
        # A plain bind of /sys/fs/cgroup brings only its tmpfs, and runc then refuses every
        # container ("runc create failed: no cgroup mount found in mountinfo": podman exit 126).
        # rslave: unmounting the chroot's copies never unmounts the host's.
        for sub, how in (("proc", ["-t", "proc", "proc"]), ("sys", ["--rbind", "/sys"]),
                         ("dev", ["--rbind", "/dev"])):
            target = rootfs / sub
            target.mkdir(exist_ok=True)
            subprocess.run(["mount", *how, str(target)], check=True)
            mounted.append(target)
            if how[0] == "--rbind":
                subprocess.run(["mount", "--make-rslave", str(target)], check=True)
        shutil.copy2("/etc/resolv.conf", rootfs / "etc" / "resolv.conf")
        if HOST_CA_DIR.is_dir():  # ca-certificates (installed by the set-up) picks them up
            shutil.copytree(HOST_CA_DIR, rootfs / HOST_CA_DIR.relative_to("/"), dirs_exist_ok=True)
        pristine = {
            "debian_packages": int(chroot_out(rootfs, "dpkg-query -W | wc -l") or 0),
            "python3": chroot_out(rootfs, "command -v python3 || echo none"),
            "git": chroot_out(rootfs, "command -v git || echo none"),
            "rootfs_mb": du_mb(rootfs),
        }
        start = time.monotonic()
        dest = rootfs / "root" / "stackgate"
        for rel in checkout_files():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, dest / rel)
        steps.append({"step": "copy the checkout (git ls-files)", "rc": 0,
                      "seconds": round(time.monotonic() - start, 1), "files": len(checkout_files())})
        for command in to_run:
            print(f"fresh-machine: $ {command}", flush=True)
            offset = log.stat().st_size
            rc, secs = run_logged(chroot_argv(rootfs, command), log, timeout=args.timeout)
            with log.open("rb") as fh:
                fh.seek(offset)
                section = fh.read().decode(errors="replace")
            steps.append({"step": command, "rc": rc, "seconds": round(secs, 1),
                          **measured(section), "tail": tail(log)})
            print(f"fresh-machine: rc={rc} {secs:.0f} s", flush=True)
            if rc != 0:
                ok = False
                break
        after = {
            "debian_packages": int(chroot_out(rootfs, "dpkg-query -W | wc -l") or 0),
            "rootfs_mb": du_mb(rootfs),
            "tools_mb": du_mb(dest / ".tools"),
            "nox_mb": du_mb(dest / ".nox"),
            "home_cache_mb": du_mb(rootfs / "root" / ".cache"),
        }
    finally:
        for target in reversed(mounted):
            subprocess.run(["umount", "--recursive", "--lazy", str(target)], check=False)
        if not args.keep and not mounted_busy(rootfs):
            shutil.rmtree(work / "rootfs", ignore_errors=True)
    result = {
        "when": stamp,
        "host": {"kernel": platform.release(), "cpus": os.cpu_count(),
                 "loadavg_at_end": os.getloadavg()},
        "suite": SUITE, "variant": "minbase", "readme_commands": to_run,
        "from_the_host": {"network_env": sorted(network_env()),
                          "ca_files": sorted(p.name for p in HOST_CA_DIR.glob("*.crt"))},
        "pristine": pristine, "after": after, "steps": steps,
        "passed": ok, "total_seconds": round(sum(float(s["seconds"]) for s in steps), 1),  # type: ignore[arg-type]
        "log": str(log),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "fresh_machine.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("passed", "total_seconds", "pristine", "after")}, indent=2))
    return 0 if ok else 1


def mounted_busy(rootfs: Path) -> bool:
    """True while anything under the root is still mounted (never rm -rf through a live /dev)."""
    inside = f"{rootfs}/"
    for line in Path("/proc/mounts").read_text().splitlines():
        target = line.split()[1]
        if target == str(rootfs) or target.startswith(inside):
            return True
    return False


if __name__ == "__main__":
    sys.exit(main())
