"""The pod-group label added after cogate's webhook ran (issue 21 item 4), on the real control plane.

A second mutator adds the label: a second mutating webhook later in the order (a real HTTPS
webhook server run by this test, registered as ``zz-e2e-late-labeller``, after ``cogate``), or
a real MutatingAdmissionPolicy (admissionregistration.k8s.io/v1, served by kube-apiserver 1.36)
that sets the label only once that webhook has annotated the pod, i.e. on the API server's
reinvocation. Members are bare pods or pods of a ReplicaSet. With cogate's registration
(``reinvocationPolicy: IfNeeded`` and the late-label entry) every member is gated at creation and
the gang is released whole; with the registration cogate had before (label objectSelector only,
``reinvocationPolicy: Never``) the same pods are never gated, and the controller says so on the
PodGroup (``Disrupted=True`` reason ``UngatedWithoutRelease``, a Warning event naming the pods
and the fix).
"""

from __future__ import annotations

import base64
import json
import ssl
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml
from kubernetes import client

from cogate.api import POD_GROUP_LABEL
from cogate.certs import pki
from cogate.controller.model import releases
from cogate.localcluster import example
from cogate.webhook.config import webhook_configuration

from .kube import bound, condition, create_pod_group, events_for, gated, group_pods, status, wait_for, webhook_requests

pytestmark = pytest.mark.e2e

NODE8 = dict(kwok_taint=False, cpu="8", memory="16Gi", pods=110)
#: The test webhook adds the label named by this annotation (input "webhook").
GANG = "example.com/gang"
#: The test webhook copies this annotation to GANG_FROM_WEBHOOK; the policy turns that into the label
#: (input "policy": the label appears only on the API server's reinvocation).
GANG_VIA_POLICY = "example.com/gang-via-policy"
GANG_FROM_WEBHOOK = "example.com/gang-from-webhook"
LABEL_PATH = "/metadata/labels/" + POD_GROUP_LABEL.replace("~", "~0").replace("/", "~1")


def _ops(pod: dict[str, Any]) -> list[dict[str, Any]]:
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    if GANG in annotations:
        return [{"op": "add", "path": LABEL_PATH, "value": annotations[GANG]}]
    if GANG_VIA_POLICY in annotations and GANG_FROM_WEBHOOK not in annotations:
        return [{"op": "add", "path": "/metadata/annotations/" + GANG_FROM_WEBHOOK.replace("/", "~1"),
                 "value": annotations[GANG_VIA_POLICY]}]
    return []


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        req = review["request"]
        ops = _ops(req.get("object") or {})
        resp: dict[str, Any] = {"uid": req["uid"], "allowed": True}
        if ops:
            resp["patchType"] = "JSONPatch"
            resp["patch"] = base64.b64encode(json.dumps(ops).encode()).decode()
        body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": resp}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def serves_policies(stack) -> bool:
    """Whether the API server serves MutatingAdmissionPolicy in admissionregistration.k8s.io/v1
    (KEP-3962, v1 in Kubernetes 1.36; 1.30 has none)."""
    doc = json.loads(stack.cluster.kubectl("get", "--raw", "/apis/admissionregistration.k8s.io/v1").stdout)
    return any(r["name"] == "mutatingadmissionpolicies" for r in doc.get("resources", []))


