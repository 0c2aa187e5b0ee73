"""Unit tests of the pure admission decision (cogate.webhook.admission).

Reviews are built as the kube-apiserver sends them to a mutating webhook on pod
CREATE: the pod is already defaulted and has passed the built-in mutating plugins
(ServiceAccount token volume, DefaultTolerationSeconds, Priority), has no name when
a controller created it with generateName, and an empty status.
"""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import jsonpatch
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cogate.api import DEFAULT_GATE_NAME, POD_GROUP_LABEL
from cogate.webhook.admission import (
    Admission,
    InvalidReview,
    Outcome,
    admit,
    evaluate,
    gate_patch,
    native_warning,
    validate_adoption,
    validate_gate_name,
)

POD_GVK = {"group": "", "version": "v1", "kind": "Pod"}
PODS_GVR = {"group": "", "version": "v1", "resource": "pods"}
OTHER_GATE = {"name": "example.com/quota-check"}


def job_pod(
    group: str | None = "train",
    *,
    gates: Any = "absent",
    node_name: str | None = None,
) -> dict[str, Any]:
    """A pod as an indexed Job's controller creates it, as the API server admits it.

    ``group``: value of the PodGroup label (None = no label); ``gates``: the
    ``spec.schedulingGates`` value ("absent" leaves the key out).
    """
    labels = {
        "batch.kubernetes.io/controller-uid": "5c1f4a2e-8f3b-4f1e-9c55-0f0a6f3f2b10",
        "batch.kubernetes.io/job-name": "train-worker",
        "controller-uid": "5c1f4a2e-8f3b-4f1e-9c55-0f0a6f3f2b10",
        "job-name": "train-worker",
        "batch.kubernetes.io/job-completion-index": "0",
    }
    if group is not None:
        labels[POD_GROUP_LABEL] = group
    pod: dict[str, Any] = {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {
            "generateName": "train-worker-0-",
            "namespace": "ml",
            "creationTimestamp": None,
            "labels": labels,
            "annotations": {"batch.kubernetes.io/job-completion-index": "0"},
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "name": "train-worker",
                    "uid": "5c1f4a2e-8f3b-4f1e-9c55-0f0a6f3f2b10",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "managedFields": [
                {
                    "manager": "kube-controller-manager",
                    "operation": "Update",
                    "apiVersion": "v1",
                    "time": "2024-05-01T10:00:00Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:metadata": {"f:labels": {}}, "f:spec": {"f:containers": {}}},
                }
            ],
        },
        "spec": {
            "volumes": [
                {
                    "name": "kube-api-access-7xq2k",
                    "projected": {
                        "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                        ],
                        "defaultMode": 420,
                    },
                }
            ],
            "containers": [
                {
                    "name": "worker",
                    "image": "busybox:1.36",
                    "command": ["sleep", "3600"],
                    "resources": {
                        "limits": {"memory": "256Mi", "nvidia.com/gpu": "1"},
                        "requests": {"cpu": "500m", "memory": "256Mi", "nvidia.com/gpu": "1"},
                    },
                    "volumeMounts": [
                        {
                            "name": "kube-api-access-7xq2k",
                            "readOnly": True,
                            "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                        }
                    ],
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "imagePullPolicy": "IfNotPresent",
                }
            ],
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "serviceAccount": "default",
            "hostname": "train-worker-0",
            "subdomain": "train-worker",
            "securityContext": {},
            "schedulerName": "default-scheduler",
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            ],
            "priority": 0,
            "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
        },
        "status": {},
    }
    if gates != "absent":
        pod["spec"]["schedulingGates"] = gates
    if node_name is not None:
        pod["spec"]["nodeName"] = node_name
    return pod


