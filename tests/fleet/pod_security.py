"""Pod Security Standards ("baseline", "restricted"), the published controls, for pod templates.

Stands for the PodSecurity admission plugin of a kube-apiserver, which cannot run here (no
kube-apiserver in Debian 12, PyPI or npm; the plugin is Go code in k8s.io/pod-security-admission).
The controls are those of https://kubernetes.io/docs/concepts/security/pod-security-standards/
(policy version "latest"), each checked on the fields a pod spec can carry them in; a
violation is (control, where, what) so a test can say which control refused what.
"""

from __future__ import annotations

from typing import Any

BASELINE_CAPABILITIES = {
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
    "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
}  # fmt: skip
SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}  # fmt: skip
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
RESTRICTED_VOLUMES = {
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
    "projected", "secret",
}  # fmt: skip

Violation = tuple[str, str, str]


def _containers(pod: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for kind in ("initContainers", "containers", "ephemeralContainers"):
        for c in pod.get(kind, []):
            out.append((f"{kind}[{c.get('name')}]", c))
    return out


def baseline(pod: dict[str, Any]) -> list[Violation]:
    out: list[Violation] = []
    psc = pod.get("securityContext", {})
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(field):
            out.append(("Host Namespaces", "spec", f"{field}: true"))
    if psc.get("windowsOptions", {}).get("hostProcess"):
        out.append(("HostProcess", "spec.securityContext", "windowsOptions.hostProcess: true"))
    for v in pod.get("volumes", []):
        if "hostPath" in v:
            out.append(("HostPath Volumes", f"volumes[{v['name']}]", f"hostPath {v['hostPath'].get('path')}"))
    for s in psc.get("sysctls", []):
        if s.get("name") not in SAFE_SYSCTLS:
            out.append(("Sysctls", "spec.securityContext", f"sysctl {s.get('name')}"))
    out += _selinux_seccomp_apparmor("spec.securityContext", psc)
    for where, c in _containers(pod):
        sc = c.get("securityContext", {})
        if sc.get("privileged"):
            out.append(("Privileged Containers", where, "privileged: true"))
        if sc.get("windowsOptions", {}).get("hostProcess"):
            out.append(("HostProcess", where, "windowsOptions.hostProcess: true"))
        extra = set(sc.get("capabilities", {}).get("add", [])) - BASELINE_CAPABILITIES
        if extra:
            out.append(("Capabilities", where, f"adds {sorted(extra)}"))
        for port in c.get("ports", []):
            if port.get("hostPort"):
                out.append(("Host Ports", where, f"hostPort {port['hostPort']}"))
        if sc.get("procMount", "Default") != "Default":
            out.append(("/proc Mount Type", where, f"procMount {sc['procMount']}"))
        out += _selinux_seccomp_apparmor(where, sc)
    return out


def _selinux_seccomp_apparmor(where: str, sc: dict[str, Any]) -> list[Violation]:
    out: list[Violation] = []
    se = sc.get("seLinuxOptions", {})
    if se.get("type", "") not in SELINUX_TYPES or se.get("user") or se.get("role"):
        out.append(("SELinux", where, f"seLinuxOptions {se}"))
    if sc.get("seccompProfile", {}).get("type") == "Unconfined":
        out.append(("Seccomp", where, "seccompProfile Unconfined"))
    if sc.get("appArmorProfile", {}).get("type") == "Unconfined":
        out.append(("AppArmor", where, "appArmorProfile Unconfined"))
    return out


def restricted(pod: dict[str, Any]) -> list[Violation]:
    out = baseline(pod)
    psc = pod.get("securityContext", {})
    for v in pod.get("volumes", []):
        kinds = set(v) - {"name"}
        if not kinds <= RESTRICTED_VOLUMES:
            out.append(("Volume Types", f"volumes[{v['name']}]", f"{sorted(kinds - RESTRICTED_VOLUMES)}"))
    if psc.get("runAsUser") == 0:
        out.append(("Running as Non-root user", "spec.securityContext", "runAsUser: 0"))
    pod_seccomp = psc.get("seccompProfile", {}).get("type")
    for where, c in _containers(pod):
        sc = c.get("securityContext", {})
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append(("Privilege Escalation", where, "allowPrivilegeEscalation is not false"))
        if not sc.get("runAsNonRoot", psc.get("runAsNonRoot")):
            out.append(("Running as Non-root", where, "runAsNonRoot is not true (pod or container)"))
        if sc.get("runAsUser") == 0:
            out.append(("Running as Non-root user", where, "runAsUser: 0"))
        if sc.get("seccompProfile", {}).get("type", pod_seccomp) not in ("RuntimeDefault", "Localhost"):
            out.append(("Seccomp", where, "seccompProfile is not RuntimeDefault or Localhost"))
        caps = sc.get("capabilities", {})
        if "ALL" not in caps.get("drop", []):
            out.append(("Capabilities", where, "does not drop ALL"))
        if set(caps.get("add", [])) - {"NET_BIND_SERVICE"}:
            out.append(("Capabilities", where, f"adds {caps['add']}"))
    return out
