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
# Job accounting (`accounting=True`): Debian's slurmdbd and MariaDB (apt: slurmdbd mariadb-server).
ACCOUNTING = ("slurmdbd", "sacctmgr", "sacct", "mariadbd", "mariadb-install-db", "mariadb")


def missing_tools(names: tuple[str, ...] = (*DAEMONS, *CLIENTS)) -> list[str]:
    found = {
        name: shutil.which(name, path=f"{os.environ.get('PATH', '')}:/usr/sbin:/sbin")
        for name in names
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


def _accounting_conf(root: Path, dbd_port: int, db_port: int) -> str:
    short = socket.gethostname().split(".")[0]
    return "\n".join([
        "AuthType=auth/munge",
        f"AuthInfo=socket={root}/munge.socket",
        f"DbdHost={short}",
        "DbdAddr=127.0.0.1",
        f"DbdPort={dbd_port}",
        "SlurmUser=root",
        f"LogFile={root}/slurmdbd.log",
        f"PidFile={root}/slurmdbd.pid",
        "StorageType=accounting_storage/mysql",
        "StorageHost=127.0.0.1",
        f"StoragePort={db_port}",
        "StorageUser=slurm",
        "StoragePass=stackgate-ci",
        "StorageLoc=slurm_acct_db",
    ]) + "\n"  # fmt: skip


@contextlib.contextmanager
def slurm_cluster(
    nodes: list[str], extra_conf: tuple[str, ...] = (), *, accounting: bool = False
) -> Iterator[SlurmCluster]:
    """`extra_conf`: more slurm.conf lines (e.g. MaxArraySize=3, MinJobAge=5). `accounting`:
    also a MariaDB server (its own data folder, 127.0.0.1 on a free port) and slurmdbd, the
    cluster registered with sacctmgr, slurmctld storing every job there (sacct reads it)."""
    # munged wants every folder on its socket's path searchable by all (pytest's tmp is 0700).
    root = Path(tempfile.mkdtemp(prefix="stackgate-slurm-"))
    root.chmod(0o755)
    (root / "state").mkdir()
    (root / "spool").mkdir()
    key = root / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    conf = root / "slurm.conf"
    dbd_port, db_port = _free_port(), _free_port()
    if accounting:
        extra_conf = (
            *extra_conf,
            "AccountingStorageType=accounting_storage/slurmdbd",
            "AccountingStorageHost=127.0.0.1",
            f"AccountingStoragePort={dbd_port}",
            # For slurmdbd, the munge socket clients use (slurm.conf's AuthInfo is not).
            f"AccountingStoragePass={root}/munge.socket",
        )
        dbd = root / "slurmdbd.conf"  # beside slurm.conf, where slurmdbd looks; root only
        dbd.write_text(_accounting_conf(root, dbd_port, db_port))
        dbd.chmod(0o600)
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
        if accounting:
            _start_accounting(cluster, start, db_port)
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


def _start_accounting(
    cluster: SlurmCluster, start: Callable[[list[str], str], None], db_port: int
) -> None:
    """MariaDB in root/db (a user `slurm` for slurmdbd), slurmdbd, the cluster registered."""
    root = cluster.root
    db = root / "db"
    init = [_sbin("mariadb-install-db"), "--no-defaults", f"--datadir={db}", "--user=root",
            "--auth-root-authentication-method=socket", "--skip-test-db"]  # fmt: skip
    done = subprocess.run(init, capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"mariadb-install-db exited {done.returncode}\n{done.stderr[-2000:]}")
    sock = root / "mysql.sock"
    start(
        [_sbin("mariadbd"), "--no-defaults", f"--datadir={db}", f"--socket={sock}",
         f"--port={db_port}", "--bind-address=127.0.0.1", "--skip-name-resolve", "--user=root",
         f"--pid-file={root}/mariadb.pid", f"--log-error={root}/mariadb.log"],
        "mariadb.out.log",
    )  # fmt: skip
    _wait_for(sock.exists, 60, "the MariaDB socket", cluster)
    grant = (
        "CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY 'stackgate-ci'; "
        "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"
    )
    sql = [_sbin("mariadb"), "--no-defaults", f"--socket={sock}", "-u", "root", "-e", grant]
    done = subprocess.run(sql, capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"mariadb: {done.stderr}")
    start([_sbin("slurmdbd"), "-D"], "slurmdbd.out.log")

    def registered() -> bool:
        add = cluster.cmd("sacctmgr", "-i", "add", "cluster", "stackgate-ci", check=False)
        return add.returncode == 0 or "already exists" in add.stdout + add.stderr

    _wait_for(registered, 60, "slurmdbd to register the cluster", cluster)


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
