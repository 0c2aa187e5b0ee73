"""Which admission webhooks and policies could refuse a release patch (pure).

A release patch is a JSON Patch UPDATE of a pod (remove cogate's gate, narrow the required
node affinity). Besides the API server's built-in validation, which the patch is built to
satisfy (:func:`cogate.controller.planning.patches.pin_ops`, ``ValidatePodUpdate``), only admission
webhooks and admission policies that intercept pod UPDATEs can refuse it. With
``--validate-releases auto`` (the default) the controller dry-runs every member's release
patch only while at least one of them exists (or while it cannot tell), and saves one request
per member otherwise (docs/semantics.md, "A release the API server refuses").

Matching follows ``admissionregistration.k8s.io/v1`` rules (``RuleWithOperations``,
``NamedRuleWithOperations``), conservatively: a rule intercepts a pod UPDATE when its
``operations`` hold ``UPDATE`` or ``*``, its ``apiGroups`` ``""`` or ``*``, its
``apiVersions`` ``v1`` or ``*``, its ``resources`` ``pods``, ``*`` or ``*/*`` (``pods/*``
names only subresources), and its ``scope`` is absent, ``*`` or ``Namespaced``. Namespace and
object selectors, ``matchConditions``, ``excludeResourceRules``, ``resourceNames``, policy
bindings and failure policies are not evaluated: they can only narrow what a rule intercepts,
so ignoring them errs towards a dry run. An object of an unexpected shape counts as
intercepting (named, so the log says which).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

#: ``--validate-releases``: ``auto`` dry-runs release patches while a webhook or admission
#: policy intercepts pod UPDATEs (or while that cannot be known); ``always``; ``never``.
VALIDATION_MODES = ("auto", "always", "never")

WEBHOOK_KINDS = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
POLICY_KINDS = ("ValidatingAdmissionPolicy", "MutatingAdmissionPolicy")

_RESOURCES = frozenset({"pods", "*", "*/*"})


def _names(value: Any) -> list[str] | None:
    """A rule's list of strings, or None for another shape."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None
    return value


def rule_intercepts_pod_update(rule: Any) -> bool:
    """Whether one ``RuleWithOperations`` / ``NamedRuleWithOperations`` (API JSON) matches an
    UPDATE of a pod (core ``v1`` ``pods``, namespaced); True for a rule of unexpected shape."""
    if not isinstance(rule, Mapping):
        return True
    ops, groups, versions, resources = (_names(rule.get(k)) for k in ("operations", "apiGroups", "apiVersions",
                                                                         "resources"))
    if ops is None or groups is None or versions is None or resources is None:
        return True
    scope = rule.get("scope")
    return (bool({"UPDATE", "*"} & set(ops)) and bool({"", "*"} & set(groups)) and bool({"v1", "*"} & set(versions))
            and bool(_RESOURCES & set(resources)) and scope in (None, "*", "Namespaced"))


def _name(raw: Mapping[str, Any]) -> str:
    meta = raw.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return name if isinstance(name, str) and name else "?"


def webhook_interceptors(raw: Mapping[str, Any], kind: str) -> tuple[str, ...]:
    """``"<kind> <configuration>/<webhook>"`` for each webhook of a Validating- or
    MutatingWebhookConfiguration (API JSON) with a rule intercepting pod UPDATEs."""
    config = _name(raw)
    hooks = raw.get("webhooks")
    if hooks is None:
        return ()
    if not isinstance(hooks, list):
        return (f"{kind} {config} (webhooks: not a list)",)
    out = []
    for i, hook in enumerate(hooks):
        if not isinstance(hook, Mapping):
            out.append(f"{kind} {config}/webhooks[{i}] (not an object)")
            continue
        rules = hook.get("rules")
        name = hook.get("name") if isinstance(hook.get("name"), str) else f"webhooks[{i}]"
        if rules is None:
            continue
        if not isinstance(rules, list) or any(rule_intercepts_pod_update(r) for r in rules):
            out.append(f"{kind} {config}/{name}")
    return tuple(out)


def policy_interceptors(raw: Mapping[str, Any], kind: str) -> tuple[str, ...]:
    """``("<kind> <name>",)`` when a Validating- or MutatingAdmissionPolicy (API JSON) intercepts
    pod UPDATEs by ``spec.matchConstraints.resourceRules`` (or has no readable constraints), else ()."""
    name = f"{kind} {_name(raw)}"
    spec = raw.get("spec")
    constraints = spec.get("matchConstraints") if isinstance(spec, Mapping) else None
    if not isinstance(constraints, Mapping):
        return (name,)
    rules = constraints.get("resourceRules")
    if rules is None:
        return ()
    if not isinstance(rules, list) or any(rule_intercepts_pod_update(r) for r in rules):
        return (name,)
    return ()


def interceptors_of(kind: str):
    """The informer conversion of ``kind`` (one of :data:`WEBHOOK_KINDS` + :data:`POLICY_KINDS`):
    raw object -> its intercepting webhooks or policy, as names."""
    if kind in WEBHOOK_KINDS:
        return lambda raw: webhook_interceptors(raw, kind)
    if kind in POLICY_KINDS:
        return lambda raw: policy_interceptors(raw, kind)
    raise ValueError(f"kind: {kind!r} not in {WEBHOOK_KINDS + POLICY_KINDS}")


#: admissionregistration.k8s.io resources that can hold a pod UPDATE interceptor -> their kind.
ADMISSION_RESOURCES = {
    "validatingwebhookconfigurations": "ValidatingWebhookConfiguration",
    "mutatingwebhookconfigurations": "MutatingWebhookConfiguration",
    "validatingadmissionpolicies": "ValidatingAdmissionPolicy",
    "mutatingadmissionpolicies": "MutatingAdmissionPolicy",
}


def watched_and_unwatched(served: Mapping[str, Iterable[str]]) -> tuple[list[str], list[str]]:
    """From API discovery of ``admissionregistration.k8s.io`` (version -> resource names served),
    the :data:`ADMISSION_RESOURCES` the controller watches (those served in ``v1``) and those it
    cannot (served only in another version, e.g. a beta ``mutatingadmissionpolicies``); any of
    the latter leaves ``auto`` dry-running every release. Both sorted."""
    v1 = set(served.get("v1", ())) & set(ADMISSION_RESOURCES)
    elsewhere = {r for v, names in served.items() if v != "v1" for r in names} & set(ADMISSION_RESOURCES)
    return sorted(v1), sorted(elsewhere - v1)


def dry_run_needed(mode: str, known: bool, interceptors: Iterable[str]) -> bool:
    """Whether release patches are dry-run first. ``mode``: one of :data:`VALIDATION_MODES`;
    ``known``: every kind of webhook and policy the API server serves is watched and listed
    (else ``auto`` dry-runs); ``interceptors``: the names found (any means a refusal is possible).
    Raises ``ValueError`` for an unknown mode."""
    if mode == "always":
        return True
    if mode == "never":
        return False
    if mode != "auto":
        raise ValueError(f"validate releases: {mode!r} not in {VALIDATION_MODES}")
    return not known or any(True for _ in interceptors)
