"""localcluster.certmanager: cert-manager's command lines, its CRDs as applied, and its pin."""

from __future__ import annotations

import pytest

from cogate.localcluster import build, certmanager, versions

#: One of cert-manager's deploy/crds files as the v1.11.5 module has it (labels are Helm template text).
CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: issuers.cert-manager.io
  labels:
    app: '{{ template "cert-manager.name" . }}'
    app.kubernetes.io/name: '{{ template "cert-manager.name" . }}'
    app.kubernetes.io/instance: '{{ .Release.Name }}'
    # Generated labels {{- include "labels" . | nindent 4 }}
spec:
  group: cert-manager.io
"""


def test_crd_manifests_drop_the_helm_template_labels_only():
    (crd,) = certmanager.crd_manifests([CRD])
    assert crd["metadata"] == {"name": "issuers.cert-manager.io"}
    assert crd["spec"] == {"group": "cert-manager.io"}
    kept = CRD.replace("    app: '{{ template \"cert-manager.name\" . }}'\n", "    app: cert-manager\n")
    assert certmanager.crd_manifests([kept, "---\n"])[0]["metadata"]["labels"] == {"app": "cert-manager"}


def test_crd_manifests_refuse_other_kinds():
    with pytest.raises(ValueError, match="expected CustomResourceDefinition documents, got 'Deployment'"):
        certmanager.crd_manifests([CRD + "---\nkind: Deployment\n"])
    with pytest.raises(ValueError, match="got 'list'"):
        certmanager.crd_manifests(["- a\n"])


def test_controller_command_line_binds_metrics_on_loopback_without_leader_election():
    argv = certmanager.controller_command_line("/bin/controller", "/tmp/kc", 4100)
    assert argv == ["/bin/controller", "--kubeconfig=/tmp/kc", "--leader-elect=false",
                    "--cluster-resource-namespace=cert-manager", "--metrics-listen-address=127.0.0.1:4100", "-v=2"]
    for bad in (0, 70000, True, "80"):
        with pytest.raises(ValueError, match="metrics_port"):
            certmanager.controller_command_line("c", "k", bad)
    with pytest.raises(ValueError, match="cluster_resource_namespace"):
        certmanager.controller_command_line("c", "k", 1, "")
    assert certmanager.cainjector_command_line("/bin/cainjector", "/tmp/kc") == [
        "/bin/cainjector", "--kubeconfig=/tmp/kc", "--leader-elect=false", "-v=2"]


def test_the_pin_builds_controller_and_cainjector_and_copies_all_six_crds():
    module, version, packages = versions.tool(certmanager.TOOL)
    assert (module, version) == ("github.com/cert-manager/cert-manager", versions.CERT_MANAGER)
    assert packages == (f"{module}/cmd/controller", f"{module}/cmd/cainjector")
    assert build.outputs(certmanager.TOOL) == (
        "controller", "cainjector", "crd-certificates.yaml", "crd-certificaterequests.yaml", "crd-issuers.yaml",
        "crd-clusterissuers.yaml", "crd-orders.yaml", "crd-challenges.yaml")
    assert certmanager.TOOL not in versions.CONTROL_PLANE_TOOLS + versions.NODE_TOOLS  # `make demo` does not build it
    assert build.binary("cainjector") == build.bin_dir(certmanager.TOOL) / "cainjector"


def test_missing_crds_name_the_build_command(tmp_path, monkeypatch):
    monkeypatch.setenv("COGATE_CACHE_DIR", str(tmp_path))
    with pytest.raises(certmanager.CertManagerError, match="python -m cogate.localcluster.build cert-manager"):
        certmanager.CertManager(object(), tmp_path / "w").apply_crds()
