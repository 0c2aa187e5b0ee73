"""The admission decision of :mod:`cogate.webhook.admission` as admission policies kube-apiserver
evaluates itself (CEL, in-process: no webhook call on pod creation), as plain dicts.

Kubernetes 1.36 serves ``admissionregistration.k8s.io/v1`` MutatingAdmissionPolicy (KEP-3962, GA
and on by default from 1.36); ValidatingAdmissionPolicy is GA from 1.30. Chart
``admission.mode: policy`` (or ``auto`` on such a cluster) installs these objects instead of the
MutatingWebhookConfiguration; the chart template ``charts/cogate/templates/admission-policies.yaml``
renders the same objects (``tests/unit/test_chart_policies.py`` checks they agree) and
``tests/e2e/test_admission_policies.py`` runs one table of pods through :func:`admission.evaluate
<cogate.webhook.admission.evaluate>` and through a real kube-apiserver with these policies: the
rules stay written once, in ``admission.py``; this module is their translation, tested against it.

The rules of ``admission.py`` and where each lives here:

- rule 2 (pod CREATE only) and the excluded namespaces: every policy's ``matchConstraints``;
- rules 3-6 (no label, empty label, unnameable label, ``spec.nodeName``): the variable
  ``gateable`` (:data:`VARIABLES`); the gate policy (:func:`gate_policy`) matches only gateable
  pods (``matchConditions``), so every other pod costs kube-apiserver no mutation;
- rules 7-8 (add the gate unless present) and scheduler-name adoption: the one JSON Patch
  expression :func:`mutation_expression`;
- rule 5's refusal: ValidatingAdmissionPolicy ``<name>-refuse``, bound with
  ``validationActions: [Deny]``, message as the webhook's, reason ``Invalid`` (HTTP 422);
- the warnings (empty label, ``spec.nodeName``, a scheduler cogate does not plan for, a native
  gang field): ValidatingAdmissionPolicy ``<name>-warn``, bound with ``[Warn]``; kube-apiserver
  prefixes each with "Validation failed for ValidatingAdmissionPolicy '<name>-warn' with binding
  '<name>-warn': ".

Where the policies differ from the webhook, and why (docs/semantics.md, "Admission"):

- validating policies see the pod as it will be stored (after every mutation and after the API
  server dropped fields of disabled features), so there is **no adoption warning** (the old
  scheduler name is gone by then: ``spec.schedulerName`` is rewritten silently) and the native
  warning is given only when ``spec.schedulingGroup`` survives (GenericWorkload on), saying that
  Kubernetes places the pod;
- no ``cogate_webhook_*`` metrics: kube-apiserver's own ``apiserver_cel_*`` and
  ``apiserver_admission_*`` series count the policies.

**Labels added later** (another mutating webhook or policy): the API server evaluates
``matchConstraints`` and ``matchConditions`` before it records a policy as invoked, and on
reinvocation runs only recorded policies (k8s.io/apiserver
``pkg/admission/plugin/policy/mutating/dispatcher.go`` ``dispatchInvocations``, v0.37.2), the rule
webhooks follow. So, as with the webhook, a second policy (:func:`late_policy`, opt-in) matches
every pod not yet carrying the gate, with ``reinvocationPolicy: IfNeeded``, and gates the pod once a
later mutator labelled it. It is not free: each invocation re-encodes the pod
(``pkg/admission/plugin/policy/mutating/patch/json_patch.go``) even for an empty patch.

JSON Patch rather than ApplyConfiguration: an apply configuration goes through structured merge
(a typed conversion of the whole pod) on every call; a JSON Patch is one encode, patch, decode.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from cogate.api import DEFAULT_GATE_NAME, DEFAULT_SCHEDULER_NAME, POD_GROUP_LABEL, POD_GROUP_NAME_MAX_LENGTH

__all__ = ["API_VERSION", "DNS1123_SUBDOMAIN_CEL", "FAILURE_POLICIES", "VARIABLES", "admission_policies",
           "gate_policy", "gated_expression", "inline", "late_policy", "mutation_expression", "names",
           "refusal_policy", "warning_policy"]

API_VERSION = "admissionregistration.k8s.io/v1"
#: ``failurePolicy`` values.
FAILURE_POLICIES = ("Fail", "Ignore")
#: The DNS-1123 subdomain of :func:`cogate.api.pod_group_name_error` as an RE2 pattern for CEL's
#: ``matches`` (a CEL string literal in single quotes: each backslash doubled).
DNS1123_SUBDOMAIN_CEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"

_LABELS = "object.metadata.labels"
#: The CEL variables every policy shares (``variables.<name>``), in order (later ones read earlier ones).
VARIABLES: tuple[tuple[str, str], ...] = (
    ("labelled", f"has({_LABELS}) && '{POD_GROUP_LABEL}' in {_LABELS}"),
    ("group", f"variables.labelled ? {_LABELS}['{POD_GROUP_LABEL}'] : ''"),
    ("nameable", f"size(variables.group) <= {POD_GROUP_NAME_MAX_LENGTH} && "
                 f"variables.group.matches('{DNS1123_SUBDOMAIN_CEL}')"),
    ("bound", "has(object.spec.nodeName) && object.spec.nodeName != ''"),
    ("gateable", "variables.labelled && variables.nameable && !variables.bound"),
)


def inline(expression: str) -> str:
    """``expression`` with every ``variables.<name>`` of :data:`VARIABLES` replaced by its expression (in
    parentheses): ``matchConditions`` cannot read ``variables``."""
    for name, value in reversed(VARIABLES):
        expression = expression.replace(f"variables.{name}", f"({value})")
    return expression


def gated_expression(gate_name: str) -> str:
    """CEL: the pod carries gate ``gate_name`` (a qualified name: no quote can occur in it)."""
    return f"has(object.spec.schedulingGates) && object.spec.schedulingGates.exists(g, g.name == '{gate_name}')"


def _cel_list(values: Iterable[str]) -> str:
    """A CEL list of string literals (scheduler names are DNS subdomains: no quote in them)."""
    return "[" + ", ".join(f"'{v}'" for v in sorted(values)) + "]"


def names(name: str = "cogate") -> dict[str, str]:
    """The object names the policies of release ``name`` use: ``gate``, ``late``, ``refuse``, ``warn``
    (each policy's binding has the policy's name)."""
    return {"gate": f"{name}-gate", "late": f"{name}-late-labels", "refuse": f"{name}-refuse", "warn": f"{name}-warn"}


def mutation_expression(gate_name: str = DEFAULT_GATE_NAME, adopted: Iterable[str] = ()) -> str:
    """CEL returning the JSON Patch (a list of ``JSONPatch``) of rules 7-8 and adoption: nothing for a
    pod that is not gateable; the gate appended (or the list created) unless present; ``replace
    /spec/schedulerName`` with ``default-scheduler`` when the pod names an ``adopted`` scheduler."""
    gate = f"Object.spec.schedulingGates{{name: '{gate_name}'}}"
    append = f"JSONPatch{{op: 'add', path: '/spec/schedulingGates/-', value: {gate}}}"
    # The list is created empty, then appended to: a list of objects as a JSONPatch value makes
    # kube-apiserver 1.36.3 panic (cel-go baseList.ConvertToNative: *structpb.Struct is not assignable
    # to *structpb.Value) and the request fails.
    add = (f"(({gated_expression(gate_name)}) ? [] : has(object.spec.schedulingGates) ? [{append}] : "
           f"[JSONPatch{{op: 'add', path: '/spec/schedulingGates', value: []}}, {append}])")
    adopted = sorted(adopted)
    if adopted:
        add += (f" + (object.spec.schedulerName in {_cel_list(adopted)} ? [JSONPatch{{op: 'replace', "
                f"path: '/spec/schedulerName', value: '{DEFAULT_SCHEDULER_NAME}'}}] : [])")
    return f"!variables.gateable ? [] : {add}"


def _constraints(excluded_namespaces: Sequence[str], labelled: bool,
                 extra_namespace_terms: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {
        "resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                           "resources": ["pods"], "scope": "Namespaced"}],
        "namespaceSelector": {"matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": list(excluded_namespaces)},
            *extra_namespace_terms]},
        "matchPolicy": "Equivalent",
    }
    if labelled:
        out["objectSelector"] = {"matchExpressions": [{"key": POD_GROUP_LABEL, "operator": "Exists"}]}
    return out


def _variables() -> list[dict[str, str]]:
    return [{"name": n, "expression": e} for n, e in VARIABLES]


def _pair(kind: str, name: str, spec: dict[str, Any], binding: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The policy ``kind`` named ``name`` and its binding (same name)."""
    labels = {"app.kubernetes.io/name": "cogate"}
    return [{"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": name, "labels": labels}, "spec": spec},
            {"apiVersion": API_VERSION, "kind": f"{kind}Binding", "metadata": {"name": name, "labels": labels},
             "spec": {"policyName": name, **(binding or {})}}]


