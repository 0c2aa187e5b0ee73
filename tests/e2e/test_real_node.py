"""The real kubelet node of the local control plane (``LocalCluster(real_node=True)``).

Runs on the session fixture ``real_cluster`` (tests/conftest.py): containerd, runc, kubelet and
kube-proxy on this host, beside kwok. Checks that the node registers as configured, that pods
run on it from a locally imported image, that a pod reaches the API server through the
``kubernetes`` Service, that the API server reaches a webhook Service on the node, and (last)
that stopping it leaves the host as it was.
"""

from __future__ import annotations

import base64
import contextlib
import ipaddress
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from kubernetes import client

from cogate.certs import pki
from cogate.localcluster import build, versions
from cogate.localcluster.host import pauseimage, realnode
from cogate.localcluster.cluster import ClusterError, LocalCluster
from cogate.localcluster.procs import cmdline, mounts, process_alive

from .kube import wait_for

pytestmark = pytest.mark.e2e

TOLERATION = {"key": realnode.NODE_TAINT["key"], "operator": "Equal", "value": realnode.NODE_TAINT["value"],
              "effect": realnode.NODE_TAINT["effect"]}


@pytest.fixture
def real_kube(real_cluster):
    api = real_cluster.api_client()
    try:
        yield api
    finally:
        api.close()


@pytest.fixture
def real_ns(real_kube, request):
    core = client.CoreV1Api(real_kube)
    name = f"rn-{request.node.name.removeprefix('test_')[:30].replace('_', '-')}-{secrets.token_hex(3)}"
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    wait_for(lambda: core.list_namespaced_service_account(name, field_selector="metadata.name=default").items,
             30, what="the default ServiceAccount")
    yield name
    core.delete_namespace(name, propagation_policy="Background")


def _pod(name: str, image: str, args: list[str] | None = None, *, restart: str = "Always", **extra) -> dict:
    container = {"name": "main", "image": image, "imagePullPolicy": "Never"}
    if args is not None:
        container["args"] = args
    container.update(extra)
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"nodeSelector": {realnode.NODE_LABEL[0]: realnode.NODE_LABEL[1]}, "tolerations": [TOLERATION],
                 "restartPolicy": restart, "terminationGracePeriodSeconds": 1, "containers": [container]},
    }


def _ready(pod: client.V1Pod) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions or [])


def test_node_registers_ready_labelled_tainted(real_cluster, real_kube):
    node = client.CoreV1Api(real_kube).read_node(realnode.NODE_NAME)
    assert node.metadata.labels[realnode.NODE_LABEL[0]] == realnode.NODE_LABEL[1]
    assert [{"key": t.key, "value": t.value, "effect": t.effect} for t in node.spec.taints] == [realnode.NODE_TAINT]
    assert any(c.type == "Ready" and c.status == "True" for c in node.status.conditions)
    assert node.status.node_info.kubelet_version == versions.KUBERNETES
    assert node.status.node_info.container_runtime_version == f"containerd://{versions.CONTAINERD.lstrip('v')}"
    assert [a.address for a in node.status.addresses if a.type == "InternalIP"] == [realnode.NODE_IP]
    print(f"real node start: {real_cluster.timings['real-node']:.1f}s; timings {real_cluster.timings}")


def test_pause_pod_runs_ready_on_the_real_node(real_cluster, real_kube, real_ns):
    core = client.CoreV1Api(real_kube)
    core.create_namespaced_pod(real_ns, _pod("pause", pauseimage.pause_ref()))
    pod = wait_for(lambda: (p := core.read_namespaced_pod("pause", real_ns)) and _ready(p) and p, 90,
                   what="the pause pod Ready")
    assert pod.spec.node_name == realnode.NODE_NAME
    assert ipaddress.ip_address(pod.status.pod_ip) in ipaddress.ip_network(realnode.POD_SUBNET)
    core.delete_namespaced_pod("pause", real_ns, grace_period_seconds=1)
    wait_for(lambda: not core.list_namespaced_pod(real_ns).items, 60, what="the pause pod deleted")


def test_pod_reaches_the_api_server_through_the_kubernetes_service(real_cluster, real_kube, real_ns):
    core = client.CoreV1Api(real_kube)
    core.create_namespaced_pod(real_ns, _pod("apicheck", pauseimage.pause_ref(), ["apicheck"], restart="Never"))
    pod = wait_for(lambda: (p := core.read_namespaced_pod("apicheck", real_ns)).status.phase in ("Succeeded", "Failed")
                   and p, 90, what="the apicheck pod finished")
    logs = real_cluster.kubectl("logs", "-n", real_ns, "apicheck").stdout  # API server -> kubelet, too
    assert pod.status.phase == "Succeeded", logs
    assert f"via https://10.96.0.1:443 as system:serviceaccount:{real_ns}:default" in logs


