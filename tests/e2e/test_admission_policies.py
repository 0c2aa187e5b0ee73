"""Admission as policies in kube-apiserver (issue 40, chart ``admission.mode: policy``), checked against
the webhook's own decision on a real control plane.

One table of pods goes through :func:`cogate.webhook.admission.evaluate` (the webhook's rules, the one
place they are written) and through a real kube-apiserver running the policies of
:func:`cogate.webhook.policies.admission_policies` (MutatingAdmissionPolicy v1, served from 1.36, and
ValidatingAdmissionPolicy) with no cogate webhook at all: each stored pod must carry the gates and
scheduler name the webhook's patch gives, each refusal and each warning must be the webhook's (the
departures of policies.py's module doc excepted: no adoption warning). Two cases need a second
mutator, a real HTTPS mutating webhook run by this test (webhooks run after policies in the admission
chain): one adds the pod-group label (the late policy gates the pod on the API server's
reinvocation), one strips every scheduling gate (the gate policy puts cogate's back on reinvocation).

The test runs its own control plane: the session's (``cluster``) may carry cogate's webhook, which
would gate the same pods. On a release without MutatingAdmissionPolicy v1 (1.30) the chart keeps the
webhook (``admission.mode: auto``); this file then asserts that the release is older than 1.36.
"""

from __future__ import annotations

import base64
import json
import re
import ssl
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import jsonpatch
import pytest
import yaml
from kubernetes import client

from cogate.api import POD_GROUP_LABEL
from cogate.certs import pki
from cogate.controller.model import releases
from cogate.webhook import admission, policies

from .kube import wait_for

pytestmark = pytest.mark.e2e

GATE = "scheduling.x-k8s.io/pod-group"
ADOPTED = ("scheduler-plugins-scheduler",)
PLANNED = ("batch-scheduler",)
NAME = "e2e"
#: The test webhook adds the pod-group label named by this annotation.
LATE_LABEL = "example.com/late-group"
#: The test webhook removes every scheduling gate of a pod carrying this annotation.
STRIP_GATES = "example.com/strip-gates"
LABEL_PATH = "/metadata/labels/" + POD_GROUP_LABEL.replace("/", "~1")
WARN_PREFIX = re.compile(r"^Validation failed for ValidatingAdmissionPolicy '[^']+' with binding '[^']+': ")


def _ops(pod: dict[str, Any]) -> list[dict[str, Any]]:
    meta = pod.get("metadata") or {}
    notes = meta.get("annotations") or {}
    ops: list[dict[str, Any]] = []
    if LATE_LABEL in notes and POD_GROUP_LABEL not in (meta.get("labels") or {}):
        ops.append({"op": "add", "path": LABEL_PATH, "value": notes[LATE_LABEL]} if meta.get("labels") else
                   {"op": "add", "path": "/metadata/labels", "value": {POD_GROUP_LABEL: notes[LATE_LABEL]}})
    if STRIP_GATES in notes and (pod.get("spec") or {}).get("schedulingGates"):
        ops.append({"op": "remove", "path": "/spec/schedulingGates"})
    return ops


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        req = review["request"]
        ops = _ops(req.get("object") or {})
        resp: dict[str, Any] = {"uid": req["uid"], "allowed": True}
        if ops:
            resp.update(patchType="JSONPatch", patch=base64.b64encode(json.dumps(ops).encode()).decode())
        body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": resp}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def own_cluster() -> Iterator[Any]:
    from cogate.localcluster.build import ensure_binaries
    from cogate.localcluster.cluster import LocalCluster

    ensure_binaries(["etcd", "kubernetes", "kwok"], log=sys.stderr)
    c = LocalCluster()
    c.start()
    try:
        yield c
    finally:
        c.stop()


def _serves_policies(cluster: Any) -> bool:
    doc = json.loads(cluster.kubectl("get", "--raw", "/apis/admissionregistration.k8s.io/v1").stdout)
    return any(r["name"] == "mutatingadmissionpolicies" for r in doc.get("resources", []))


