"""Kubernetes: an Indexed Job (one pod per node) and a collector Job that waits for it.

The manifests are checked by loading them into the `kubernetes` client's models
(tests/fleet/test_kube.py), never applied.

- Placement: required node affinity to the node set plus required pod anti-affinity on
  `kubernetes.io/hostname` among this fleet's pods, so with parallelism = completions (the
  default) N pods land on N distinct nodes. With a smaller parallelism a later pod may land on a
  node whose pod already finished: the verdict then shows one status and the other MISSING.
- The env is built on the node (hostPath `host_path`, mounted at local_root) and reused by the
  next run with the same lock; wheelhouse, job folder and team store live on a ReadWriteMany
  claim at `claim_mount`.
- A validation FAIL is a result: the node step exits 0 once it wrote status.json (`--exit-zero`);
  `backoffLimitPerIndex: 0` (Kubernetes >= 1.29) keeps one crashed pod from failing the others.
- The collector's init container polls the Job until Complete or Failed (afterany), with a
  ServiceAccount that may only read Jobs; its pod has another role label, so the validation
  pods' anti-affinity never avoids a node because the collector landed there.
- Bounds: `activeDeadlineSeconds` (`--node-deadline`), a disrupted pod fails its index instead
  of running again (`podFailurePolicy` FailIndex on DisruptionTarget), CPU and memory requests,
  an optional PriorityClass, no privilege escalation, every capability dropped, runtime seccomp.
- Pod Security "baseline" refuses `hostPath`: the namespace must be "privileged", or
  `--host-path ''` uses an emptyDir (built afresh every run).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from validators.fleet.spec import FleetSpec, KubeOptions

SPEC_MOUNT = "/etc/stackgate-fleet"
SPEC_PATH = f"{SPEC_MOUNT}/fleet.json"


def k8s_name(text: str, suffix: str = "") -> str:
    """A DNS-1123 label: lowercase alphanumerics and '-', at most 63 characters."""
    base = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    return f"{base[: 63 - len(suffix)].rstrip('-')}{suffix}"


def _options(spec: FleetSpec) -> KubeOptions:
    if spec.kubernetes is None:
        raise ValueError("the spec has no kubernetes options")
    return spec.kubernetes


def _shared_volumes(k: KubeOptions, config: str) -> list[dict[str, Any]]:
    """The ReadWriteMany claim (wheelhouse, job folder, store) and the spec's ConfigMap."""
    return [
        {"name": "fleet", "persistentVolumeClaim": {"claimName": k.claim}},
        {"name": "spec", "configMap": {"name": config}},
    ]


def _shared_mounts(k: KubeOptions) -> list[dict[str, Any]]:
    return [
        {"name": "fleet", "mountPath": k.claim_mount},
        {"name": "spec", "mountPath": SPEC_MOUNT, "readOnly": True},
    ]


def _local_volume(k: KubeOptions) -> dict[str, Any]:
    """The node-local folder: hostPath (reused across runs), or an emptyDir where Pod
    Security forbids hostPath (`--host-path ''`)."""
    if not k.host_path:
        return {"name": "local", "emptyDir": {}}
    return {"name": "local", "hostPath": {"path": k.host_path, "type": "DirectoryOrCreate"}}


@dataclass(frozen=True)
class _Common:
    """What every object of one fleet shares: names, labels, and the pods' security."""

    spec: FleetSpec
    k: KubeOptions
    name: str
    collect: str
    labels: dict[str, str]

    @property
    def meta(self) -> dict[str, Any]:
        return {"namespace": self.k.namespace, "labels": self.labels}

    def role_labels(self, role: str) -> dict[str, str]:
        # the anti-affinity selects validation pods only: a collector pod on a target node must
        # not keep that node's validation pod from scheduling
        return {**self.labels, "stackgate.dev/role": role}

    def pod_spec(self) -> dict[str, Any]:
        """Never retried, never root. The GPUs stay usable: the device plugin's runtime hook
        puts /dev/nvidia* in the container with the host's modes (0666 by the driver's
        default), and the files a pod writes (claim, emptyDir) get the pod's fsGroup."""
        uid = self.k.run_as_user
        priority = {"priorityClassName": self.k.priority_class} if self.k.priority_class else {}
        return {
            "restartPolicy": "Never",
            **priority,
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": uid,
                "runAsGroup": uid,
                "fsGroup": uid,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
        }


SAFE_CONTAINER = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}
HOME = {"name": "HOME", "value": "/tmp"}  # uv's cache and kubectl's: a user with no home


def manifests(spec: FleetSpec) -> list[dict[str, Any]]:
    """ConfigMap (the spec), the Indexed Job, the collector's RBAC and the collector Job."""
    k = _options(spec)
    name = k8s_name(f"stackgate-{spec.fleet_id}")
    labels = {"app.kubernetes.io/name": "stackgate-fleet", "stackgate.dev/fleet": name}
    c = _Common(spec, k, name, k8s_name(f"stackgate-{spec.fleet_id}", "-collect"), labels)
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, **c.meta},
        "data": {"fleet.json": spec.to_json()},
    }
    return [config_map, _validate_job(c), *_collector_rbac(c), _collector_job(c)]