def review(
    obj: Any,
    *,
    operation: str = "CREATE",
    uid: Any = "705ab4f5-6393-11e8-b7cc-42010a800002",
    kind: Any = POD_GVK,
    resource: Any = PODS_GVR,
    sub_resource: str | None = None,
    old: Any = None,
    name: str = "",
    namespace: str = "ml",
    dry_run: bool = False,
) -> dict[str, Any]:
    """An ``admission.k8s.io/v1`` AdmissionReview request as the API server sends it."""
    request: dict[str, Any] = {
        "uid": uid,
        "kind": kind,
        "resource": resource,
        "requestKind": kind,
        "requestResource": resource,
        "name": name,
        "namespace": namespace,
        "operation": operation,
        "userInfo": {
            "username": "system:serviceaccount:kube-system:job-controller",
            "uid": "b1a8c2d4-0000-4000-8000-000000000001",
            "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"],
        },
        "object": obj,
        "oldObject": old,
        "dryRun": dry_run,
        "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
    }
    if sub_resource is not None:
        request["subResource"] = sub_resource
        request["requestSubResource"] = sub_resource
    if uid is _MISSING:
        del request["uid"]
    return {"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": request}


_MISSING = object()


def decode_patch(response: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The JSONPatch of an AdmissionReview response, checked for shape; None if absent."""
    resp = response["response"]
    if "patch" not in resp:
        assert "patchType" not in resp
        return None
    assert resp["patchType"] == "JSONPatch"
    ops = json.loads(base64.b64decode(resp["patch"], validate=True))
    assert isinstance(ops, list) and ops
    return ops


def apply_response(pod: dict[str, Any], response: dict[str, Any]) -> dict[str, Any]:
    """The pod after the API server applies the response's patch (a new dict)."""
    ops = decode_patch(response)
    if ops is None:
        return copy.deepcopy(pod)
    return jsonpatch.apply_patch(pod, ops, in_place=False)


def with_gates(pod: dict[str, Any], gates: list[dict[str, str]]) -> dict[str, Any]:
    out = copy.deepcopy(pod)
    out["spec"]["schedulingGates"] = gates
    return out


OURS = {"name": DEFAULT_GATE_NAME}

# (case id, pod, review kwargs, expected outcome, expected pod after patch or None for
# "unchanged", expected warning substring or None)
GATED_CASES = [
    ("no-gates", job_pod(), {}, Outcome.GATED, [OURS], None),
    ("null-gates", job_pod(gates=None), {}, Outcome.GATED, [OURS], None),
    ("empty-gates", job_pod(gates=[]), {}, Outcome.GATED, [OURS], None),
    ("other-gate", job_pod(gates=[OTHER_GATE]), {}, Outcome.GATED, [OTHER_GATE, OURS], None),
    (
        "two-other-gates",
        job_pod(gates=[{"name": "b.example/two"}, {"name": "a.example/one"}]),
        {},
        Outcome.GATED,
        [{"name": "b.example/two"}, {"name": "a.example/one"}, OURS],
        None,
    ),
    ("already-gated", job_pod(gates=[OURS]), {}, Outcome.ALREADY_GATED, None, None),
    ("already-gated-among-others", job_pod(gates=[OTHER_GATE, OURS]), {}, Outcome.ALREADY_GATED, None, None),
    ("dry-run", job_pod(), {"dry_run": True}, Outcome.GATED, [OURS], None),
    ("named-pod", job_pod(), {"name": "train-worker-0-abcde"}, Outcome.GATED, [OURS], None),
    ("kind-absent-resource-pods", job_pod(), {"kind": None}, Outcome.GATED, [OURS], None),
    ("unlabelled", job_pod(group=None), {}, Outcome.IGNORED, None, None),
    ("node-name", job_pod(node_name="node-1"), {}, Outcome.BOUND, None, "nodeName"),
    ("empty-group", job_pod(group=""), {}, Outcome.EMPTY_GROUP, None, "empty"),
    ("empty-group-and-node-name", job_pod(group="", node_name="node-1"), {}, Outcome.EMPTY_GROUP, None, "empty"),
    ("update", job_pod(), {"operation": "UPDATE", "old": job_pod()}, Outcome.IGNORED, None, None),
    ("delete", None, {"operation": "DELETE", "old": job_pod()}, Outcome.IGNORED, None, None),
    (
        "eviction-subresource",
        {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "p", "namespace": "ml"}},
        {
            "sub_resource": "eviction",
            "kind": {"group": "policy", "version": "v1", "kind": "Eviction"},
        },
        Outcome.IGNORED,
        None,
        None,
    ),
    (
        "binding-subresource",
        {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"}, "target": {"kind": "Node", "name": "n"}},
        {"sub_resource": "binding", "kind": {"group": "", "version": "v1", "kind": "Binding"}},
        Outcome.IGNORED,
        None,
        None,
    ),
    (
        "labelled-deployment",
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "ml", "labels": {POD_GROUP_LABEL: "train"}},
            "spec": {"replicas": 2},
        },
        {
            "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
            "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
        },
        Outcome.IGNORED,
        None,
        None,
    ),
]