@pytest.fixture(scope="module")
def policed(own_cluster) -> Iterator[tuple[Any, client.ApiClient, str]]:
    """The policies (late policy on, failurePolicy Fail), the test's second mutator (a webhook) and a
    namespace, on ``own_cluster``; yields (cluster, api client, namespace); ``None`` for the namespace on a
    release without MutatingAdmissionPolicy v1."""
    api = own_cluster.api_client()
    if not _serves_policies(own_cluster):
        yield own_cluster, api, ""
        api.close()
        return
    work = Path(tempfile.mkdtemp(prefix="e2e-policies-"))
    ca, ca_key = pki.new_ca("e2e-second-mutator-ca")
    cert, key = pki.issue(ca, ca_key, "second-mutator", dns_names=("localhost",), ip_addresses=("127.0.0.1",))
    pki.write_pem(work / "tls.crt", cert)
    pki.write_pem(work / "tls.key", key)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(work / "tls.crt", work / "tls.key")
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    ns = "policies"
    client.CoreV1Api(api).create_namespace({"metadata": {"name": ns}})
    second = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
              "metadata": {"name": "e2e-second-mutator"},
              "webhooks": [{"name": "second-mutator.e2e.example.com", "admissionReviewVersions": ["v1"],
                            "clientConfig": {"url": f"https://127.0.0.1:{server.server_address[1]}/mutate",
                                             "caBundle": base64.b64encode(pki.cert_to_pem(ca)).decode()},
                            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                       "resources": ["pods"], "scope": "Namespaced"}],
                            "failurePolicy": "Fail", "sideEffects": "None", "timeoutSeconds": 5,
                            "reinvocationPolicy": "Never"}]}
    objs = [*policies.admission_policies(NAME, gate_name=GATE, adopted=ADOPTED, scheduler_names=PLANNED,
                                         late_labels="Fail"), second]
    path = work / "policies.yaml"
    path.write_text(yaml.safe_dump_all(objs))
    own_cluster.kubectl("apply", "-f", str(path))
    core = client.CoreV1Api(api)
    probes = [(_pod("probe-gate", {POD_GROUP_LABEL: "g"}), lambda r: GATE in _gates(r[0])),
              (_pod("probe-late", notes={LATE_LABEL: "g"}), lambda r: GATE in _gates(r[0])),
              (_pod("probe-warn", {POD_GROUP_LABEL: ""}), lambda r: bool(_warnings(r[2])))]
    for body, ready in probes:  # the API server loads policies and webhooks asynchronously
        wait_for(lambda: ready(core.create_namespaced_pod_with_http_info(ns, body, dry_run="All")), 60,
                 what=f"policies active ({body['metadata']['name']})")
    wait_for(lambda: _refused(core, ns, _pod("probe-refuse", {POD_GROUP_LABEL: "Bad_Name"})), 60,
             what="refusal policy active")
    try:
        yield own_cluster, api, ns
    finally:
        server.shutdown()
        api.close()


def _pod(name: str, labels: dict[str, str] | None = None, notes: dict[str, str] | None = None,
         **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels or {}, "annotations": notes or {}},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}], **spec}}


def _gates(pod: Any) -> list[str]:
    return [g.name for g in (pod.spec.scheduling_gates or [])]


def _warnings(headers: Any) -> list[str]:
    """The warning texts of a response's ``Warning`` headers (RFC 7234: ``299 - "text"``)."""
    raw = headers.get("Warning") or "" if headers is not None else ""
    return [m.replace('\\"', '"') for m in re.findall(r'299 - "((?:[^"\\]|\\.)*)"', raw)]


def _refused(core: client.CoreV1Api, ns: str, body: dict[str, Any]) -> bool:
    try:
        core.create_namespaced_pod(ns, body, dry_run="All")
    except client.ApiException as exc:
        return exc.status == 422
    return False


def _review(body: dict[str, Any], ns: str) -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u", "operation": "CREATE", "namespace": ns, "kind": {"group": "", "version": "v1",
                                                                                       "kind": "Pod"},
                        "resource": {"group": "", "version": "v1", "resource": "pods"}, "object": body}}