def gate_policy(name: str, gate_name: str, adopted: Iterable[str], excluded_namespaces: Sequence[str]) -> list[dict[str, Any]]:
    """The MutatingAdmissionPolicy (and binding) gating pods labelled at creation: only labelled pods
    (``objectSelector``) that are gateable (``matchConditions``), ``failurePolicy: Fail`` (a labelled
    pod never skips the gate), ``reinvocationPolicy: IfNeeded`` (a later mutator that removes the gate
    or gives an adopted name back is undone)."""
    return _pair("MutatingAdmissionPolicy", name, {
        "matchConstraints": _constraints(excluded_namespaces, labelled=True),
        "variables": _variables(),
        "matchConditions": [{"name": "gateable", "expression": inline("variables.gateable")}],
        "failurePolicy": "Fail",
        "reinvocationPolicy": "IfNeeded",
        "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": mutation_expression(gate_name, adopted)}}],
    })


def late_policy(name: str, gate_name: str, adopted: Iterable[str], excluded_namespaces: Sequence[str],
                failure_policy: str, namespace_terms: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """The MutatingAdmissionPolicy (and binding) for labels added by a later mutator (module doc): every
    pod not carrying the gate yet, whatever its labels; ``failure_policy`` as the webhook's late entry's;
    ``namespace_terms``: extra ``namespaceSelector`` terms narrowing it."""
    return _pair("MutatingAdmissionPolicy", name, {
        "matchConstraints": _constraints(excluded_namespaces, labelled=False, extra_namespace_terms=namespace_terms),
        "variables": _variables(),
        "matchConditions": [{"name": "not-gated-yet", "expression": f"!({gated_expression(gate_name)})"}],
        "failurePolicy": failure_policy,
        "reinvocationPolicy": "IfNeeded",
        "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": mutation_expression(gate_name, adopted)}}],
    })