def test_api_server_reaches_a_webhook_service_on_the_real_node(real_cluster, real_kube, real_ns):
    core = client.CoreV1Api(real_kube)
    ca_cert, ca_key = pki.new_ca("node-probe-ca", days=1)
    service = "probe"
    cert, key = pki.issue(ca_cert, ca_key, f"{service}.{real_ns}.svc", dns_names=[f"{service}.{real_ns}.svc"], days=1)
    core.create_namespaced_secret(real_ns, {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "probe-tls"}, "type": "kubernetes.io/tls",
        "data": {"tls.crt": base64.b64encode(pki.cert_to_pem(cert)).decode(),
                 "tls.key": base64.b64encode(pki.key_to_pem(key)).decode()}})
    pod = _pod("probe", pauseimage.pause_ref(), ["webhook", "/tls/tls.crt", "/tls/tls.key"],
               readinessProbe={"httpGet": {"path": "/healthz", "port": 8443, "scheme": "HTTPS"}, "periodSeconds": 1},
               volumeMounts=[{"name": "tls", "mountPath": "/tls", "readOnly": True}])
    pod["spec"]["volumes"] = [{"name": "tls", "secret": {"secretName": "probe-tls"}}]
    core.create_namespaced_pod(real_ns, pod)
    core.create_namespaced_service(real_ns, {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": service},
        "spec": {"selector": {"app": "probe"}, "ports": [{"port": 443, "targetPort": 8443}]}})
    wait_for(lambda: _ready(core.read_namespaced_pod("probe", real_ns)), 90, what="the webhook pod Ready")
    config = {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": f"node-probe-{real_ns}"},
        "webhooks": [{
            "name": "probe.cogate.dev", "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "failurePolicy": "Fail", "timeoutSeconds": 5,
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": real_ns}},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["configmaps"]}],
            "clientConfig": {"service": {"namespace": real_ns, "name": service, "path": "/validate", "port": 443},
                             "caBundle": base64.b64encode(pki.cert_to_pem(ca_cert)).decode()},
        }],
    }
    admission = client.AdmissionregistrationV1Api(real_kube)
    admission.create_validating_webhook_configuration(config)
    try:
        def denied_by_probe():
            name = f"cm-{secrets.token_hex(3)}"
            try:
                core.create_namespaced_config_map(real_ns, {"apiVersion": "v1", "kind": "ConfigMap",
                                                            "metadata": {"name": name}})
            except client.ApiException as exc:
                message = json.loads(exc.body).get("message", "")
                return f"denied by the cogate node probe: ConfigMap {real_ns}/{name}" in message and message
            return False

        # Until the webhook configuration is in the API server's cache the ConfigMap is admitted.
        message = wait_for(denied_by_probe, 30, interval=0.5, what="a ConfigMap denied by the webhook on the node")
        assert "admission webhook \"probe.cogate.dev\" denied the request" in message
    finally:
        admission.delete_validating_webhook_configuration(config["metadata"]["name"])


def test_load_image_imports_an_oci_archive_for_pods(real_cluster, real_kube, real_ns, tmp_path):
    pause_archive, _ = pauseimage.ensure_pause_image()
    ref = f"localhost/cogate/loaded:{secrets.token_hex(4)}"
    binary = next((Path(pause_archive).parent.parent / "bin").glob(f"pause-{pauseimage.pause_tag()}/pause"))
    archive = pauseimage.write_oci_archive(tmp_path / "loaded.tar", ref, {"/pause": (binary.read_bytes(), 0o755)},
                                       ["/pause"])
    t0 = time.monotonic()
    assert ref in real_cluster.load_image(archive)
    print(f"load_image of a {archive.stat().st_size / 2**20:.1f} MiB archive: {time.monotonic() - t0:.2f}s")
    core = client.CoreV1Api(real_kube)
    core.create_namespaced_pod(real_ns, _pod("loaded", ref))
    wait_for(lambda: _ready(core.read_namespaced_pod("loaded", real_ns)), 90, what="a pod of the loaded image Ready")
    with pytest.raises(ClusterError, match="no image archive"):
        real_cluster.load_image(tmp_path / "missing.tar")


def test_second_real_node_on_the_host_is_refused(real_cluster):
    other = LocalCluster(real_node=True)
    with pytest.raises(Exception, match="another real node runs on this host"):
        other.start()
    assert real_cluster.node.procs["kubelet"].alive(), "the running node is untouched"


