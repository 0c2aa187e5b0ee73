"""localcluster.kueue (Kueue's command line, Configuration and webhooks out of the cluster) and its
pin: built for the topology benchmark only, never by a build that names no tools."""

from __future__ import annotations

import base64
import io

import pytest

from cogate.localcluster import build, kueue, versions

#: The shape of upstream's config/components/webhook/manifests.yaml (two of its entries per kind shown).
MANIFESTS = [
    {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
     "metadata": {"name": "mutating-webhook-configuration"},
     "webhooks": [
         {"name": "mjob.kb.io", "admissionReviewVersions": ["v1"], "sideEffects": "None", "failurePolicy": "Fail",
          "clientConfig": {"service": {"name": "webhook-service", "namespace": "system",
                                       "path": "/mutate-batch-v1-job"}},
          "rules": [{"apiGroups": ["batch"], "apiVersions": ["v1"], "operations": ["CREATE"],
                     "resources": ["jobs"]}]},
         {"name": "mpod.kb.io", "clientConfig": {"service": {"path": "/mutate--v1-pod"}},
          "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]},
         {"name": "mrayjob.kb.io", "clientConfig": {"service": {"path": "/mutate-ray-io-v1-rayjob"}},
          "rules": [{"apiGroups": ["ray.io"], "apiVersions": ["v1"], "operations": ["CREATE"],
                     "resources": ["rayjobs"]}]}]},
    {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
     "metadata": {"name": "validating-webhook-configuration"},
     "webhooks": [
         {"name": "vworkload.kb.io", "clientConfig": {"service": {"path": "/validate-kueue-x-k8s-io-v1beta2-workload"}},
          "rules": [{"apiGroups": ["kueue.x-k8s.io"], "apiVersions": ["v1beta2"], "operations": ["CREATE", "UPDATE"],
                     "resources": ["workloads", "workloads/status"]}]},
         {"name": "vdeployment.kb.io", "clientConfig": {"service": {"path": "/validate-apps-v1-deployment"}},
          "rules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"],
                     "resources": ["deployments"]}]}]},
]


def test_webhooks_of_jobs_and_kueue_kinds_only_on_loopback_urls():
    mutating, validating = kueue.kueue_webhook_configurations(MANIFESTS, 9443, b"CA")
    assert mutating["metadata"]["name"] == "kueue-mutating-webhook-configuration"
    assert validating["metadata"]["name"] == "kueue-validating-webhook-configuration"
    assert [h["name"] for h in mutating["webhooks"]] == ["mjob.kb.io"]  # no pod, no RayJob webhook
    assert [h["name"] for h in validating["webhooks"]] == ["vworkload.kb.io"]
    job = mutating["webhooks"][0]
    assert job["clientConfig"] == {"url": "https://127.0.0.1:9443/mutate-batch-v1-job",
                                   "caBundle": base64.b64encode(b"CA").decode()}
    assert job["failurePolicy"] == "Fail" and job["rules"] == MANIFESTS[0]["webhooks"][0]["rules"]
    assert "service" in MANIFESTS[0]["webhooks"][0]["clientConfig"]  # the input is left as it was


def test_webhook_without_a_service_path_or_a_bad_port_is_refused():
    broken = [{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
               "metadata": {"name": "m"},
               "webhooks": [{"name": "mjob.kb.io", "clientConfig": {"service": {"name": "s"}},
                             "rules": [{"apiGroups": ["batch"], "resources": ["jobs"]}]}]}]
    with pytest.raises(ValueError, match="mjob.kb.io"):
        kueue.kueue_webhook_configurations(broken, 9443, b"CA")
    for bad in (0, 70000, True, "9443"):
        with pytest.raises(ValueError, match="port"):
            kueue.kueue_webhook_configurations(MANIFESTS, bad, b"CA")


def test_configuration_for_a_process_outside_the_cluster():
    cfg = kueue.kueue_configuration(9443, 8081, "/tmp/certs")
    assert cfg["apiVersion"] == "config.kueue.x-k8s.io/v1beta2" and cfg["kind"] == "Configuration"
    assert cfg["webhook"] == {"port": 9443, "host": "127.0.0.1", "certDir": "/tmp/certs"}
    assert cfg["health"] == {"healthProbeBindAddress": "127.0.0.1:8081"}
    assert cfg["internalCertManagement"] == {"enable": False} and cfg["leaderElection"] == {"leaderElect": False}
    assert cfg["integrations"] == {"frameworks": ["batch/job"]} and cfg["metrics"] == {"bindAddress": "0"}
    assert cfg["featureGates"] == {"VisibilityOnDemand": False}  # TAS stays at its default, on
    with pytest.raises(ValueError, match="probe_port"):
        kueue.kueue_configuration(9443, 0, "/tmp/certs")
    assert kueue.kueue_command_line("/bin/kueue", "/tmp/c.yaml") == ["/bin/kueue", "--config=/tmp/c.yaml",
                                                                     "--zap-log-level=2"]


def test_kueue_is_pinned_for_the_benchmark_only():
    assert versions.TOOLS["kueue"] == ("sigs.k8s.io/kueue", versions.KUEUE, ("sigs.k8s.io/kueue/cmd/kueue",))
    assert versions.BINARIES["kueue"] == ("kueue",)
    names = [p.rsplit("/", 1)[1] for p in versions.CRDS["kueue"]]
    assert names[-1] == kueue.WEBHOOK_MANIFESTS
    assert [n.removeprefix("kueue.x-k8s.io_").removesuffix(".yaml") for n in names[:-1]] == \
        [c.removesuffix(".kueue.x-k8s.io") for c in kueue.CRD_NAMES]
    for group in (versions.CONTROL_PLANE_TOOLS, versions.NODE_TOOLS, versions.OPERATOR_TOOLS,
                  versions.CERT_MANAGER_TOOLS, versions.AUTOSCALER_TOOLS):
        assert "kueue" not in group


def test_a_build_that_names_no_tools_leaves_kueue_out(monkeypatch):
    built = []
    monkeypatch.setattr(build, "build_tool", lambda tool, log=None, kubernetes_version=None: built.append(tool) or 0.0)
    build.ensure_binaries(log=io.StringIO())
    assert "kueue" not in built and set(built) == set(versions.TOOLS) - set(versions.BENCH_TOOLS)
    built.clear()
    build.ensure_binaries(["kueue"], log=io.StringIO())
    assert built == ["kueue"]


def test_missing_build_names_the_build_command(tmp_path, monkeypatch):
    monkeypatch.setenv("COGATE_CACHE_DIR", str(tmp_path))
    with pytest.raises(kueue.KueueError, match="python -m cogate.localcluster.build kueue"):
        kueue.Kueue(object(), tmp_path / "w").start()