@pytest.fixture
def labeller(stack, namespace) -> Iterator[bool]:
    """A real second mutating webhook (HTTPS, this process) and, where the release serves it, a real
    MutatingAdmissionPolicy, both scoped to the test's namespace; removed after the test. Yields
    whether the policy is there."""
    work = Path(tempfile.mkdtemp(prefix="late-labeller-"))
    ca, ca_key = pki.new_ca("e2e-late-labeller-ca")
    cert, key = pki.issue(ca, ca_key, "late-labeller", dns_names=("localhost",), ip_addresses=("127.0.0.1",))
    pki.write_pem(work / "tls.crt", cert)
    pki.write_pem(work / "tls.key", key)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(work / "tls.crt", work / "tls.key")
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    in_ns = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    pods_create = {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
    objs = [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
         "metadata": {"name": f"zz-e2e-late-labeller-{namespace}"},  # after "cogate" in the webhooks' order
         "webhooks": [{"name": "late-labeller.e2e.example.com", "admissionReviewVersions": ["v1"],
                       "clientConfig": {"url": f"https://127.0.0.1:{server.server_address[1]}/mutate",
                                        "caBundle": base64.b64encode(pki.cert_to_pem(ca)).decode()},
                       "rules": [{**pods_create, "scope": "Namespaced"}], "namespaceSelector": in_ns,
                       "failurePolicy": "Fail", "sideEffects": "None", "timeoutSeconds": 5,
                       "reinvocationPolicy": "Never"}]},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
         "metadata": {"name": f"e2e-gang-label-{namespace}"},
         "spec": {"matchConstraints": {"resourceRules": [pods_create], "namespaceSelector": in_ns},
                  "failurePolicy": "Fail", "reinvocationPolicy": "IfNeeded",
                  "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": (
                      f"has(object.metadata.annotations) && '{GANG_FROM_WEBHOOK}' in object.metadata.annotations"
                      f" && (!has(object.metadata.labels) || !('{POD_GROUP_LABEL}' in object.metadata.labels))"
                      f" ? [JSONPatch{{op: 'add', path: '{LABEL_PATH}',"
                      f" value: object.metadata.annotations['{GANG_FROM_WEBHOOK}']}}] : []")}}]}},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding",
         "metadata": {"name": f"e2e-gang-label-{namespace}"},
         "spec": {"policyName": f"e2e-gang-label-{namespace}"}},
    ]
    policies = serves_policies(stack)
    if not policies:  # a release before MutatingAdmissionPolicy v1 (1.36): the second webhook only
        objs = objs[:1]
    path = work / "labeller.yaml"
    path.write_text(yaml.safe_dump_all(objs))
    stack.cluster.kubectl("apply", "-f", str(path))
    time.sleep(2)  # the API server loads webhook configurations and policies asynchronously
    try:
        yield policies
    finally:
        stack.cluster.kubectl("delete", "--ignore-not-found", "--wait=false", "-f", str(path))
        server.shutdown()


def _registration_before(stack) -> None:
    """cogate's registration as it was before issue 21: the label objectSelector only, no reinvocation."""
    config = webhook_configuration({"url": f"https://127.0.0.1:{stack.webhook_port}/mutate",
                                    "caBundle": base64.b64encode((stack.workdir / "ca.crt").read_bytes()).decode()},
                                   late_labels=None)
    config["webhooks"][0]["reinvocationPolicy"] = "Never"
    path = stack.workdir / "webhook-configuration-before.yaml"
    path.write_text(yaml.safe_dump(config))
    stack.cluster.kubectl("apply", "-f", str(path))


def _registration_now(stack) -> None:
    stack.register_webhook((stack.workdir / "ca.crt").read_bytes())


def _annotated(via: str, group: str) -> dict[str, Any]:
    return {GANG: group} if via == "webhook" else {GANG_VIA_POLICY: group}


def _create(kube, namespace: str, owner: str, via: str, group: str, n: int, start: int = 0) -> None:
    """``n`` members (1 CPU) without the label, annotated for the second mutator; bare pods, or a
    ReplicaSet of that size (scaled up when it exists)."""
    core = client.CoreV1Api(kube)
    if owner == "pods":
        for i in range(start, start + n):
            tpl = example.pod_template(None, cpu="1", app=group)
            tpl["metadata"].update(name=f"{group}-{i}", annotations=_annotated(via, group))
            core.create_namespaced_pod(namespace, {"apiVersion": "v1", "kind": "Pod", **tpl})
        return
    apps = client.AppsV1Api(kube)
    if start:
        apps.patch_namespaced_replica_set_scale(group, namespace, {"spec": {"replicas": start + n}})
        return
    rs = example.replica_set(group, n, namespace=namespace, group=None, cpu="1")
    rs["spec"]["template"]["metadata"]["annotations"] = _annotated(via, group)
    apps.create_namespaced_replica_set(namespace, rs)


def _members(kube, namespace: str, group: str) -> list[client.V1Pod]:
    return group_pods(kube, namespace, group, deleting=False)


