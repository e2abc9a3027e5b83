"""Kubernetes: an Indexed Job (one pod per node) and a collector Job that waits for it.

No cluster was reachable where this was written: the manifests are checked by loading them
into the `kubernetes` client's models (tests/fleet/test_kube.py), never applied.

- Placement: required node affinity to the node set plus required pod anti-affinity on
  `kubernetes.io/hostname` among this fleet's pods. With parallelism = completions (the
  default) every pod runs at once, so N pods land on N distinct nodes of an N-node set. With a
  smaller parallelism a later pod may land on a node whose pod already finished (the scheduler
  forgets finished pods): the verdict then shows that node's one status and the other as MISSING.
- The env is built on the node (hostPath `host_path`, mounted at the spec's local_root) and
  reused by the next run with the same lock; the wheelhouse, the job folder and the team's
  store live on a ReadWriteMany claim mounted at `claim_mount`.
- A validation FAIL is a result: the node step exits 0 once it wrote status.json (`--exit-zero`),
  and `backoffLimitPerIndex: 0` (Kubernetes >= 1.29) keeps one crashed pod from failing the
  others; nothing is retried.
- The collector's init container polls the Job until it is Complete or Failed (afterany), with
  a ServiceAccount allowed only to read Jobs in the namespace. Its pod carries another role
  label than the validation pods, so their anti-affinity never keeps a target node from
  scheduling because the collector landed there.
- Bounds and safety: each validation pod has `activeDeadlineSeconds` (`--node-deadline`), a pod
  disrupted (node drained, preempted) fails its index instead of running the node again
  (`podFailurePolicy` FailIndex on DisruptionTarget: one attempt per node per run), CPU and
  memory requests, an optional PriorityClass, and containers without privilege escalation,
  with every capability dropped and the runtime's seccomp profile.
- The `hostPath` volume (the env reused across runs) is refused by Pod Security "baseline":
  the namespace must allow it ("privileged"), or `--host-path ''` uses an emptyDir (built
  afresh every run).
"""

from __future__ import annotations

import re
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


