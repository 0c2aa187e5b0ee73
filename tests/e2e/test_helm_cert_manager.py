"""The chart in cert-manager mode (``webhook.certs.mode=cert-manager``), installed for real: cert-manager's
controller and cainjector built from the pinned module (:data:`cogate.localcluster.versions.CERT_MANAGER`)
and run against the session's ``real_cluster`` (:mod:`cogate.localcluster.certmanager`), the chart
installed with ``helm`` on the real node with the image built from the Dockerfile, as
tests/e2e/test_helm_install.py installs it (``charts/cogate/ci/real-node-values.yaml``).

Two releases, one after the other, each in a namespace of its own and uninstalled at the end:

- the chart's own self-signed ``Issuer`` (``webhook.certs.issuerRef`` empty);
- ``webhook.certs.issuerRef`` naming an existing CA ``ClusterIssuer`` (made here: a self-signed
  ClusterIssuer signs a CA Certificate in cert-manager's cluster resource namespace, a CA
  ClusterIssuer issues from its Secret).

Each checks what cert-manager mode promises: the ``Certificate`` becomes Ready, its Secret exists,
the cainjector puts the issuing CA into the MutatingWebhookConfiguration's ``caBundle``, every
webhook replica serves the certificate of the Secret, and a labelled pod created through the API
server gets its scheduling gate (the API server called the webhook over TLS, trusting ``caBundle``).
"""

from __future__ import annotations

import base64
import sys
import time
from typing import Any

import pytest
from kubernetes import client

from cogate.certs import pki
from cogate.localcluster import build, certmanager, versions
from cogate.localcluster.host import image

from . import test_example
from .helm_release import (RELEASE, WEBHOOK, WEBHOOK_CONFIG, ca_bundle, helm, issued_by_one_of, labelled_pod, ready,
                           served_certificate)
from .kube import wait_for

pytestmark = pytest.mark.e2e

REAL_NODE_VALUES = "charts/cogate/ci/real-node-values.yaml"
CERT_SECRET = f"{WEBHOOK}-cert"
CERTIFICATE = WEBHOOK  # the chart's Certificate (and self-signed Issuer) name
GROUP, VERSION = "cert-manager.io", "v1"
#: The CA ClusterIssuer of the issuerRef case, its self-signed ClusterIssuer and CA Certificate.
CA_ISSUER = "cogate-e2e-ca"
SELF_SIGNED_ISSUER = "cogate-e2e-selfsigned"
CA_CERTIFICATE = "cogate-e2e-ca"


@pytest.fixture(scope="module")
def api(real_cluster):
    a = real_cluster.api_client()
    yield a
    a.close()


@pytest.fixture(scope="module")
def cert_manager(real_cluster, tmp_path_factory):
    """cert-manager's controller and cainjector running against ``real_cluster``; the image loaded
    into the real node."""
    spent = build.ensure_binaries(["helm", certmanager.TOOL], log=sys.stderr)
    print(f"cert-manager {versions.CERT_MANAGER}: build {spent[certmanager.TOOL]:.0f}s (0: cached)")
    built = image.build_image()
    assert built.containerd_name in real_cluster.load_image(built.archive)
    t0 = time.monotonic()
    cm = certmanager.CertManager(real_cluster, tmp_path_factory.mktemp("cert-manager"), timeout=120)
    cm.start()
    test_example._report("cert-manager CRDs applied and started", time.monotonic() - t0)
    try:
        yield cm
    finally:
        cm.stop()


def _conditions(obj: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or []}


def _get(api, plural: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
    custom = client.CustomObjectsApi(api)
    try:
        if namespace is None:
            return custom.get_cluster_custom_object(GROUP, VERSION, plural, name)
        return custom.get_namespaced_custom_object(GROUP, VERSION, namespace, plural, name)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def _wait_ready(api, cm, plural: str, name: str, namespace: str | None = None, timeout: float = 120) -> dict:
    def is_ready():
        obj = _get(api, plural, name, namespace)
        return obj if obj and _conditions(obj).get("Ready") == "True" else None

    try:
        return wait_for(is_ready, timeout, interval=0.25, what=f"{plural}/{name} Ready")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; now: {(_get(api, plural, name, namespace) or {}).get('status')}\n"
                             f"{cm.log_tail(30)}") from None


def _webhook_pods(api, namespace: str) -> list[client.V1Pod]:
    sel = f"app.kubernetes.io/instance={RELEASE},app.kubernetes.io/component=webhook"
    return [p for p in client.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=sel).items
            if p.metadata.deletion_timestamp is None]