@pytest.mark.parametrize(
    "pod, kwargs, outcome, gates, warning",
    [case[1:] for case in GATED_CASES],
    ids=[case[0] for case in GATED_CASES],
)
def test_admission_table(pod, kwargs, outcome, gates, warning):
    rv = review(pod, **kwargs)
    before = copy.deepcopy(rv)
    result = evaluate(rv)
    response = admit(rv)
    assert rv == before, "the decision must not modify its input"
    assert result.outcome == outcome
    assert response["apiVersion"] == "admission.k8s.io/v1"
    assert response["kind"] == "AdmissionReview"
    assert response["response"]["uid"] == rv["request"]["uid"]
    assert response["response"]["allowed"] is True
    if warning is None:
        assert "warnings" not in response["response"]
    else:
        (text,) = response["response"]["warnings"]
        assert warning in text and len(text) <= 120
    if pod is None:
        assert decode_patch(response) is None
        return
    patched = apply_response(pod, response)
    if gates is None:
        assert decode_patch(response) is None
        assert patched == pod
    else:
        # Exactly the gate list changed; every other field is byte-for-byte the same.
        assert patched == with_gates(pod, gates)


def test_custom_gate_name_appends_after_default_gate():
    pod = job_pod(gates=[OURS])
    response = admit(review(pod), gate_name="example.com/gang")
    assert apply_response(pod, response)["spec"]["schedulingGates"] == [OURS, {"name": "example.com/gang"}]


def test_pod_without_spec_gets_spec_with_gate_only():
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {POD_GROUP_LABEL: "g"}}}
    patched = apply_response(pod, admit(review(pod)))
    assert patched == {**pod, "spec": {"schedulingGates": [OURS]}}


def test_decision_carries_identity_for_logs():
    result = evaluate(review(job_pod()))
    assert (result.namespace, result.name, result.operation, result.kind) == ("ml", "train-worker-0-", "CREATE", "Pod")
    assert result.extra == {"group": "train"}
    named = evaluate(review(job_pod(), name="train-worker-0-x1y2z"))
    assert named.name == "train-worker-0-x1y2z"


# Label values the API server accepts as label values but no PodGroup can be named
# (not a DNS-1123 subdomain), and one longer than a PodGroup name may be.
UNNAMEABLE = [
    ("Train_Job.v1", "DNS-1123 subdomain"),
    ("Train", "DNS-1123 subdomain"),
    ("train_job", "DNS-1123 subdomain"),
    ("-train", "DNS-1123 subdomain"),
    ("train.", "DNS-1123 subdomain"),
    ("train..v1", "DNS-1123 subdomain"),
    ("a" * 64, "at most 63 characters"),
]


@pytest.mark.parametrize("value,why", UNNAMEABLE, ids=[v[:16] for v, _ in UNNAMEABLE])
@pytest.mark.parametrize("node_name", [None, "node-1"], ids=["unbound", "node-name"])
def test_label_value_that_cannot_name_a_pod_group_is_refused_saying_why(value, why, node_name):
    """Issue 9 item 8: gating such a pod would keep it Pending for ever (no PodGroup can have
    that name), so it is refused; a workload controller's FailedCreate event shows why."""
    result = evaluate(review(job_pod(group=value, node_name=node_name)))
    assert result.outcome == Outcome.INVALID_GROUP
    assert result.patch is None
    response = admit(review(job_pod(group=value, node_name=node_name)))["response"]
    assert response["allowed"] is False
    assert "patch" not in response
    st_ = response["status"]
    assert (st_["status"], st_["code"], st_["reason"]) == ("Failure", 422, "Invalid")
    assert POD_GROUP_LABEL in st_["message"] and repr(value) in st_["message"]
    assert "cannot name a PodGroup" in st_["message"] and why in st_["message"]


@pytest.mark.parametrize("value", ["train", "train-job.v1", "a", "0", "a" * 63, "x.y-z.1"])
def test_label_values_that_can_name_a_pod_group_are_gated(value):
    result = evaluate(review(job_pod(group=value)))
    assert result.outcome == Outcome.GATED
    assert admit(review(job_pod(group=value)))["response"]["allowed"] is True