@pytest.mark.parametrize("owner", ["pods", "replicaset"])
@pytest.mark.parametrize("via", ["webhook", "policy"])
def test_member_labelled_by_a_later_mutator_is_gated_and_released_with_its_gang(stack, kube, namespace, only_nodes,
                                                                                labeller, via, owner):
    """minMember 3; 2 members first, labelled late (by the second webhook, or by the policy on
    reinvocation): both gated at creation and kept gated while the group waits; the third arrives:
    the gang is released whole. On a release without MutatingAdmissionPolicy v1 the policy case
    checks only that the release is older than 1.36 (docs/reference/releases.md: not available)."""
    if via == "policy" and not labeller:
        version = releases.parse(client.VersionApi(kube).get_code().git_version)
        assert version is not None and version < (1, 36), f"{version} should serve MutatingAdmissionPolicy v1"
        return
    only_nodes(1, **NODE8)
    create_pod_group(kube, example.pod_group("g", 3, namespace=namespace, timeout_seconds=None))
    _create(kube, namespace, owner, via, "g", 2)
    two = wait_for(lambda: len(ms := _members(kube, namespace, "g")) == 2 and ms, 30, what="2 labelled members")
    for p in two:
        assert p.metadata.labels[POD_GROUP_LABEL] == "g", p.metadata.labels  # the other mutator labelled it
        assert gated(p), f"{p.metadata.name} was not gated: {p.spec.scheduling_gates}"
        if via == "policy":
            assert GANG_FROM_WEBHOOK in p.metadata.annotations  # the label came on reinvocation
    wait_for(lambda: (c := condition(status(kube, namespace, "g"), "Released")) and c["reason"] == "WaitingForMembers"
             and "2 of 3" in c["message"], 15, what="Released=False WaitingForMembers 2 of 3")
    time.sleep(2)
    ms = _members(kube, namespace, "g")
    assert all(gated(p) and not bound(p) for p in ms), [(p.metadata.name, p.spec.node_name) for p in ms]
    st = status(kube, namespace, "g")
    assert st.get("phase", "Pending") == "Pending" and not st.get("scheduled"), st
    _create(kube, namespace, owner, via, "g", 1, start=2)
    wait_for(lambda: len(ms := _members(kube, namespace, "g")) == 3 and all(bound(p) for p in ms), 30,
             what="all 3 members bound")
    st = wait_for(lambda: (s := status(kube, namespace, "g")).get("scheduled") == 3 and s, 15, what="scheduled 3")
    assert st["phase"] in ("Scheduled", "Running"), st
    released = condition(st, "Released")
    assert released["status"] == "True", released
    # released by cogate: the gate's removal made each generation at least 2 (API servers before
    # 1.33 set no pod generation: None there)
    assert all(g is None or g >= 2 for g in (p.metadata.generation for p in _members(kube, namespace, "g")))
    disrupted = condition(st, "Disrupted")
    assert disrupted is None or disrupted["reason"] != "UngatedWithoutRelease", disrupted


def _without_pod_generation(kube, core, namespace: str, late: list[str]) -> bool:
    """On a release whose pods carry no ``metadata.generation`` (before 1.33; releases.py
    ``never_gated_report``: not available) a never-gated member cannot be recognised: check it is not
    (no false alarm, nothing said) and return True; else False."""
    if core.read_namespaced_pod(late[0], namespace).metadata.generation is not None:
        return False
    version = releases.parse(client.VersionApi(kube).get_code().git_version)
    assert version is not None and version < (1, 33), f"{version} should set pod generations"
    time.sleep(3)
    disrupted = condition(status(kube, namespace, "g"), "Disrupted")
    assert disrupted is None or disrupted["reason"] != "UngatedWithoutRelease", disrupted
    return True


