"""The MutatingWebhookConfiguration cogate registers, as a plain dict.

One place for the registration rules of docs/semantics.md (the chart template
``charts/cogate/templates/webhook.yaml`` renders the same rules and
``tests/unit/test_chart.py`` checks they agree):

- only pod CREATE (``rules``), only pods carrying the pod-group label
  (``objectSelector``: key exists), never in ``kube-system`` or cogate's own
  namespace (``namespaceSelector`` on ``kubernetes.io/metadata.name``);
- ``failurePolicy: Fail`` — a labelled pod must never skip the gate;
- ``sideEffects: None`` (the webhook makes no API calls), ``timeoutSeconds: 5``;
- ``reinvocationPolicy: IfNeeded`` on every entry: when a later mutating webhook or a
  MutatingAdmissionPolicy changes the pod (removes the gate, rewrites the label), the API
  server calls the entry again on the final object (at most once more per request);
- a second entry, :data:`LATE_WEBHOOK_NAME` (``late_labels``, on by default), for pods whose
  pod-group label another mutator adds *after* cogate's webhook ran. It has no label
  ``objectSelector`` on purpose: the API server evaluates ``objectSelector`` and
  ``matchConditions`` against the object as it is when it calls the webhook, and during
  reinvocation it never calls a webhook for the first time (k8s.io/apiserver
  ``pkg/admission/plugin/webhook/mutating/dispatcher.go`` ``Dispatch``: "if the webhook is
  skipped in the first round because of mismatching labels, even if the labels become
  matching, the webhook does not get called during reinvocation"; MutatingAdmissionPolicies
  follow the same rule). So it is called for every pod CREATE in the covered namespaces
  (the webhook allows unlabelled pods unchanged), and reinvoked once another mutator changed
  the pod. Its ``failurePolicy`` is ``late_labels`` (default ``Ignore``: while the webhook is
  down, pods without the label at creation are not held up cluster-wide; a pod labelled late
  in that window is reported by the controller, reason ``UngatedWithoutRelease``). The first
  entry keeps ``failurePolicy: Fail`` for pods labelled at creation. Its ``matchConditions``
  (:func:`not_gated_expression`) skip a pod that already carries cogate's gate, which the first
  entry gave every pod labelled at creation (entries of one configuration are called in order,
  each on the object as the earlier ones left it), so such a pod costs one webhook call, not two.
  ``matchConditions`` is GA in Kubernetes 1.30 (beta and on by default from 1.28), the oldest
  release the chart (``kubeVersion: >=1.30.0-0``) and the local cluster (v1.30.14) support. No
  match condition can spare the late entry an unlabelled pod: the API server evaluates the
  conditions before it records the webhook as called, and reinvokes only recorded webhooks
  (``dispatcher.go`` ``Dispatch``, k8s.io/apiserver v0.37.2); the first entry's ``objectSelector``
  already keeps unlabelled pods from it (what each costs: docs/benchmarks.md, admission_rate).
- the first entry's ``matchConditions`` (:func:`needs_admission_expression`, issue 40) skip a
  **pre-gated** member: a pod created already carrying cogate's gate (its workload's pod template
  has it) whose label names a PodGroup, that asks for the default scheduler and sets no field of
  Kubernetes' own gang scheduling. The webhook would allow such a pod unchanged, with no warning
  (:mod:`cogate.webhook.admission` rule 7), so the API server spares the call: creating it costs
  what creating an unlabelled pod costs. Every other labelled pod is still sent (to be gated,
  refused, warned about, or have its scheduler name adopted). As for any match condition, a
  webhook skipped at the first call is not called on reinvocation: a later mutator that removes
  the gate again leaves the pod ungated (the controller reports it, reason
  ``UngatedWithoutRelease``).
"""

from __future__ import annotations

from typing import Any

from cogate.api import DEFAULT_GATE_NAME, DEFAULT_SCHEDULER_NAME, POD_GROUP_LABEL
from cogate.webhook import policies

WEBHOOK_NAME = "pod-group-gate.scheduling.x-k8s.io"
#: The entry for labels added after cogate's webhook ran (no label objectSelector; module doc).
LATE_WEBHOOK_NAME = "late-pod-group-gate.scheduling.x-k8s.io"
CONFIGURATION_NAME = "cogate"
#: ``failurePolicy`` values (admissionregistration.k8s.io/v1).
FAILURE_POLICIES = ("Fail", "Ignore")
#: Name of the late entry's match condition (:func:`not_gated_expression`).
NOT_GATED_CONDITION = "not-gated-yet"
#: Name of the first entry's match condition (:func:`needs_admission_expression`).
NEEDS_ADMISSION_CONDITION = "not-pre-gated"