def test_response_shape_without_patch():
    response = Admission(uid="u1", outcome=Outcome.IGNORED).response()
    assert response == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": "u1", "allowed": True},
    }


def _pod_with(**metadata_or_spec: Any) -> dict[str, Any]:
    pod = job_pod()
    for key, value in metadata_or_spec.items():
        where, _, field = key.partition("__")
        pod[where][field] = value
    return pod


INVALID_CASES = [
    ("list-body", [], "body"),
    ("string-body", "AdmissionReview", "body"),
    ("null-body", None, "body"),
    ("v1beta1", {**review(job_pod()), "apiVersion": "admission.k8s.io/v1beta1"}, "apiVersion"),
    ("no-api-version", {k: v for k, v in review(job_pod()).items() if k != "apiVersion"}, "apiVersion"),
    ("wrong-kind", {**review(job_pod()), "kind": "Pod"}, "kind"),
    ("no-request", {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}, "request"),
    ("request-not-object", {**review(job_pod()), "request": ["x"]}, "request"),
    ("missing-uid", review(job_pod(), uid=_MISSING), "request.uid"),
    ("null-uid", review(job_pod(), uid=None), "request.uid"),
    ("empty-uid", review(job_pod(), uid=""), "request.uid"),
    ("int-uid", review(job_pod(), uid=42), "request.uid"),
    ("object-string", review("a pod"), "request.object"),
    ("object-list", review([job_pod()]), "request.object"),
    ("object-missing-on-create", review(None), "request.object"),
    ("old-object-string", review(job_pod(), operation="UPDATE", old="x"), "request.oldObject"),
    ("operation-int", {**review(job_pod()), "request": {**review(job_pod())["request"], "operation": 1}}, "request.operation"),
    ("kind-string", review(job_pod(), kind="Pod"), "request.kind"),
    ("metadata-string", review(_pod_with(metadata__labels="a=b")), "request.object.metadata.labels"),
    ("label-value-int", review(_pod_with(metadata__labels={POD_GROUP_LABEL: 3})), POD_GROUP_LABEL),
    ("spec-list", review({**job_pod(), "spec": []}), "request.object.spec"),
    ("gates-object", review(job_pod(gates={"name": DEFAULT_GATE_NAME})), "request.object.spec.schedulingGates"),
    ("gate-entry-string", review(job_pod(gates=["x"])), "request.object.spec.schedulingGates[0]"),
    ("gate-name-int", review(job_pod(gates=[OTHER_GATE, {"name": 7}])), "request.object.spec.schedulingGates[1].name"),
    ("node-name-int", review(job_pod(node_name=5)), "request.object.spec.nodeName"),
]


@pytest.mark.parametrize("body, field", [c[1:] for c in INVALID_CASES], ids=[c[0] for c in INVALID_CASES])
def test_invalid_reviews_name_the_field(body, field):
    with pytest.raises(InvalidReview) as info:
        admit(body)
    assert isinstance(info.value, ValueError)
    assert field in str(info.value)


@pytest.mark.parametrize(
    "name",
    [DEFAULT_GATE_NAME, "gang", "example.com/gang", "a", "x.y-z/A_b.c-9", "a" * 63, ("s" * 253) + "/n"],
)
def test_valid_gate_names(name):
    assert validate_gate_name(name) == name


@pytest.mark.parametrize(
    "name",
    ["", "/gang", "example.com/", "Example.com/gang", "-gang", "gang-", "a" * 64, ("s" * 254) + "/n", "a/b/c", "sp ace"],
)
def test_invalid_gate_names(name):
    with pytest.raises(ValueError, match="gate name"):
        validate_gate_name(name)


def test_gate_patch_is_none_when_present_and_appends_otherwise():
    assert gate_patch({"spec": {"schedulingGates": [OURS]}}) is None
    assert gate_patch({"spec": {"schedulingGates": [OTHER_GATE]}}) == [
        {"op": "add", "path": "/spec/schedulingGates/-", "value": OURS}
    ]
    assert gate_patch({"spec": {}}, "example.com/g") == [
        {"op": "add", "path": "/spec/schedulingGates", "value": [{"name": "example.com/g"}]}
    ]