def _fingerprint(cert) -> str:
    return cert.fingerprint(pki.hashes.SHA256()).hex()


def _install_and_check(cluster, api, cm, namespace: str, *sets: str, own_issuer: bool) -> tuple[Any, Any]:
    """Install the chart in cert-manager mode into ``namespace`` with ``sets`` and check what the mode
    promises (module doc), and that the chart made its own self-signed Issuer exactly when
    ``own_issuer``; returns ``(serving certificate, CA in caBundle)``. The release is uninstalled and
    the namespace deleted afterwards, also on failure."""
    core = client.CoreV1Api(api)
    probe_ns = f"{namespace}-probe"  # the release namespace is never gated
    for name in (namespace, probe_ns):
        core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    wait_for(lambda: core.list_namespaced_service_account(probe_ns, field_selector="metadata.name=default").items,
             30, what=f"the default ServiceAccount of {probe_ns}")
    args = ["helm", "install", RELEASE, "charts/cogate", "--namespace", namespace, "--values", REAL_NODE_VALUES,
            "--set", "webhook.certs.mode=cert-manager", *(a for s in sets for a in ("--set", s))]
    installed = []

    def uninstall():
        if installed:
            helm(cluster, ["helm", "uninstall", RELEASE, "--namespace", namespace, "--wait"])
            installed.clear()

    try:
        t0 = time.monotonic()
        helm(cluster, args)
        installed.append(RELEASE)
        certificate = _wait_ready(api, cm, "certificates", CERTIFICATE, namespace)
        test_example._report("helm install (cert-manager mode) -> Certificate Ready", time.monotonic() - t0)
        assert certificate["spec"]["secretName"] == CERT_SECRET
        own = _get(api, "issuers", CERTIFICATE, namespace)
        assert (own is not None) == own_issuer, own
        if own_issuer:
            assert own["spec"] == {"selfSigned": {}} and _conditions(own).get("Ready") == "True", own
        secret = core.read_namespaced_secret(CERT_SECRET, namespace)
        assert secret.type == "kubernetes.io/tls" and {"tls.crt", "tls.key", "ca.crt"} <= set(secret.data)
        leaf = pki.load_cert_pem(base64.b64decode(secret.data["tls.crt"]))
        (secret_ca,) = pki.load_certs_pem(base64.b64decode(secret.data["ca.crt"]))
        names = leaf.extensions.get_extension_for_class(pki.x509.SubjectAlternativeName).value
        assert f"{WEBHOOK}.{namespace}.svc" in names.get_values_for_type(pki.x509.DNSName)
        assert issued_by_one_of(leaf, [secret_ca])

        # The cainjector copies the Secret's ca.crt into caBundle (inject-ca-from: <ns>/<Certificate>).
        def injected():
            bundle = ca_bundle(api)
            return bundle if [_fingerprint(c) for c in bundle] == [_fingerprint(secret_ca)] else None

        try:
            bundle = wait_for(injected, 60, interval=0.25, what="caBundle injected by the cainjector")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; caBundle now: {[_fingerprint(c)[:12] for c in ca_bundle(api)]}, "
                                 f"ca.crt {_fingerprint(secret_ca)[:12]}\n{cm.log_tail(30)}") from None
        config = client.AdmissionregistrationV1Api(api).read_mutating_webhook_configuration(WEBHOOK_CONFIG)
        assert config.metadata.annotations["cert-manager.io/inject-ca-from"] == f"{namespace}/{CERTIFICATE}"

        # A labelled pod created for real through the API server is gated: the webhook answered over
        # TLS with the cert-manager certificate (failurePolicy Fail: no answer, no pod).
        def created_gated():
            try:
                pod = core.create_namespaced_pod(probe_ns, labelled_pod(f"probe-{int(time.monotonic() * 1000)}"))
            except client.ApiException:  # the webhook's pods not ready yet (Secret mounted late)
                return None
            return pod

        pod = wait_for(created_gated, 240, interval=0.5, what="a labelled pod created through the webhook")
        test_example._report("helm install (cert-manager mode) -> labelled pod gated", time.monotonic() - t0)
        assert [g.name for g in pod.spec.scheduling_gates or []] == ["scheduling.x-k8s.io/pod-group"], pod.spec

        # Every ready webhook replica serves the Secret's certificate, signed by the CA in caBundle.
        pods = wait_for(lambda: (ps := _webhook_pods(api, namespace)) and len(ps) == 2 and all(map(ready, ps))
                        and ps, 180, interval=0.5, what="both webhook replicas ready")
        for p in pods:
            served = served_certificate(p.status.pod_ip)
            assert _fingerprint(served) == _fingerprint(leaf), p.metadata.name
            assert issued_by_one_of(served, bundle), p.metadata.name
            volumes = {v.name: v for v in p.spec.volumes}
            assert volumes["certs"].secret.secret_name == CERT_SECRET
        # Uninstall: the Certificate goes, the Secret cert-manager issued stays (charts/cogate/README.md).
        uninstall()
        assert _get(api, "certificates", CERTIFICATE, namespace) is None
        assert core.read_namespaced_secret(CERT_SECRET, namespace).data["tls.crt"] == secret.data["tls.crt"]
        return leaf, bundle[0]
    finally:
        uninstall()
        for name in (namespace, probe_ns):
            core.delete_namespace(name, propagation_policy="Background")