def not_gated_expression(gate_name: str = DEFAULT_GATE_NAME) -> str:
    """CEL (``matchConditions[].expression``): the pod does not carry the scheduling gate
    ``gate_name`` (a qualified name: no quote can occur in it)."""
    return (f"!has(object.spec.schedulingGates) || "
            f"!object.spec.schedulingGates.exists(g, g.name == '{gate_name}')")


def needs_admission_expression(gate_name: str = DEFAULT_GATE_NAME) -> str:
    """CEL (``matchConditions[].expression`` of the first entry, :data:`NEEDS_ADMISSION_CONDITION`): the
    labelled pod needs the webhook, i.e. it is not pre-gated (module doc): it lacks the gate ``gate_name``,
    or its label cannot name a PodGroup (refused or warned about: :mod:`cogate.webhook.admission` rules 4
    and 5), or it sets ``spec.nodeName`` (warned about, rule 6), or it names a scheduler other than ``default-scheduler`` (adopted or warned about), or it sets
    ``spec.schedulingGroup`` / ``spec.workloadRef`` (warned about). ``object`` is dynamically typed in a
    webhook's match conditions (k8s.io/apiserver ``pkg/admission/plugin/cel/compile.go``), so ``has()``
    of a field a release does not know is false, not an error."""
    gated = policies.gated_expression(gate_name)
    scheduler = f"has(object.spec.schedulerName) && object.spec.schedulerName != '{DEFAULT_SCHEDULER_NAME}'"
    return (f"!({gated}) || !{policies.inline('variables.nameable')} || {policies.inline('variables.bound')} || "
            f"({scheduler}) || has(object.spec.schedulingGroup) || has(object.spec.workloadRef)")


def webhook_configuration(
    client_config: dict[str, Any],
    *,
    name: str = CONFIGURATION_NAME,
    excluded_namespaces: tuple[str, ...] = ("kube-system",),
    timeout_seconds: int = 5,
    late_labels: str | None = "Ignore",
    gate_name: str = DEFAULT_GATE_NAME,
) -> dict[str, Any]:
    """Build the ``admissionregistration.k8s.io/v1`` MutatingWebhookConfiguration.

    ``client_config`` is the webhook's ``clientConfig``: ``{"url": ..., "caBundle": b64}``
    for a webhook outside the cluster, or ``{"service": {...}, "caBundle": b64}``.
    ``timeout_seconds`` must be 1..30 (API validation); raises ``ValueError`` otherwise.
    ``late_labels``: the ``failurePolicy`` (``"Fail"`` or ``"Ignore"``) of the second entry
    :data:`LATE_WEBHOOK_NAME`, which gates pods labelled by a later mutator; ``None`` leaves
    it out (then such pods are never gated; the controller reports them). Raises
    ``ValueError`` for another value. ``gate_name``: the gate (``--gate-name``) the entries' match
    conditions look for.
    """
    if not 1 <= timeout_seconds <= 30:
        raise ValueError(f"timeoutSeconds must be between 1 and 30, got {timeout_seconds}")
    if late_labels is not None and late_labels not in FAILURE_POLICIES:
        raise ValueError(f"late_labels must be one of {FAILURE_POLICIES} or None, got {late_labels!r}")
    config = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "cogate"}},
        "webhooks": [
            {
                "name": WEBHOOK_NAME,
                "admissionReviewVersions": ["v1"],
                "clientConfig": client_config,
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["pods"],
                        "scope": "Namespaced",
                    }
                ],
                "objectSelector": {"matchExpressions": [{"key": POD_GROUP_LABEL, "operator": "Exists"}]},
                "namespaceSelector": {
                    "matchExpressions": [
                        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": list(excluded_namespaces)}
                    ]
                },
                "failurePolicy": "Fail",
                "matchPolicy": "Equivalent",
                "sideEffects": "None",
                "timeoutSeconds": timeout_seconds,
                "reinvocationPolicy": "IfNeeded",
                "matchConditions": [{"name": NEEDS_ADMISSION_CONDITION,
                                     "expression": needs_admission_expression(gate_name)}],
            }
        ],
    }
    if late_labels is not None:
        late = dict(config["webhooks"][0], name=LATE_WEBHOOK_NAME, failurePolicy=late_labels)
        del late["objectSelector"]  # every pod: see the module doc
        late["matchConditions"] = [{"name": NOT_GATED_CONDITION, "expression": not_gated_expression(gate_name)}]
        config["webhooks"].append(late)
    return config