# Existing gate lists: unique names (API validation rejects duplicates), drawn from
# arbitrary strings and names close to ours, sometimes including ours.
_gate_names = st.one_of(
    st.just(DEFAULT_GATE_NAME),
    st.sampled_from(["scheduling.x-k8s.io/pod-group-2", "kueue.x-k8s.io/admission", "scheduling.x-k8s.io/Pod-Group"]),
    st.text(min_size=1, max_size=30),
)


@settings(max_examples=300, deadline=None)
@given(
    names=st.lists(_gate_names, unique=True, max_size=8),
    empty_form=st.sampled_from(["absent", "null", "list"]),
    extra=st.dictionaries(st.sampled_from(["x-a", "x-b"]), st.text(max_size=5), max_size=1),
)
def test_property_exactly_one_gate_and_others_unchanged(names, empty_form, extra):
    pod = job_pod()
    pod["spec"].update(extra)
    if names:
        pod["spec"]["schedulingGates"] = [{"name": n} for n in names]
    elif empty_form == "null":
        pod["spec"]["schedulingGates"] = None
    elif empty_form == "list":
        pod["spec"]["schedulingGates"] = []
    original = copy.deepcopy(pod)
    patched = apply_response(pod, admit(review(pod)))
    assert pod == original
    result_names = [g["name"] for g in patched["spec"]["schedulingGates"]]
    assert result_names.count(DEFAULT_GATE_NAME) == 1
    assert [n for n in result_names if n != DEFAULT_GATE_NAME] == [n for n in names if n != DEFAULT_GATE_NAME]
    if DEFAULT_GATE_NAME in names:
        assert result_names == names  # already gated: untouched, same position
    else:
        assert result_names[-1] == DEFAULT_GATE_NAME  # appended
    # Nothing but the gate list differs.
    patched["spec"].pop("schedulingGates")
    original["spec"].pop("schedulingGates", None)
    assert patched == original


# --- members naming a scheduler cogate does not plan for (issue 9 item 7) ----------------


def _review_with_scheduler(scheduler):
    spec = {"containers": [{"name": "c", "image": "x"}]}
    if scheduler is not None:
        spec["schedulerName"] = scheduler
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u1", "operation": "CREATE", "namespace": "ns", "name": "p",
                        "kind": {"group": "", "version": "v1", "kind": "Pod"},
                        "resource": {"group": "", "version": "v1", "resource": "pods"},
                        "object": {"metadata": {"name": "p", "labels": {POD_GROUP_LABEL: "train"}}, "spec": spec}}}


@pytest.mark.parametrize("scheduler,configured,warned", [
    (None, frozenset({"default-scheduler"}), False),
    ("default-scheduler", frozenset({"default-scheduler"}), False),
    ("other-scheduler", frozenset({"default-scheduler"}), True),
    ("other-scheduler", frozenset({"default-scheduler", "other-scheduler"}), False),
    ("", frozenset({"default-scheduler"}), False),  # empty means the default
])
def test_member_naming_an_unplanned_scheduler_is_gated_with_a_warning(scheduler, configured, warned):
    d = evaluate(_review_with_scheduler(scheduler), DEFAULT_GATE_NAME, configured)
    assert d.outcome == "gated" and d.patch  # gated either way: the controller holds the group
    if warned:
        assert d.warnings == ("schedulerName 'other-scheduler' is not one cogate plans for: PodGroup 'train' "
                              "stays gated",)
        assert len(d.warnings[0]) <= 120
    else:
        assert d.warnings == ()


# --- scheduler-name adoption (issue 20 item 1) -----------------------------------------------

ADOPTED = frozenset({"scheduler-plugins-scheduler"})
PLANNED = frozenset({"default-scheduler"})
REWRITE = {"op": "replace", "path": "/spec/schedulerName", "value": "default-scheduler"}


def named(pod: dict[str, Any], scheduler: str) -> dict[str, Any]:
    out = copy.deepcopy(pod)
    out["spec"]["schedulerName"] = scheduler
    return out


SPS = "scheduler-plugins-scheduler"

