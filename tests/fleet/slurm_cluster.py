"""A real Slurm cluster on this one machine: munged, slurmctld and one slurmd per node name.

Debian's packages (`slurmctld slurmd slurm-client munge`, installed by .ci/bootstrap). Every
daemon runs in the foreground under this process (Popen), with its config, key, sockets,
state and logs in one temp folder, on ports picked free here, so two test runs (or another
helper's cluster) never meet. Several slurmd processes with `-N <name>` make several nodes of
one host (Slurm's "multiple slurmd" setup), so an array can be pinned element by element.
Teardown cancels every job, then stops each daemon by its own process handle.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scontrol", "scancel", "sinfo", "munge")


def missing_tools() -> list[str]:
    found = {
        name: shutil.which(name, path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin")
        for name in (*DAEMONS, *CLIENTS)
    }
    return [name for name, path in found.items() if path is None]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _sbin(name: str) -> str:
    path = shutil.which(name, path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin")
    assert path is not None, f"{name} not installed"
    return path


@dataclass
class SlurmCluster:
    root: Path
    nodes: list[str]
    conf: Path
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def cmd(self, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            list(argv), env=self.env, capture_output=True, text=True, timeout=60, check=False
        )
        if check and done.returncode != 0:
            raise AssertionError(f"{argv}: exit {done.returncode}\n{done.stdout}\n{done.stderr}")
        return done

    def queue(self) -> list[str]:
        return [
            line for line in self.cmd("squeue", "-h", "-o", "%i %T %r").stdout.splitlines() if line
        ]

    def wait_idle(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.queue():
                return True
            time.sleep(0.5)
        return False

    def wait(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        """Poll `predicate` until it holds; on a timeout fail with the queue and the logs."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.5)
        raise AssertionError(f"timed out: {what}\nqueue: {self.queue()}\n{self.logs()}")

    def logs(self) -> str:
        out = []
        for path in sorted(self.root.glob("*.log")):
            text = path.read_text(errors="replace").splitlines()[-15:]
            out.append(f"--- {path.name}\n" + "\n".join(text))
        return "\n".join(out)


def _conf(
    root: Path, nodes: list[str], ctld_port: int, node_ports: list[int], extra: tuple[str, ...] = ()
) -> str:
    short = socket.gethostname().split(".")[0]
    lines = [
        "ClusterName=stackgate-ci",
        f"SlurmctldHost={short}(127.0.0.1)",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={root}/munge.socket",
        f"SlurmctldPort={ctld_port}",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",
        "SchedulerType=sched/backfill",
        "JobAcctGatherType=jobacct_gather/none",
        "MpiDefault=none",
        "ReturnToService=2",
        f"StateSaveLocation={root}/state",
        f"SlurmdSpoolDir={root}/spool/%n",
        f"SlurmctldLogFile={root}/slurmctld.log",
        f"SlurmdLogFile={root}/slurmd-%n.log",
        f"SlurmctldPidFile={root}/slurmctld.pid",
        f"SlurmdPidFile={root}/slurmd-%n.pid",
        *extra,
    ]
    for node, port in zip(nodes, node_ports, strict=True):
        # Each node claims the machine's CPUs; --exclusive gives an element a whole "node".
        lines.append(
            f"NodeName={node} NodeHostname={short} NodeAddr=127.0.0.1 Port={port} "
            f"CPUs={os.cpu_count() or 1} RealMemory=1024 State=UNKNOWN"
        )
    lines.append(f"PartitionName=ci Nodes={','.join(nodes)} Default=YES MaxTime=60 State=UP")
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def slurm_cluster(nodes: list[str], extra_conf: tuple[str, ...] = ()) -> Iterator[SlurmCluster]:
    """`extra_conf`: more slurm.conf lines (e.g. MaxArraySize=3, MinJobAge=5)."""
    # munged wants every folder on its socket's path searchable by all (pytest's tmp is 0700).
    root = Path(tempfile.mkdtemp(prefix="stackgate-slurm-"))
    root.chmod(0o755)
    (root / "state").mkdir()
    (root / "spool").mkdir()
    key = root / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    conf = root / "slurm.conf"
    conf.write_text(_conf(root, nodes, _free_port(), [_free_port() for _ in nodes], extra_conf))
    cluster = SlurmCluster(root=root, nodes=nodes, conf=conf)
    logs: list[object] = []

    def start(argv: list[str], log: str) -> None:
        handle = (root / log).open("ab")
        logs.append(handle)
        cluster.procs.append(
            subprocess.Popen(argv, env=cluster.env, stdout=handle, stderr=subprocess.STDOUT)
        )

    try:
        start(
            [
                _sbin("munged"),
                "--foreground",
                "--force",
                f"--key-file={key}",
                f"--socket={root}/munge.socket",
                f"--pid-file={root}/munged.pid",
                f"--log-file={root}/munged.log",
                f"--seed-file={root}/munged.seed",
            ],
            "munged.out.log",
        )
        _wait_for(lambda: (root / "munge.socket").exists(), 20, "munged socket", cluster)
        start([_sbin("slurmctld"), "-D", "-f", str(conf)], "slurmctld.out.log")
        for node in nodes:
            start([_sbin("slurmd"), "-D", "-N", node, "-f", str(conf)], f"slurmd-{node}.out.log")
        _wait_for(lambda: _all_idle(cluster), 60, "every node idle in sinfo", cluster)
        yield cluster
    finally:
        with contextlib.suppress(Exception):
            cluster.cmd("scancel", "--full", "--user", "root", check=False)
            cluster.wait_idle(20)
        for proc in reversed(cluster.procs):
            proc.terminate()
        for proc in reversed(cluster.procs):
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=15)
        for handle in logs:
            handle.close()  # type: ignore[attr-defined]
        if not os.environ.get("STACKGATE_KEEP_SLURM"):
            shutil.rmtree(root, ignore_errors=True)


def _all_idle(cluster: SlurmCluster) -> bool:
    done = cluster.cmd("sinfo", "-h", "-N", "-o", "%N %t", check=False)
    if done.returncode != 0:
        return False
    states = dict(line.split() for line in done.stdout.splitlines() if line.strip())
    return all(states.get(n) == "idle" for n in cluster.nodes)


def _wait_for(ready: object, timeout: float, what: str, cluster: SlurmCluster) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():  # type: ignore[operator]
            return
        for proc in cluster.procs:
            if proc.poll() is not None:
                raise RuntimeError(f"{proc.args[0]} exited {proc.returncode}\n{cluster.logs()}")
        time.sleep(0.3)
    raise RuntimeError(f"timed out waiting for {what}\n{cluster.logs()}")
