"""webhook/config.py: the registration rules of docs/semantics.md (Admission), in particular the
entries that make admission see the final labels (reinvocation, the late-label entry)."""

from __future__ import annotations

import pytest

from cogate.api import POD_GROUP_LABEL
from cogate.webhook import config
from cogate.webhook.admission import Outcome, evaluate

CLIENT = {"url": "https://127.0.0.1:9443/mutate", "caBundle": "eA=="}


def hooks(**kw):
    return {h["name"]: h for h in config.webhook_configuration(CLIENT, **kw)["webhooks"]}


def test_every_entry_is_reinvoked_when_a_later_mutator_changes_the_pod():
    for hook in hooks().values():
        assert hook["reinvocationPolicy"] == "IfNeeded", hook["name"]


@pytest.mark.parametrize("late,names", [
    ("Ignore", [config.WEBHOOK_NAME, config.LATE_WEBHOOK_NAME]),
    ("Fail", [config.WEBHOOK_NAME, config.LATE_WEBHOOK_NAME]),
    (None, [config.WEBHOOK_NAME]),
])
def test_late_label_entry_has_no_label_selector_and_its_own_failure_policy(late, names):
    got = hooks(late_labels=late)
    assert list(got) == names
    first = got[config.WEBHOOK_NAME]
    assert first["objectSelector"] == {"matchExpressions": [{"key": POD_GROUP_LABEL, "operator": "Exists"}]}
    assert first["failurePolicy"] == "Fail"  # labelled at creation: never skips the gate
    if late is None:
        return
    second = got[config.LATE_WEBHOOK_NAME]
    # The API server skips a webhook whose objectSelector (or matchConditions) does not match the
    # pod as it is then, and never calls it for the first time on reinvocation: nothing selects on
    # the label; the one match condition skips only pods already carrying cogate's gate.
    assert "objectSelector" not in second
    assert second["matchConditions"] == [{"name": config.NOT_GATED_CONDITION,
                                          "expression": config.not_gated_expression()}]
    assert "labels" not in second["matchConditions"][0]["expression"]
    assert second["failurePolicy"] == late
    for key in ("rules", "namespaceSelector", "clientConfig", "sideEffects", "timeoutSeconds", "matchPolicy",
                "admissionReviewVersions"):
        assert second[key] == first[key], key