def test_self_signed_issuer_of_the_chart(real_cluster, api, cert_manager):
    namespace = "cogate-cm-selfsigned"
    leaf, ca = _install_and_check(real_cluster, api, cert_manager, namespace, own_issuer=True)
    # The chart's own Issuer (selfSigned) issued it: the certificate is its own CA.
    assert _fingerprint(leaf) == _fingerprint(ca)
    assert leaf.issuer == leaf.subject


def _make_ca_cluster_issuer(api, cm) -> Any:
    """The CA ClusterIssuer :data:`CA_ISSUER` (module doc); returns its CA certificate."""
    custom = client.CustomObjectsApi(api)
    custom.create_cluster_custom_object(GROUP, VERSION, "clusterissuers", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "ClusterIssuer", "metadata": {"name": SELF_SIGNED_ISSUER},
        "spec": {"selfSigned": {}}})
    custom.create_namespaced_custom_object(GROUP, VERSION, certmanager.CLUSTER_RESOURCE_NAMESPACE, "certificates", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "Certificate",
        "metadata": {"name": CA_CERTIFICATE, "namespace": certmanager.CLUSTER_RESOURCE_NAMESPACE},
        "spec": {"isCA": True, "commonName": "cogate e2e CA", "secretName": CA_CERTIFICATE,
                 "privateKey": {"algorithm": "ECDSA", "size": 256},
                 "issuerRef": {"name": SELF_SIGNED_ISSUER, "kind": "ClusterIssuer", "group": GROUP}}})
    _wait_ready(api, cm, "certificates", CA_CERTIFICATE, certmanager.CLUSTER_RESOURCE_NAMESPACE)
    custom.create_cluster_custom_object(GROUP, VERSION, "clusterissuers", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "ClusterIssuer", "metadata": {"name": CA_ISSUER},
        "spec": {"ca": {"secretName": CA_CERTIFICATE}}})
    _wait_ready(api, cm, "clusterissuers", CA_ISSUER)
    secret = client.CoreV1Api(api).read_namespaced_secret(CA_CERTIFICATE, certmanager.CLUSTER_RESOURCE_NAMESPACE)
    return pki.load_cert_pem(base64.b64decode(secret.data["tls.crt"]))


def test_issuer_ref_to_an_existing_cluster_issuer(real_cluster, api, cert_manager):
    namespace = "cogate-cm-issuerref"
    ca = _make_ca_cluster_issuer(api, cert_manager)
    try:
        leaf, injected = _install_and_check(real_cluster, api, cert_manager, namespace,
                                            f"webhook.certs.issuerRef.name={CA_ISSUER}",
                                            "webhook.certs.issuerRef.kind=ClusterIssuer", own_issuer=False)
        # The ClusterIssuer's CA signed the serving certificate and is what the cainjector injected.
        assert _fingerprint(injected) == _fingerprint(ca)
        assert leaf.issuer == ca.subject and leaf.issuer != leaf.subject
        assert issued_by_one_of(leaf, [ca])
    finally:
        custom = client.CustomObjectsApi(api)
        for name in (CA_ISSUER, SELF_SIGNED_ISSUER):
            custom.delete_cluster_custom_object(GROUP, VERSION, "clusterissuers", name)
        custom.delete_namespaced_custom_object(GROUP, VERSION, certmanager.CLUSTER_RESOURCE_NAMESPACE,
                                               "certificates", CA_CERTIFICATE)