#: name -> (labels, annotations, spec fields): every outcome of admission.py and the second mutator's cases.
CASES: dict[str, tuple[dict[str, str], dict[str, str], dict[str, Any]]] = {
    "unlabelled": ({}, {}, {}),
    "gated": ({POD_GROUP_LABEL: "train"}, {}, {}),
    "already-gated": ({POD_GROUP_LABEL: "train"}, {}, {"schedulingGates": [{"name": GATE}]}),
    "other-gate": ({POD_GROUP_LABEL: "train"}, {}, {"schedulingGates": [{"name": "example.com/other"}]}),
    "adopted": ({POD_GROUP_LABEL: "train"}, {}, {"schedulerName": ADOPTED[0]}),
    "adopted-already-gated": ({POD_GROUP_LABEL: "train"}, {},
                              {"schedulerName": ADOPTED[0], "schedulingGates": [{"name": GATE}]}),
    "planned-scheduler": ({POD_GROUP_LABEL: "train"}, {}, {"schedulerName": PLANNED[0]}),
    "unplanned-scheduler": ({POD_GROUP_LABEL: "a" * 45}, {}, {"schedulerName": "my-own-scheduler-" + "x" * 30}),
    "empty-label": ({POD_GROUP_LABEL: ""}, {}, {}),
    "unnameable": ({POD_GROUP_LABEL: "Train_Job.v1"}, {}, {}),
    "unnameable-with-node": ({POD_GROUP_LABEL: "a..b"}, {}, {"nodeName": "nowhere"}),
    "node-name": ({POD_GROUP_LABEL: "train"}, {}, {"nodeName": "nowhere"}),
    "dotted-name": ({POD_GROUP_LABEL: "train.v1-2"}, {}, {}),
    # The second mutator (after every policy): the label added late, gated on reinvocation ...
    "late-label": ({}, {LATE_LABEL: "train"}, {}),
    "late-label-adopted": ({}, {LATE_LABEL: "train"}, {"schedulerName": ADOPTED[0]}),
    # ... and the gate stripped: the gate policy, recorded as invoked, puts it back on reinvocation.
    "gate-stripped": ({POD_GROUP_LABEL: "train"}, {STRIP_GATES: "yes"}, {}),
}


def _expected(name: str, body: dict[str, Any], ns: str) -> admission.Admission:
    """The webhook's decision on the pod as the policies finally see it (the late label applied)."""
    final = json.loads(json.dumps(body))
    if LATE_LABEL in final["metadata"]["annotations"]:
        final["metadata"]["labels"][POD_GROUP_LABEL] = final["metadata"]["annotations"][LATE_LABEL]
    if STRIP_GATES in final["metadata"]["annotations"]:
        final["spec"].pop("schedulingGates", None)
    return admission.evaluate(_review(final, ns), GATE, frozenset({"default-scheduler", *PLANNED}),
                              frozenset(ADOPTED)), final


@pytest.mark.parametrize("case", list(CASES))
def test_policies_decide_as_the_webhook(policed, case):
    """The stored pod (gates, schedulerName), the refusal and the warnings of the policies equal the
    webhook's decision (evaluate) on the same pod; the adoption warning is the one departure."""
    cluster, api, ns = policed
    if not ns:
        version = releases.parse(client.VersionApi(api).get_code().git_version)
        assert version is not None and version < (1, 36), f"{version} should serve MutatingAdmissionPolicy v1"
        return
    labels, notes, spec = CASES[case]
    body = _pod(f"p-{case}", dict(labels), dict(notes), **spec)
    decision, final = _expected(case, body, ns)
    core = client.CoreV1Api(api)
    if decision.refusal:
        with pytest.raises(client.ApiException) as info:
            core.create_namespaced_pod(ns, body)
        assert info.value.status == 422, info.value.body
        message = json.loads(info.value.body)["message"]
        assert message == (f'pods "{body["metadata"]["name"]}" is forbidden: ValidatingAdmissionPolicy '
                           f"'{NAME}-refuse' with binding '{NAME}-refuse' denied request: {decision.refusal}"), message
        assert json.loads(info.value.body)["reason"] == "Invalid"
        return
    pod, _, headers = core.create_namespaced_pod_with_http_info(ns, body)
    want = jsonpatch.apply_patch(final, decision.patch or [])
    assert _gates(pod) == [g["name"] for g in want["spec"].get("schedulingGates") or []], (case, _gates(pod))
    assert pod.spec.scheduler_name == want["spec"].get("schedulerName", "default-scheduler"), pod.spec.scheduler_name
    expected_warnings = [w for w in decision.warnings if not decision.adopted or w != admission.adoption_warning(
        decision.adopted)]
    got = _warnings(headers)
    assert all(WARN_PREFIX.match(w) for w in got), got
    assert sorted(WARN_PREFIX.sub("", w) for w in got) == sorted(expected_warnings), (case, got)
    if case.startswith(("late-label", "gate-stripped")):
        assert GATE in _gates(pod), "gated only on the API server's reinvocation"