# (case id, pod, expected outcome, expected pod after the patch, expected warning substring or None)
ADOPTION_CASES = [
    ("gated-and-adopted", named(job_pod(), SPS), Outcome.GATED,
     named(with_gates(job_pod(), [OURS]), "default-scheduler"), f"'{SPS}' -> 'default-scheduler'"),
    ("gated-after-other-gate", named(job_pod(gates=[OTHER_GATE]), SPS), Outcome.GATED,
     named(with_gates(job_pod(), [OTHER_GATE, OURS]), "default-scheduler"), "adopted by cogate"),
    # rule 7: a pod created carrying the gate (or renamed back by a later mutator) is adopted too
    ("already-gated-adopted", named(job_pod(gates=[OURS]), SPS), Outcome.ALREADY_GATED,
     named(job_pod(gates=[OURS]), "default-scheduler"), "adopted by cogate"),
    # rule 7 after our own rewrite (reinvocation): nothing left to do
    ("reinvoked-after-rewrite", named(job_pod(gates=[OURS]), "default-scheduler"), Outcome.ALREADY_GATED,
     None, None),
    ("default-not-touched", job_pod(), Outcome.GATED, with_gates(job_pod(), [OURS]), None),
    # not gated by the webhook, so not rewritten
    ("unlabelled", named(job_pod(group=None), SPS), Outcome.IGNORED, None, None),
    ("empty-label", named(job_pod(group=""), SPS), Outcome.EMPTY_GROUP, None, "empty"),
    ("node-name", named(job_pod(node_name="node-1"), SPS), Outcome.BOUND, None, "nodeName"),
    # another unknown scheduler keeps its name and its warning
    ("other-unplanned", named(job_pod(), "volcano"), Outcome.GATED,
     named(with_gates(job_pod(), [OURS]), "volcano"), "is not one cogate plans for"),
]


@pytest.mark.parametrize("pod, outcome, after, warning", [c[1:] for c in ADOPTION_CASES],
                         ids=[c[0] for c in ADOPTION_CASES])
def test_adoption_table(pod, outcome, after, warning):
    rv = review(pod)
    before = copy.deepcopy(rv)
    decision = evaluate(rv, DEFAULT_GATE_NAME, PLANNED, ADOPTED)
    response = admit(rv, DEFAULT_GATE_NAME, PLANNED, ADOPTED)
    assert rv == before
    assert decision.outcome == outcome
    assert response["response"]["allowed"] is True
    patched = apply_response(pod, response)
    if after is None:
        assert decision.patch is None and patched == pod
    else:
        assert patched == after  # the gate and the scheduler name, nothing else
    assert decision.adopted == (SPS if after is not None and pod["spec"].get("schedulerName") == SPS else "")
    if warning is None:
        assert decision.warnings == ()
    else:
        (text,) = decision.warnings
        assert warning in text and len(text) <= 120


def test_adoption_is_one_patch_with_the_gate_and_the_exact_warning():
    d = evaluate(review(named(job_pod(), SPS)), DEFAULT_GATE_NAME, PLANNED, ADOPTED)
    assert d.patch == [{"op": "add", "path": "/spec/schedulingGates", "value": [OURS]}, REWRITE]
    assert d.warnings == ("schedulerName 'scheduler-plugins-scheduler' -> 'default-scheduler': adopted by cogate",)
    assert d.extra == {"group": "train", "adopted": SPS}


def test_without_adoption_the_name_stays_and_the_unplanned_warning_fires():
    d = evaluate(review(named(job_pod(), SPS)), DEFAULT_GATE_NAME, PLANNED)
    assert REWRITE not in d.patch and d.adopted == ""
    assert d.warnings == (f"schedulerName '{SPS}' is not one cogate plans for: PodGroup 'train' stays gated",)


def test_adoption_warning_is_short_for_any_name():
    d = evaluate(review(named(job_pod(), "s" * 253)), DEFAULT_GATE_NAME, PLANNED, frozenset({"s" * 253}))
    (text,) = d.warnings
    assert len(text) <= 120 and "-> 'default-scheduler'" in text


def test_invalid_label_is_refused_not_adopted():
    d = evaluate(review(named(job_pod(group="Train_Job"), SPS)), DEFAULT_GATE_NAME, PLANNED, ADOPTED)
    assert d.outcome == Outcome.INVALID_GROUP and d.patch is None and d.adopted == ""