@contextlib.contextmanager
def _session_node_stopped(real_cluster):
    """Stop the session's real cluster (one real node per host), run the body, start it again
    (a new work dir) for later tests."""
    real_cluster.stop()
    try:
        yield
    finally:
        real_cluster.start()


def _cogate(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cogate.cli", *args], capture_output=True, text=True, timeout=600,
                          env={**os.environ, **env})


def test_dev_up_real_node_runs_detached_and_down_removes_it(real_cluster):
    from tests.conftest import host_state

    dev = Path(tempfile.mkdtemp(prefix="cogate-dev-"))  # short: kubelet's unix sockets live below it
    env = {"COGATE_DEV_DIR": str(dev)}
    with _session_node_stopped(real_cluster):
        up = _cogate("dev", "up", "--real-node", env=env)
        try:
            assert up.returncode == 0, up.stderr + up.stdout
            assert f"real node {realnode.NODE_NAME}" in up.stdout
            attached = LocalCluster.attach(dev / "cluster" / "state.json")
            nodes = attached.kubectl("get", "nodes", "-o", "json").stdout
            ready = {n["metadata"]["name"] for n in json.loads(nodes)["items"]
                     if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"])}
            assert ready == {"node-0", realnode.NODE_NAME}
            status = _cogate("dev", "status", env=env).stdout
            for name in ("containerd", "kubelet", "kube-proxy"):
                assert re.search(rf"{name}\s+pid \d+\s+running", status), status
        finally:
            down = _cogate("dev", "down", env=env)
        assert down.returncode == 0, down.stderr
        assert host_state() == real_cluster.host_baseline
        assert not (dev / "cluster").exists()
        shutil.rmtree(dev)


def test_a_start_after_a_crash_removes_the_dead_nodes_leftovers(real_cluster, real_kube):
    dev = Path(tempfile.mkdtemp(prefix="cogate-dev-"))
    env = {"COGATE_DEV_DIR": str(dev)}
    with _session_node_stopped(real_cluster):
        up = _cogate("dev", "up", "--real-node", env=env)
        assert up.returncode == 0, up.stderr + up.stdout
        crashed = LocalCluster.attach(dev / "cluster" / "state.json")
        crashed.kubectl("create", "-f", "-", input=json.dumps(_pod("victim", pauseimage.pause_ref())))
        crashed.kubectl("wait", "--for=condition=Ready", "pod/victim", "--timeout=90s")
        pids = list(crashed.pids.values()) + [v["pid"] for v in json.loads((dev / "cogate.json").read_text()).values()
                                              if isinstance(v, dict)]
        for pid in pids:  # a crash: nothing gets to clean up
            os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not any(process_alive(p) for p in pids), 10, what="the crashed processes gone")
        assert realnode.host_leftovers(dev), "the crash left mounts, the bridge, rules, a shim and the pod"
    # _session_node_stopped started the session's node again: its start removed the leftovers.
    assert not [m for m in mounts() if m.startswith(str(dev))]
    shim = str(build.binary("containerd-shim-runc-v2"))
    survivors = [cmdline(int(p.name)) for p in Path("/proc").iterdir() if p.name.isdigit()]
    assert not [c for c in survivors if c and c[0] in ("/pause", shim)], "the crashed pod and its shim are gone"
    down = _cogate("dev", "down", env=env)  # the crashed environment's state: nothing of it touches the host
    assert down.returncode == 0, down.stderr
    assert real_cluster.node.procs["kubelet"].alive()
    node = client.CoreV1Api(real_cluster.api_client()).read_node(realnode.NODE_NAME)
    assert any(c.type == "Ready" and c.status == "True" for c in node.status.conditions)
    shutil.rmtree(dev, ignore_errors=True)


def test_stop_leaves_the_host_as_it_was_and_restart_works(real_cluster, real_kube):
    """Last in this module: stop the session's real cluster with pods running on the node, check
    that no process, mount, interface, iptables rule, cgroup or kernel setting is left, start again."""
    from tests.conftest import host_state

    core = client.CoreV1Api(real_kube)
    core.create_namespaced_pod("default", _pod("left-running", pauseimage.pause_ref()))
    wait_for(lambda: _ready(core.read_namespaced_pod("left-running", "default")), 90, what="a pod running")
    workdir = real_cluster.workdir
    assert any(m.startswith(str(workdir)) for m in mounts()), "a running pod has mounts"
    t0 = time.monotonic()
    with _session_node_stopped(real_cluster):
        print(f"stop with one pod running: {time.monotonic() - t0:.1f}s")
        assert host_state() == real_cluster.host_baseline
        assert not workdir.exists()
    assert real_cluster.workdir != workdir