def _placement(c: _Common) -> dict[str, Any]:
    """One pod per target node: node affinity to the set, anti-affinity among the fleet's
    validation pods on the hostname."""
    hostname = "kubernetes.io/hostname"
    node_term = {
        "matchExpressions": [{"key": hostname, "operator": "In", "values": list(c.spec.targets)}]
    }
    selector = {"matchLabels": {"stackgate.dev/fleet": c.name, "stackgate.dev/role": "validate"}}
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [node_term]}
        },
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": selector, "topologyKey": hostname}
            ]
        },
    }


def _validate_container(c: _Common) -> dict[str, Any]:
    spec, k = c.spec, c.k
    node_cmd = [spec.python, "-m", "validators", "fleet", "node"]
    node_cmd += ["--spec", SPEC_PATH, "--job-dir", spec.job_dir, "--exit-zero"]
    resources: dict[str, Any] = {"requests": {"cpu": k.cpu, "memory": k.memory}}
    if k.gpus:
        resources["limits"] = {"nvidia.com/gpu": str(k.gpus)}
    # the node's name, not the pod's: the fingerprint uses it
    node_name = {
        "name": "STACKGATE_HOSTNAME",
        "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}},
    }
    return {
        "name": "validate",
        "image": k.image,
        "workingDir": spec.checkout,
        "command": node_cmd,
        "env": [node_name, HOME],
        "resources": resources,
        "securityContext": SAFE_CONTAINER,
        "volumeMounts": [
            *_shared_mounts(k),
            {"name": "local", "mountPath": spec.local_root},
            {"name": "shm", "mountPath": "/dev/shm"},
        ],
    }


def _validate_job(c: _Common) -> dict[str, Any]:
    """The Indexed Job: one completion per target, a disrupted pod fails its index (one
    attempt per node per run), bounded by the node deadline."""
    k = c.k
    disrupted = {"type": "DisruptionTarget", "status": "True"}
    pod = {
        **c.pod_spec(),
        "affinity": _placement(c),
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        "containers": [_validate_container(c)],
        "volumes": [
            *_shared_volumes(k, c.name),
            _local_volume(k),
            # NCCL needs more than the 64 MiB default /dev/shm
            {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}},
        ],
    }
    # activeDeadlineSeconds sits right after restartPolicy, as the manifests always had it
    pod = {
        "restartPolicy": pod.pop("restartPolicy"),
        "activeDeadlineSeconds": k.node_deadline_s,
        **pod,
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": c.name, **c.meta},
        "spec": {
            "completionMode": "Indexed",
            "completions": len(c.spec.targets),
            "parallelism": k.parallelism or len(c.spec.targets),
            "backoffLimitPerIndex": 0,
            "podFailurePolicy": {
                "rules": [{"action": "FailIndex", "onPodConditions": [disrupted]}]
            },
            "template": {"metadata": {"labels": c.role_labels("validate")}, "spec": pod},
        },
    }


def _collector_rbac(c: _Common) -> list[dict[str, Any]]:
    """A ServiceAccount allowed only to read Jobs in the namespace."""
    meta = {"name": c.collect, **c.meta}
    rbac = "rbac.authorization.k8s.io/v1"
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta},
        {
            "apiVersion": rbac,
            "kind": "Role",
            "metadata": meta,
            "rules": [{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "watch"]}],
        },
        {
            "apiVersion": rbac,
            "kind": "RoleBinding",
            "metadata": meta,
            "subjects": [{"kind": "ServiceAccount", "name": c.collect, "namespace": c.k.namespace}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": c.collect},
        },
    ]


def _collector_job(c: _Common) -> dict[str, Any]:
    """Waits (init container polling the Job until Complete or Failed), then collects."""
    spec, k = c.spec, c.k
    wait = (
        f"until kubectl get job {c.name} -o "
        "jsonpath='{.status.conditions[?(@.status==\"True\")].type}' "
        "| grep -qE 'Complete|Failed'; do sleep 30; done"
    )
    waiter = {
        "name": "wait",
        "image": k.kubectl_image,
        "command": ["sh", "-c", wait],
        "env": [HOME],
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}},
        "securityContext": SAFE_CONTAINER,
    }
    collect_cmd = [spec.python, "-m", "validators", "fleet", "collect"]
    collector = {
        "name": "collect",
        "image": k.image,
        "workingDir": spec.checkout,
        "command": [*collect_cmd, "--spec", SPEC_PATH, "--job-dir", spec.job_dir],
        "env": [HOME],
        "volumeMounts": _shared_mounts(k),
        "resources": {"requests": {"cpu": "1", "memory": "2Gi"}},
        "securityContext": SAFE_CONTAINER,
    }
    pod = c.pod_spec()
    pod = {
        "restartPolicy": pod.pop("restartPolicy"),
        "serviceAccountName": c.collect,
        **pod,
        "initContainers": [waiter],
        "containers": [collector],
        "volumes": _shared_volumes(k, c.name),
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": c.collect, **c.meta},
        "spec": {
            "backoffLimit": 0,
            "template": {"metadata": {"labels": c.role_labels("collect")}, "spec": pod},
        },
    }


def as_list(items: list[dict[str, Any]]) -> dict[str, Any]:
    """One document `kubectl apply -f` takes."""
    return {"apiVersion": "v1", "kind": "List", "items": items}