def test_scheduler_name_of_the_wrong_type_names_the_field():
    with pytest.raises(InvalidReview, match="request.object.spec.schedulerName"):
        evaluate(review(named(job_pod(), 7)), DEFAULT_GATE_NAME, PLANNED, ADOPTED)


@pytest.mark.parametrize("adopted, planned, message", [
    ({"default-scheduler"}, PLANNED, "the scheduler adopted pods are rewritten to"),
    ({SPS}, frozenset({"default-scheduler", SPS}), "is also a --scheduler-name"),
    ({""}, PLANNED, "non-empty"),
])
def test_validate_adoption_refuses_contradictions(adopted, planned, message):
    with pytest.raises(ValueError, match=message):
        validate_adoption(adopted, planned)


def test_validate_adoption_returns_the_set():
    assert validate_adoption([SPS, SPS, "volcano"], frozenset({"default-scheduler", "gpu"})) == {SPS, "volcano"}
    assert validate_adoption(()) == frozenset()


_schedulers = st.one_of(st.none(), st.sampled_from([SPS, "volcano", "default-scheduler", "gpu", ""]),
                        st.text(min_size=1, max_size=20))


@settings(max_examples=300, deadline=None)
@given(
    scheduler=_schedulers,
    adopted=st.frozensets(st.one_of(st.sampled_from([SPS, "volcano"]), st.text(min_size=1, max_size=20))
                          .filter(lambda n: n not in ("default-scheduler", "gpu")), max_size=3),
    names=st.lists(_gate_names, unique=True, max_size=4),
    group=st.sampled_from(["train", "train", "", None]),
    node_name=st.sampled_from([None, None, "node-1"]),
)
def test_property_adopted_pod_is_gated_once_names_no_adopted_scheduler_and_is_idempotent(
        scheduler, adopted, names, group, node_name):
    """For any pod the webhook gates: after the patch its schedulerName is not adopted, it
    carries the gate exactly once, and a reinvocation on the patched pod patches nothing and
    warns of no rewrite. Any pod it does not gate (no label, empty label, nodeName) is untouched."""
    planned = frozenset({"default-scheduler", "gpu"})
    validate_adoption(adopted, planned)
    pod = job_pod(group=group, node_name=node_name)
    pod["spec"]["schedulingGates"] = [{"name": n} for n in names]
    if scheduler is None:
        del pod["spec"]["schedulerName"]
    else:
        pod["spec"]["schedulerName"] = scheduler
    patched = apply_response(pod, admit(review(pod), DEFAULT_GATE_NAME, planned, adopted))
    if not group or node_name:
        assert patched == pod
        return
    assert (patched["spec"].get("schedulerName") or "default-scheduler") not in adopted
    assert [g["name"] for g in patched["spec"]["schedulingGates"]].count(DEFAULT_GATE_NAME) == 1
    if (scheduler or "default-scheduler") in adopted:
        assert patched["spec"]["schedulerName"] == "default-scheduler"
    else:
        assert patched["spec"].get("schedulerName") == pod["spec"].get("schedulerName")
    again = evaluate(review(patched), DEFAULT_GATE_NAME, planned, adopted)
    assert again.outcome == Outcome.ALREADY_GATED and again.patch is None and again.adopted == ""
    assert not any("adopted by cogate" in w for w in again.warnings)
    # nothing but the gate list and the scheduler name differs
    for p in (patched, pod):
        p["spec"].pop("schedulingGates", None)
        p["spec"].pop("schedulerName", None)
    assert patched == pod


# --- Kubernetes' own gang scheduling (issue 18 item 3) -----------------------------------------

#: What each native field looks like on a pod: 1.36+ ``schedulingGroup`` (a scheduling.k8s.io
#: PodGroup), the 1.35 alpha ``workloadRef`` (a Workload and its pod group).
NATIVE_VALUES = {"schedulingGroup": {"podGroupName": "train-pg"},
                 "workloadRef": {"name": "train", "podGroup": "workers"}}


def native_pod(group: str | None, fields: tuple[str, ...], gates: Any = "absent",
               scheduler: str | None = None) -> dict[str, Any]:
    pod = job_pod(group, gates=gates)
    for f in fields:
        pod["spec"][f] = copy.deepcopy(NATIVE_VALUES[f])
    if scheduler is not None:
        pod["spec"]["schedulerName"] = scheduler
    return pod