def refusal_policy(name: str, excluded_namespaces: Sequence[str]) -> list[dict[str, Any]]:
    """The ValidatingAdmissionPolicy (and ``Deny`` binding) refusing a label value that cannot name a
    PodGroup (rule 5), with the webhook's message. A stored label value is a valid label value (at most
    63 characters), so the reason is always the DNS-1123 one."""
    group = "variables.group"
    message = (f"'label {POD_GROUP_LABEL}=\\'' + {group} + '\\' cannot name a PodGroup (a PodGroup name is a "
               "DNS-1123 subdomain: lower-case letters, digits, \\'-\\' and \\'.\\', each \\'.\\'-separated part "
               "starting and ending with a letter or digit); fix the label value to the name of a PodGroup in "
               "this namespace'")
    return _pair("ValidatingAdmissionPolicy", name, {
        "matchConstraints": _constraints(excluded_namespaces, labelled=True),
        "variables": _variables(),
        "failurePolicy": "Fail",
        "validations": [{"expression": f"{group} == '' || variables.nameable", "messageExpression": message,
                         "reason": "Invalid"}],
    }, {"validationActions": ["Deny"]})


def warning_policy(name: str, gate_name: str, scheduler_names: Iterable[str],
                   excluded_namespaces: Sequence[str]) -> list[dict[str, Any]]:
    """The ValidatingAdmissionPolicy (and ``Warn`` binding) giving the webhook's warnings on the pod as
    stored (module doc). ``failurePolicy: Ignore``: a warning is never worth refusing a pod."""
    kept = f"variables.gateable && {gated_expression(gate_name)}"
    cut = "(size({0}) > 40 ? {0}.substring(0, 40) : {0})"
    planned = _cel_list({DEFAULT_SCHEDULER_NAME, *scheduler_names})
    return _pair("ValidatingAdmissionPolicy", name, {
        "matchConstraints": _constraints(excluded_namespaces, labelled=True),
        "variables": _variables(),
        "failurePolicy": "Ignore",
        "validations": [
            {"expression": "variables.group != ''",
             "message": f"label {POD_GROUP_LABEL} is empty: it names no PodGroup; pod not gang-gated"},
            {"expression": "!(variables.nameable && variables.bound)",
             "messageExpression": "'pod sets spec.nodeName: it cannot be gang-gated (PodGroup \\'' + variables.group "
                                  "+ '\\')'"},
            {"expression": f"!({kept}) || object.spec.schedulerName in {planned}",
             "messageExpression": (f"'schedulerName \\'' + {cut.format('object.spec.schedulerName')} + '\\' is not "
                                   f"one cogate plans for: PodGroup \\'' + {cut.format('variables.group')} + "
                                   "'\\' stays gated'")},
            {"expression": f"!({kept}) || !has(object.spec.schedulingGroup)",
             "message": "spec.schedulingGroup kept: Kubernetes gang scheduling places the pod; cogate removes its gate"},
        ],
    }, {"validationActions": ["Warn"]})


def admission_policies(name: str = "cogate", *, gate_name: str = DEFAULT_GATE_NAME, adopted: Iterable[str] = (),
                       scheduler_names: Iterable[str] = (), excluded_namespaces: Sequence[str] = ("kube-system",),
                       late_labels: str | None = None,
                       late_namespace_terms: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """Every policy and binding of release ``name`` (:func:`names`), in the order to apply them.

    ``adopted``: ``--adopt-scheduler-name`` values (checked by
    :func:`cogate.webhook.admission.validate_adoption`); ``scheduler_names``: ``--scheduler-name``
    values (``default-scheduler`` is always planned for); ``late_labels``: ``None`` (no late policy) or
    its ``failurePolicy``. Raises ``ValueError`` for another ``late_labels``.
    """
    if late_labels is not None and late_labels not in FAILURE_POLICIES:
        raise ValueError(f"late_labels must be one of {FAILURE_POLICIES} or None, got {late_labels!r}")
    n = names(name)
    out = [*gate_policy(n["gate"], gate_name, adopted, excluded_namespaces)]
    if late_labels is not None:
        out += late_policy(n["late"], gate_name, adopted, excluded_namespaces, late_labels, late_namespace_terms)
    out += refusal_policy(n["refuse"], excluded_namespaces)
    out += warning_policy(n["warn"], gate_name, scheduler_names, excluded_namespaces)
    return out
