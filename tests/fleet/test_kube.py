"""Kubernetes manifests from `fleet submit --scheduler kubernetes --dry-run`, loaded into the
`kubernetes` client's models field by field (no cluster is reachable here: nothing is applied)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fleet.kube_strict import load

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "registry.example.com/stackgate/cu130@sha256:" + "ab" * 32


def _dry_run(*extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable, "-m", "validators", "fleet", "submit", "cu130",
            "--scheduler", "kubernetes", "--image", IMAGE,
            "--nodes", "gpu[01-04]",
            "--wheelhouse", "/fleet/wheelhouse/cu130",
            "--jobs-root", "/fleet/jobs",
            "--local-root", "/local/stackgate",
            "--checkout", "/opt/stackgate/checkout",
            "--store", "/fleet/team.sqlite",
            "--fleet-id", "Nightly_cu130",
            "--dry-run", "--json", *extra,
        ],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def items() -> list[dict[str, Any]]:
    done = _dry_run()
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["commands"] == [["kubectl", "apply", "-f", "/fleet/jobs/Nightly_cu130/kubernetes.json"]]
    doc = json.loads(out["files"]["kubernetes.json"])
    assert doc["kind"] == "List"
    return list(doc["items"])


def test_every_manifest_loads_into_the_client_models(items: list[dict[str, Any]]) -> None:
    kinds = [type(load(item)).__name__ for item in items]
    assert kinds == ["V1ConfigMap", "V1Job", "V1ServiceAccount", "V1Role", "V1RoleBinding", "V1Job"]


def test_indexed_job_one_pod_per_node_with_gpus_and_local_disk(items: list[dict[str, Any]]) -> None:
    job = load(items[1])
    spec = job.spec
    assert job.metadata.name == "stackgate-nightly-cu130"
    assert (spec.completion_mode, spec.completions, spec.parallelism) == ("Indexed", 4, 4)
    assert spec.backoff_limit_per_index == 0
    pod = spec.template.spec
    term = pod.affinity.node_affinity.required_during_scheduling_ignored_during_execution
    assert term.node_selector_terms[0].match_expressions[0].values == ["gpu01", "gpu02", "gpu03", "gpu04"]
    anti = pod.affinity.pod_anti_affinity.required_during_scheduling_ignored_during_execution[0]
    assert anti.topology_key == "kubernetes.io/hostname"
    [container] = pod.containers
    assert container.resources.limits == {"nvidia.com/gpu": "8"}
    assert container.env[0].value_from.field_ref.field_path == "spec.nodeName"
    assert container.command[-5:] == ["--spec", "/etc/stackgate-fleet/fleet.json", "--job-dir", "/fleet/jobs/Nightly_cu130", "--exit-zero"]
    volumes = {v.name: v for v in pod.volumes}
    assert volumes["local"].host_path.path == "/var/lib/stackgate"
    assert volumes["fleet"].persistent_volume_claim.claim_name == "stackgate-fleet"
    mounts = {m.name: m.mount_path for m in container.volume_mounts}
    assert mounts["local"] == "/local/stackgate" and mounts["fleet"] == "/fleet"


def test_collector_waits_for_the_job_and_imports(items: list[dict[str, Any]]) -> None:
    config = load(items[0])
    spec = json.loads(config.data["fleet.json"])
    assert spec["nodes"] == ["gpu01", "gpu02", "gpu03", "gpu04"] and spec["scheduler"] == "kubernetes"
    collector = load(items[5]).spec.template.spec
    wait = collector.init_containers[0].command
    assert "kubectl get job stackgate-nightly-cu130" in wait[-1]
    syntax = subprocess.run(["sh", "-n", "-c", wait[-1]], capture_output=True, text=True, check=False)
    assert syntax.returncode == 0, syntax.stderr  # the wait loop parses as a shell script
    assert collector.containers[0].command[3:5] == ["fleet", "collect"]
    role = load(items[3])
    assert role.rules[0].resources == ["jobs"] and set(role.rules[0].verbs) == {"get", "watch"}


@pytest.mark.parametrize(
    ("path", "typo"),
    [
        (("spec",), "completionmode"),
        (("spec", "template", "spec"), "restartpolicy"),
        (("spec", "template", "spec", "containers", 0), "volumeMount"),
    ],
)
def test_a_typo_in_any_field_fails(items: list[dict[str, Any]], path: tuple[Any, ...], typo: str) -> None:
    broken = copy.deepcopy(items[1])
    node = broken
    for key in path:
        node = node[key]
    node[typo] = "x"
    with pytest.raises(ValueError, match=typo):
        load(broken)


def test_a_gpu_count_must_be_a_quantity_string(items: list[dict[str, Any]]) -> None:
    broken = copy.deepcopy(items[1])
    broken["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = 8
    with pytest.raises(ValueError, match="expected str"):
        load(broken)


def test_kubernetes_without_an_image_is_bad_input() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "validators", "fleet", "submit", "cu130", "--scheduler", "kubernetes",
         "--nodes", "a", "--wheelhouse", "/w", "--jobs-root", "/j", "--dry-run"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 2 and "--image" in done.stderr


def test_pods_are_bounded_safe_and_the_collector_never_blocks_a_target(items: list[dict[str, Any]]) -> None:
    """Issue 24 item 7: the collector's labels are not the ones the anti-affinity selects;
    deadline, one attempt on disruption, requests, no privilege escalation."""
    job, collector = items[1], items[5]
    pod = job["spec"]["template"]
    anti = pod["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    selector = anti["labelSelector"]["matchLabels"]
    assert selector.items() <= pod["metadata"]["labels"].items()
    assert not selector.items() <= collector["spec"]["template"]["metadata"]["labels"].items()
    assert pod["spec"]["activeDeadlineSeconds"] == 6 * 3600
    assert job["spec"]["podFailurePolicy"]["rules"][0]["action"] == "FailIndex"
    [container] = pod["spec"]["containers"]
    assert container["resources"]["requests"] == {"cpu": "8", "memory": "64Gi"}
    for c in [container, *collector["spec"]["template"]["spec"]["containers"], *collector["spec"]["template"]["spec"]["initContainers"]]:
        assert c["securityContext"]["allowPrivilegeEscalation"] is False and c["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_without_checkout_the_pods_use_the_images_paths_and_emptydir_on_request() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "validators", "fleet", "submit", "cu130", "--scheduler", "kubernetes", "--image", IMAGE,
         "--nodes", "gpu01", "--wheelhouse", "/fleet/wh", "--jobs-root", "/fleet/jobs", "--fleet-id", "x",
         "--host-path", "", "--priority-class", "gpu-validation", "--dry-run", "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    items = json.loads(json.loads(done.stdout)["files"]["kubernetes.json"])["items"]
    for item in items:
        load(item)
    pod = items[1]["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["workingDir"] == "/opt/stackgate" and container["command"][0] == "/opt/stackgate/.venv/bin/python"
    assert {v["name"]: v for v in pod["volumes"]}["local"] == {"name": "local", "emptyDir": {}}
    assert pod["priorityClassName"] == "gpu-validation"
    # The image those paths come from pins what images/base-images.toml pins.
    recipe = (ROOT / "fleet" / "kubernetes" / "Containerfile").read_text()
    pins = (ROOT / "images" / "base-images.toml").read_text()
    for ref in [line.split()[1] for line in recipe.splitlines() if line.startswith("FROM ")] + [
        line.split("--from=")[1].split()[0] for line in recipe.splitlines() if "--from=" in line
    ]:
        assert ref in pins, ref
    assert "WORKDIR /opt/stackgate\n" in recipe


# The Kubernetes API's own OpenAPI schema (PyPI `kubernetes-validate`: the JSON schemas
# generated from each release's OpenAPI document, "strict" = additionalProperties false, so an
# unknown field is refused as the API server's strict field validation would).
OLDEST = "1.29.0"  # backoffLimitPerIndex is in batch/v1 Job from 1.29 (docs/fleet.md)


def _schema_errors(item: dict[str, Any], version: str) -> list[str]:
    import kubernetes_validate

    try:
        kubernetes_validate.validate(item, version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        return [f"{'.'.join(map(str, exc.path))}: {exc.message}"]
    return []


@pytest.mark.parametrize("version", [OLDEST, "latest"])
def test_every_object_passes_the_kubernetes_openapi_schema_strictly(items: list[dict[str, Any]], version: str) -> None:
    import kubernetes_validate

    wanted = kubernetes_validate.latest_version() if version == "latest" else version
    assert {item["kind"]: _schema_errors(item, wanted) for item in items} == {
        "ConfigMap": [], "Job": [], "ServiceAccount": [], "Role": [], "RoleBinding": [],
    }  # fmt: skip
    for item in items:
        assert _schema_errors(item, wanted) == [], item["kind"]


def test_a_kubernetes_older_than_the_docs_name_refuses_the_job(items: list[dict[str, Any]]) -> None:
    """1.27's schema has no backoffLimitPerIndex (1.28's has it, alpha behind a feature gate
    that is off by default: an API server drops the field; beta and on from 1.29)."""
    assert _schema_errors(items[1], "1.27.0") == [
        "spec: Additional properties are not allowed ('backoffLimitPerIndex' was unexpected)"
    ]


@pytest.mark.parametrize(
    ("path", "key", "value", "says"),
    [
        (("spec",), "completionmode", "Indexed", "'completionmode' was unexpected"),
        (("spec", "template", "spec"), "nodeSelecter", {}, "'nodeSelecter' was unexpected"),
        (("spec", "template", "spec", "containers", 0, "securityContext"), "runAsNonroot", True, "'runAsNonroot' was unexpected"),
        (("spec",), "completions", "4", "'4' is not of type 'integer'"),
        (("spec", "template", "spec"), "activeDeadlineSeconds", 1.5, "1.5 is not of type 'integer'"),
        (("spec", "template", "spec", "volumes", 0), "hostPath", {"type": "Directory"}, "'path' is a required property"),
        (("spec", "template", "spec", "containers", 0), "env", [{"value": "x"}], "'name' is a required property"),
    ],
)
def test_the_schema_refuses_variants_of_a_broken_job(
    items: list[dict[str, Any]], path: tuple[Any, ...], key: str, value: Any, says: str
) -> None:
    broken = copy.deepcopy(items[1])
    node = broken
    for part in path:
        node = node[part]
    node[key] = value
    errors = _schema_errors(broken, OLDEST)
    assert len(errors) == 1 and says in errors[0], errors


def test_pod_security_restricted_passes_with_an_emptydir_and_baseline_refuses_only_the_hostpath() -> None:
    """What the PodSecurity admission would say (tests/fleet/pod_security.py stands for it):
    with the default hostPath the validation pods are refused by "baseline" (and so by
    "restricted") for that volume alone; with `--host-path ''` every pod passes "restricted":
    every container runs as the non-root user (65532, or `--run-as-user`), never root."""
    from tests.fleet.pod_security import baseline, restricted

    def pods(*extra: str) -> dict[str, dict[str, Any]]:
        done = _dry_run(*extra)
        assert done.returncode == 0, done.stderr
        doc = json.loads(json.loads(done.stdout)["files"]["kubernetes.json"])
        return {i["metadata"]["name"]: i["spec"]["template"]["spec"] for i in doc["items"] if i["kind"] == "Job"}

    hostpath = pods()
    refused = [("HostPath Volumes", "volumes[local]", "hostPath /var/lib/stackgate")]
    assert {name: baseline(pod) for name, pod in hostpath.items()} == {
        "stackgate-nightly-cu130": refused, "stackgate-nightly-cu130-collect": [],
    }  # fmt: skip
    assert {control for control, _, _ in restricted(hostpath["stackgate-nightly-cu130"])} == {
        "HostPath Volumes", "Volume Types",
    }  # fmt: skip
    for extra, uid in (((), 65532), (("--run-as-user", "1000"), 1000)):
        emptydir = pods("--host-path", "", *extra)
        for name, pod in emptydir.items():
            assert restricted(pod) == [], (name, restricted(pod))
            context = pod["securityContext"]
            assert context["runAsNonRoot"] is True, name
            assert context["runAsUser"] == context["runAsGroup"] == context["fsGroup"] == uid
    for bad in ("0", "-1", "x"):
        done = _dry_run("--host-path", "", "--run-as-user", bad)
        assert done.returncode == 2 and "--run-as-user" in done.stderr, (bad, done.stderr)


def test_the_image_runs_as_the_pods_user() -> None:
    """The Containerfile's USER is the uid the pods ask for by default, so the image and the
    manifests agree (runAsNonRoot with an image whose USER is root needs runAsUser)."""
    from validators.fleet.spec import NON_ROOT_UID

    lines = (ROOT / "fleet/kubernetes/Containerfile").read_text().splitlines()
    users = [line.split()[1] for line in lines if line.startswith("USER ")]
    assert users == [f"{NON_ROOT_UID}:{NON_ROOT_UID}"]