def _without_native(pod: dict[str, Any]) -> dict[str, Any]:
    plain = copy.deepcopy(pod)
    for f in NATIVE_VALUES:
        plain["spec"].pop(f, None)
    return plain


@pytest.mark.parametrize("label", ["train", "", "Train_Job.v1", None])
@pytest.mark.parametrize("fields", [(), ("schedulingGroup",), ("workloadRef",), ("schedulingGroup", "workloadRef")])
@pytest.mark.parametrize("gates", ["absent", [OURS], [OTHER_GATE, OURS], [OTHER_GATE]])
@pytest.mark.parametrize("scheduler", [None, SPS, "other-scheduler"])
@pytest.mark.parametrize("node", [None, "node-1"])
def test_native_rule_over_every_combination(label, fields, gates, scheduler, node):
    """A native field changes nothing but one more warning on a pod that leaves admission gated:
    the webhook cannot know whether the API server keeps the field (GenericWorkload off drops it)."""
    pod = native_pod(label, fields, gates, scheduler)
    if node is not None:
        pod["spec"]["nodeName"] = node
    rv = review(pod)
    before = copy.deepcopy(rv)
    d = evaluate(rv, adopted=ADOPTED)
    response = admit(rv, adopted=ADOPTED)["response"]
    assert rv == before
    plain = evaluate(review(_without_native(pod)), adopted=ADOPTED)
    assert (d.outcome, d.patch, d.refusal, d.adopted) == (plain.outcome, plain.patch, plain.refusal, plain.adopted)
    assert response["allowed"] is (d.outcome != Outcome.INVALID_GROUP)
    gated = d.outcome in (Outcome.GATED, Outcome.ALREADY_GATED)
    assert gated == (label == "train" and node is None)
    if not (fields and gated):  # no native field, or a pod the rules leave ungated: exactly the plain decision
        assert (d.warnings, d.extra) == (plain.warnings, plain.extra)
        return
    assert d.warnings == (*plain.warnings, native_warning(f"spec.{fields[0]}"))
    assert d.extra == plain.extra | {"native": f"spec.{fields[0]}"}
    after = apply_response(pod, admit(rv, adopted=ADOPTED))
    assert after["spec"]["schedulingGates"].count(OURS) == 1  # gated like any member
    assert after["spec"]["schedulerName"] == ("default-scheduler" if scheduler in (None, SPS) else scheduler)
    assert {f: after["spec"][f] for f in fields} == {f: NATIVE_VALUES[f] for f in fields}  # the field is kept


@pytest.mark.parametrize("value", [None])
def test_a_null_native_field_is_no_native_field(value):
    pod = job_pod()
    pod["spec"]["schedulingGroup"] = value
    pod["spec"]["workloadRef"] = value
    d = evaluate(review(pod))
    assert (d.outcome, d.warnings, d.extra) == (Outcome.GATED, (), {"group": "train"})


def test_native_warning_exact_and_short():
    assert native_warning("spec.schedulingGroup") == (
        "spec.schedulingGroup set: if Kubernetes gang scheduling is on, it places the pod and cogate removes its gate")
    assert max(len(native_warning(f"spec.{f}")) for f in NATIVE_VALUES) <= 120


@settings(max_examples=200, deadline=None)
@given(names=st.lists(_gate_names, unique=True, max_size=6), field=st.sampled_from(sorted(NATIVE_VALUES)),
       gate=st.sampled_from([DEFAULT_GATE_NAME, "example.com/gang"]))
def test_property_native_pods_leave_admission_gated_like_any_member(names, field, gate):
    pod = native_pod("train", (field,))
    if names:
        pod["spec"]["schedulingGates"] = [{"name": n} for n in names]
    after = apply_response(pod, admit(review(pod), gate_name=gate))
    plain = apply_response(_without_native(pod), admit(review(_without_native(pod)), gate_name=gate))
    result = [g["name"] for g in after["spec"]["schedulingGates"]]
    assert result == [g["name"] for g in plain["spec"]["schedulingGates"]]
    assert result.count(gate) == 1 and [n for n in result if n != gate] == [n for n in names if n != gate]
    assert after["spec"][field] == NATIVE_VALUES[field]