@pytest.mark.parametrize("excluded", [("kube-system",), ("kube-system", "cogate-system", "monitoring")])
def test_late_label_entry_skips_the_same_namespaces(excluded):
    got = hooks(excluded_namespaces=excluded)
    for hook in got.values():
        (expr,) = hook["namespaceSelector"]["matchExpressions"]
        assert expr == {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": list(excluded)}


@pytest.mark.parametrize("bad", ["ignore", "", "Never", 1])
def test_late_labels_refuses_other_failure_policies(bad):
    with pytest.raises(ValueError, match="late_labels"):
        config.webhook_configuration(CLIENT, late_labels=bad)


def _review(labels, gates=None, uid="u1"):
    spec = {"containers": [{"name": "c", "image": "x"}]}
    if gates is not None:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": uid, "operation": "CREATE", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                        "namespace": "ns", "object": {"metadata": {"name": "p", "labels": labels}, "spec": spec}}}


@pytest.mark.parametrize("labels,gates,outcome,patched", [
    # first call (the late entry sees every pod): no label yet -> unchanged
    ({"app": "x"}, None, Outcome.IGNORED, False),
    ({}, [], Outcome.IGNORED, False),
    # reinvocation after another mutator added the label -> gated now
    ({POD_GROUP_LABEL: "g"}, None, Outcome.GATED, True),
    ({POD_GROUP_LABEL: "g", "app": "x"}, ["example.com/other"], Outcome.GATED, True),
    # both entries call for a pod labelled at creation: the second call adds nothing
    ({POD_GROUP_LABEL: "g"}, ["scheduling.x-k8s.io/pod-group"], Outcome.ALREADY_GATED, False),
])
def test_the_decision_is_safe_to_call_for_every_pod_and_again(labels, gates, outcome, patched):
    got = evaluate(_review(labels, gates))
    assert got.outcome is outcome
    assert (got.patch is not None) is patched


@pytest.mark.parametrize("gate", ["scheduling.x-k8s.io/pod-group", "example.com/gang", "gang"])
def test_late_entry_skips_pods_carrying_the_configured_gate(gate):
    """The late entry's match condition names the gate the webhook adds (``--gate-name``), so a pod
    the first entry gated costs no second call, whatever the gate is called."""
    late = hooks(gate_name=gate)[config.LATE_WEBHOOK_NAME]
    expression = late["matchConditions"][0]["expression"]
    assert expression == config.not_gated_expression(gate)
    assert f"g.name == '{gate}'" in expression and expression.startswith("!has(object.spec.schedulingGates) || ")


# -- the first entry's match condition: a pre-gated member skips the webhook (issue 40) ----------------

ADOPTED = frozenset({"scheduler-plugins-scheduler"})
PLANNED = frozenset({"default-scheduler", "batch-scheduler"})
LABELS = ["g", "a.b", "x" * 63, "", "Bad_x", "-a", "x" * 64]
GATE_SETS = [None, [], ["scheduling.x-k8s.io/pod-group"], ["example.com/other"],
             ["example.com/other", "scheduling.x-k8s.io/pod-group"]]
SCHEDULERS = [None, "default-scheduler", "batch-scheduler", "scheduler-plugins-scheduler", "volcano"]
EXTRAS = [{}, {"nodeName": "n1"}, {"schedulingGroup": {"podGroupName": "w"}}, {"workloadRef": {"name": "w"}}]


def _pod(label, gates, scheduler, extra):
    spec = {"containers": [{"name": "c", "image": "x"}], **extra}
    if gates is not None:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    if scheduler is not None:
        spec["schedulerName"] = scheduler
    return {"metadata": {"name": "p", "labels": {POD_GROUP_LABEL: label, "app": "x"}}, "spec": spec}


def _needs(expression):
    import celpy
    env = celpy.Environment()
    program = env.program(env.compile(expression))
    return lambda pod: bool(program.evaluate({"object": celpy.json_to_cel(pod)}))


@pytest.mark.parametrize("gate", ["scheduling.x-k8s.io/pod-group", "example.com/gang"])
def test_the_first_entry_skips_exactly_pods_the_webhook_would_leave_alone(gate):
    """Every combination of label value, gates, scheduler name, ``nodeName`` and native gang field
    (700 pods), evaluated as kube-apiserver evaluates the match condition (CEL) and as the webhook
    decides: a pod the condition skips is one the webhook would allow unchanged, with no warning and
    no refusal; and a member pre-gated by its template (the gate, a nameable label, the default
    scheduler, nothing else) is always skipped."""
    (first,) = [h for h in hooks(gate_name=gate, late_labels=None).values()]
    assert first["matchConditions"] == [{"name": config.NEEDS_ADMISSION_CONDITION,
                                         "expression": config.needs_admission_expression(gate)}]
    needs = _needs(first["matchConditions"][0]["expression"])
    skipped = 0
    for label in LABELS:
        for gates in GATE_SETS:
            for scheduler in SCHEDULERS:
                for extra in EXTRAS:
                    pod = _pod(label, [gate if g == "scheduling.x-k8s.io/pod-group" else g for g in gates]
                               if gates is not None else None, scheduler, extra)
                    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                              "request": {"uid": "u", "operation": "CREATE", "namespace": "ns", "object": pod,
                                          "kind": {"group": "", "version": "v1", "kind": "Pod"},
                                          "resource": {"group": "", "version": "v1", "resource": "pods"}}}
                    got = evaluate(review, gate, PLANNED, ADOPTED)
                    acts = bool(got.patch) or bool(got.warnings) or bool(got.refusal)
                    carried = [g["name"] for g in pod["spec"].get("schedulingGates", [])]
                    pre_gated = (gate in carried
                                 and label in ("g", "a.b", "x" * 63) and scheduler in (None, "default-scheduler")
                                 and not extra)
                    if not needs(pod):
                        skipped += 1
                        assert not acts, (pod, got)
                    assert needs(pod) is not pre_gated, pod
    assert skipped == 3 * 2 * 2  # labels x gate lists holding the gate x (unset, default-scheduler)