@pytest.mark.parametrize("released_first", [False, True], ids=["never-released", "released-group"])
def test_never_gated_member_is_reported_with_the_fix(stack, kube, namespace, only_nodes, labeller, released_first):
    """With cogate's old registration the late label is never seen: the members go to kube-scheduler
    ungated. The controller names them on the PodGroup (never released: both late members; released:
    the late member beside two members cogate released)."""
    only_nodes(1, **NODE8)
    core = client.CoreV1Api(kube)
    create_pod_group(kube, example.pod_group("g", 2, namespace=namespace, timeout_seconds=None))
    if released_first:
        for i in range(2):  # labelled at creation: gated and released as a gang
            tpl = example.pod_template("g", cpu="1", app="g")
            tpl["metadata"]["name"] = f"g-{i}"
            core.create_namespaced_pod(namespace, {"apiVersion": "v1", "kind": "Pod", **tpl})
        wait_for(lambda: status(kube, namespace, "g").get("scheduled") == 2, 30, what="gang released")
    _registration_before(stack)
    try:
        time.sleep(2)
        late = ["late-0"] if released_first else ["late-0", "late-1"]
        for name in late:
            tpl = example.pod_template(None, cpu="1", app="g")
            tpl["metadata"].update(name=name, annotations={GANG: "g"})
            created = core.create_namespaced_pod(namespace, {"apiVersion": "v1", "kind": "Pod", **tpl})
            assert created.metadata.labels[POD_GROUP_LABEL] == "g" and not gated(created), created.spec
        wait_for(lambda: all(bound(core.read_namespaced_pod(n, namespace)) for n in late), 30,
                 what="late members bound without a release")
        if _without_pod_generation(kube, core, namespace, late):
            return
        # the condition may first name the member the controller saw first; it names every one
        # once it has seen them all
        cond = wait_for(lambda: (c := condition(status(kube, namespace, "g"), "Disrupted")) and c["status"] == "True"
                        and all(n in c["message"] for n in late) and c, 15, what=f"Disrupted=True naming {late}")
        assert cond["reason"] == "UngatedWithoutRelease", cond
        assert "were never gated" in cond["message"], cond
        assert "g-0" not in cond["message"] and "g-1" not in cond["message"], cond
        warnings = wait_for(lambda: (w := [e for e in events_for(kube, namespace, "g") if e.reason == "UngatedWithoutRelease"])
                            and any(all(n in e.message for n in late) for e in w) and w,
                            10, what=f"UngatedWithoutRelease event naming {late}")
        assert all(e.type == "Warning" for e in warnings)
        assert any(all(n in e.message for n in late) and "webhook.lateLabels.enabled=true" in e.message
                   and "reinvocationPolicy IfNeeded" in e.message for e in warnings), [e.message for e in warnings]
        want = 3 if released_first else 2  # counted as the members they are
        wait_for(lambda: status(kube, namespace, "g").get("scheduled") == want, 10, what=f"scheduled {want}")
    finally:
        _registration_now(stack)
    # the late members go: the report ends (a released gang that keeps minMember placed: Disrupted=False)
    for name in late:
        core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
    wait_for(lambda: (c := condition(status(kube, namespace, "g"), "Disrupted")) and c["reason"] != "UngatedWithoutRelease",
             30, what="UngatedWithoutRelease no longer reported once the never-gated members are gone")
    if released_first:
        wait_for(lambda: condition(status(kube, namespace, "g"), "Disrupted")["status"] == "False", 30,
                 what="Disrupted=False: minMember still placed")


@pytest.mark.parametrize("labelled, plain", [(1, 0), (4, 2), (0, 3)])
def test_a_pod_labelled_at_creation_costs_one_webhook_call(stack, kube, namespace, labelled, plain):
    """The late-label entry's match condition skips a pod the first entry gated: ``labelled`` pods
    labelled at creation are each gated by one call (no ``already_gated`` call from the late
    entry), and ``plain`` pods without the label each get one call, from the late entry (allowed
    unchanged, outcome ``ignored``)."""
    _registration_now(stack)
    core = client.CoreV1Api(kube)
    before = webhook_requests(stack)
    for i in range(labelled):
        tpl = example.pod_template("gang", cpu="100m", app="gang")
        tpl["metadata"]["name"] = f"labelled-{i}"
        core.create_namespaced_pod(namespace, {"apiVersion": "v1", "kind": "Pod", **tpl})
    for i in range(plain):
        tpl = example.pod_template(None, cpu="100m", app="plain")
        tpl["metadata"]["name"] = f"plain-{i}"
        core.create_namespaced_pod(namespace, {"apiVersion": "v1", "kind": "Pod", **tpl})
    after = webhook_requests(stack)
    delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    assert delta.get("gated") == labelled and delta.get("already_gated") == 0, delta
    assert delta.get("ignored") == plain, delta
    assert sum(delta.values()) == labelled + plain, delta
    pods = core.list_namespaced_pod(namespace).items
    assert sorted(p.metadata.name for p in pods if gated(p)) == sorted(f"labelled-{i}" for i in range(labelled))