def manifests(spec: FleetSpec) -> list[dict[str, Any]]:
    """ConfigMap (the spec), the Indexed Job, the collector's RBAC and the collector Job."""
    k = _options(spec)
    name = k8s_name(f"stackgate-{spec.fleet_id}")
    collect = k8s_name(f"stackgate-{spec.fleet_id}", "-collect")
    labels = {"app.kubernetes.io/name": "stackgate-fleet", "stackgate.dev/fleet": name}
    meta = {"namespace": k.namespace, "labels": labels}
    # The anti-affinity selects validation pods only: a collector pod on a target node must not
    # keep that node's validation pod from scheduling.
    validate_labels = {**labels, "stackgate.dev/role": "validate"}
    collect_labels = {**labels, "stackgate.dev/role": "collect"}
    safe = {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    priority = {"priorityClassName": k.priority_class} if k.priority_class else {}
    # Pod Security "restricted": never root. The GPUs stay usable: the device plugin's runtime
    # hook puts /dev/nvidia* in the container with the host's modes (0666 by the driver's
    # default), and the files a pod writes (claim, emptyDir) get the pod's fsGroup.
    uid = k.run_as_user
    pod_security = {
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": uid,
            "runAsGroup": uid,
            "fsGroup": uid,
            "seccompProfile": {"type": "RuntimeDefault"},
        }
    }
    home = {"name": "HOME", "value": "/tmp"}  # uv's cache and kubectl's: a user with no home
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, **meta},
        "data": {"fleet.json": spec.to_json()},
    }
    node_cmd = [spec.python, "-m", "validators", "fleet", "node"]
    node_cmd += ["--spec", SPEC_PATH, "--job-dir", spec.job_dir, "--exit-zero"]
    resources: dict[str, Any] = {"requests": {"cpu": k.cpu, "memory": k.memory}}
    if k.gpus:
        resources["limits"] = {"nvidia.com/gpu": str(k.gpus)}
    validate = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, **meta},
        "spec": {
            "completionMode": "Indexed",
            "completions": len(spec.targets),
            "parallelism": k.parallelism or len(spec.targets),
            "backoffLimitPerIndex": 0,
            "podFailurePolicy": {
                "rules": [
                    {
                        "action": "FailIndex",
                        "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
                    }
                ]
            },
            "template": {
                "metadata": {"labels": validate_labels},
                "spec": {
                    "restartPolicy": "Never",
                    "activeDeadlineSeconds": k.node_deadline_s,
                    **priority,
                    **pod_security,
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchExpressions": [
                                            {
                                                "key": "kubernetes.io/hostname",
                                                "operator": "In",
                                                "values": list(spec.targets),
                                            }
                                        ]
                                    }
                                ]
                            }
                        },
                        "podAntiAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": [
                                {
                                    "labelSelector": {
                                        "matchLabels": {
                                            "stackgate.dev/fleet": name,
                                            "stackgate.dev/role": "validate",
                                        }
                                    },
                                    "topologyKey": "kubernetes.io/hostname",
                                }
                            ]
                        },
                    },
                    "tolerations": [
                        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
                    ],
                    "containers": [
                        {
                            "name": "validate",
                            "image": k.image,
                            "workingDir": spec.checkout,
                            "command": node_cmd,
                            "env": [
                                {
                                    # the node's name, not the pod's: the fingerprint uses it
                                    "name": "STACKGATE_HOSTNAME",
                                    "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}},
                                },
                                home,
                            ],
                            "resources": resources,
                            "securityContext": safe,
                            "volumeMounts": [
                                *_shared_mounts(k),
                                {"name": "local", "mountPath": spec.local_root},
                                {"name": "shm", "mountPath": "/dev/shm"},
                            ],
                        }
                    ],
                    "volumes": [
                        *_shared_volumes(k, name),
                        _local_volume(k),
                        # NCCL needs more than the 64 MiB default /dev/shm
                        {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}},
                    ],
                },
            },
        },
    }
    account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": collect, **meta},
    }
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": collect, **meta},
        "rules": [{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "watch"]}],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": collect, **meta},
        "subjects": [{"kind": "ServiceAccount", "name": collect, "namespace": k.namespace}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": collect},
    }
    wait = (
        f"until kubectl get job {name} -o "
        "jsonpath='{.status.conditions[?(@.status==\"True\")].type}' "
        "| grep -qE 'Complete|Failed'; do sleep 30; done"
    )
    collector = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": collect, **meta},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": collect_labels},
                "spec": {
                    "restartPolicy": "Never",
                    "serviceAccountName": collect,
                    **priority,
                    **pod_security,
                    "initContainers": [
                        {
                            "name": "wait",
                            "image": k.kubectl_image,
                            "command": ["sh", "-c", wait],
                            "env": [home],
                            "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}},
                            "securityContext": safe,
                        }
                    ],
                    "containers": [
                        {
                            "name": "collect",
                            "image": k.image,
                            "workingDir": spec.checkout,
                            "command": [
                                spec.python,
                                "-m",
                                "validators",
                                "fleet",
                                "collect",
                                "--spec",
                                SPEC_PATH,
                                "--job-dir",
                                spec.job_dir,
                            ],
                            "env": [home],
                            "volumeMounts": _shared_mounts(k),
                            "resources": {"requests": {"cpu": "1", "memory": "2Gi"}},
                            "securityContext": safe,
                        }
                    ],
                    "volumes": _shared_volumes(k, name),
                },
            },
        },
    }
    return [config_map, validate, account, role, binding, collector]


def as_list(items: list[dict[str, Any]]) -> dict[str, Any]:
    """One document `kubectl apply -f` takes."""
    return {"apiVersion": "v1", "kind": "List", "items": items}
