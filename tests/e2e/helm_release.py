"""cogate installed with ``helm`` on the real node of ``real_cluster``: the documented commands,
the release's objects, and what the tests read from the node.

:func:`readme_commands` reads the Helm commands of docs/development.md's "Installing the chart on
the dev cluster" section (the block after the marker comment), so that page says exactly what
``tests/e2e/test_helm_install.py`` runs.
"""

from __future__ import annotations

import re
import shlex
import socket
import ssl
import subprocess
from pathlib import Path
from typing import Any

from kubernetes import client

from cogate.api import POD_GROUP_LABEL
from cogate.certs import pki
from cogate.localcluster import build
from cogate.localcluster.cluster import LocalCluster

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "docs" / "development.md"  # the page holding the tested block
MARKER = "<!-- tests/e2e/test_helm_install.py runs these commands -->"
RELEASE = "cogate"
NAMESPACE = "cogate-system"
WEBHOOK = f"{RELEASE}-webhook"          # Deployment, Service, ServiceAccount
CONTROLLER = f"{RELEASE}-controller"    # Deployment, ServiceAccount
CERT_SECRET = f"{WEBHOOK}-cert"
WEBHOOK_CONFIG = RELEASE                # MutatingWebhookConfiguration
WEBHOOK_ENTRY = "pod-group-gate.scheduling.x-k8s.io"
CRD = "podgroups.scheduling.x-k8s.io"
WEBHOOK_PORT = 9443


def readme_commands() -> dict[str, list[str]]:
    """The Helm commands of docs/development.md's tested block, by subcommand (``install``,
    ``upgrade``, ``uninstall``), each as an argv starting with ``helm``."""
    text = README.read_text()
    assert MARKER in text, f"{README.relative_to(ROOT)} lacks the block marked {MARKER!r}"
    block = re.match(r"\s*```sh\n(.*?)```", text.split(MARKER, 1)[1], re.S)
    assert block, "the marker must be followed by a ```sh block"
    commands: dict[str, list[str]] = {}
    for line in block.group(1).replace("\\\n", " ").splitlines():
        argv = shlex.split(line, comments=True)
        if not argv:
            continue
        assert argv[0] == "helm", f"only helm commands in the tested block: {line!r}"
        commands[argv[1]] = argv
    return commands


def helm(cluster: LocalCluster, argv: list[str], *, timeout: float = 300.0) -> subprocess.CompletedProcess:
    """Run ``argv`` (``["helm", ...]``, paths relative to the repository root) with the pinned
    Helm against ``cluster``; raises AssertionError with Helm's output when it fails."""
    assert argv[0] == "helm"
    cmd = [str(build.binary("helm")), *argv[1:], "--kubeconfig", str(cluster.kubeconfig)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"`{' '.join(argv)}` failed ({proc.returncode}):\n{proc.stderr}{proc.stdout}"
    return proc


def component_pods(api: client.ApiClient, component: str) -> list[client.V1Pod]:
    """Pods of the release's ``webhook`` or ``controller`` Deployment (terminating ones excluded)."""
    sel = f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/component={component}"
    return [p for p in client.CoreV1Api(api).list_namespaced_pod(NAMESPACE, label_selector=sel).items
            if p.metadata.deletion_timestamp is None]


def ready(pod: client.V1Pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def rolled_out(api: client.ApiClient, name: str) -> bool:
    """The Deployment's current template runs on all its replicas, all Ready, no old pods left."""
    d = client.AppsV1Api(api).read_namespaced_deployment(name, NAMESPACE)
    st, want = d.status, d.spec.replicas
    return (st.observed_generation == d.metadata.generation and (st.updated_replicas or 0) == want
            and (st.ready_replicas or 0) == want and (st.replicas or 0) == want)


def lease_holder(api: client.ApiClient) -> str | None:
    """Pod name of the controller Lease's holder (identity ``<hostname>_<suffix>``), or None."""
    try:
        lease = client.CoordinationV1Api(api).read_namespaced_lease("cogate-controller", NAMESPACE)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise
    holder = lease.spec.holder_identity or ""
    return holder.rsplit("_", 1)[0] or None


def labelled_pod(name: str, group: str = "probe", **spec: Any) -> dict[str, Any]:
    """A small pod labelled for PodGroup ``group`` (the webhook gates it)."""
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {POD_GROUP_LABEL: group, "app": "probe"}},
            "spec": {"containers": [{"name": "c", "image": "nginx:1.27",
                                     "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}],
                     "terminationGracePeriodSeconds": 0, **spec}}


def gated_by_webhook(api: client.ApiClient, namespace: str, name: str = "probe") -> bool:
    """Whether a labelled pod created now (server-side dry run: admission runs, nothing is
    stored) gets the scheduling gate. False when created without it; API errors propagate."""
    pod = client.CoreV1Api(api).create_namespaced_pod(namespace, labelled_pod(name), dry_run="All")
    return bool(pod.spec.scheduling_gates)


def served_certificate(ip: str, port: int = WEBHOOK_PORT, timeout: float = 3.0):
    """The certificate a webhook pod serves (not verified), as a ``cryptography`` certificate."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection((ip, port), timeout=timeout) as sock:
        with ctx.wrap_socket(sock) as tls:
            der = tls.getpeercert(binary_form=True)
    return pki.load_cert_pem(ssl.DER_cert_to_PEM_cert(der).encode())


def ca_bundle(api: client.ApiClient) -> list:
    """The CAs in ``caBundle`` of the release's webhook entry (empty when not set)."""
    config = client.AdmissionregistrationV1Api(api).read_mutating_webhook_configuration(WEBHOOK_CONFIG)
    (hook,) = [h for h in config.webhooks if h.name == WEBHOOK_ENTRY]
    pem = hook.client_config.ca_bundle
    if not pem:
        return []
    import base64

    return pki.load_certs_pem(base64.b64decode(pem))


def issued_by_one_of(cert, cas: list, at=None) -> bool:
    """Whether one of ``cas`` signed ``cert`` and both are valid at ``at`` (datetime, default now)."""
    for ca in cas:
        try:
            pki.verify_issued_by(cert, ca, at=at)
            return True
        except ValueError:
            continue
    return False
