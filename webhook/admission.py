"""Admission decision of the cogate mutating webhook (pure; no I/O, no API calls).

The webhook adds one scheduling gate to every pod created with the PodGroup label
(docs/semantics.md, "Webhook"), so the pod is stored Pending/SchedulingGated until the
controller releases its whole group. This module holds the whole decision as plain
functions over the parsed ``admission.k8s.io/v1`` AdmissionReview dict; the aiohttp
server in :mod:`cogate.webhook.server` only parses JSON and calls :func:`admit`.

Rules, in order (first match wins):

1. The envelope must be a valid ``admission.k8s.io/v1`` ``AdmissionReview`` with a
   ``request`` object carrying a non-empty string ``uid``; otherwise
   :class:`InvalidReview` (the server answers HTTP 400).
2. Anything but a ``CREATE`` of the ``pods`` resource itself (core group, no
   subresource) is allowed unchanged: the webhook gates at creation only.
3. A pod without the label :data:`cogate.api.POD_GROUP_LABEL` is allowed unchanged.
4. A pod whose label value is empty names no PodGroup (a PodGroup name cannot be
   empty), so it is allowed unchanged, *not* gated, with an admission warning. Gating
   it would leave it Pending forever, because no PodGroup can ever release it.
5. A pod whose label value cannot name a PodGroup (not a DNS-1123 subdomain of at most
   63 characters, e.g. ``Train_Job.v1``: :func:`cogate.api.pod_group_name_error`) is
   **refused** (``allowed: false``, code 422, reason ``Invalid``) with a message saying
   why: no PodGroup can ever have that name, so a gated pod would wait for ever. A
   workload controller's ``FailedCreate`` events then show the message.
6. A pod with ``spec.nodeName`` set bypasses the scheduler and cannot carry a
   scheduling gate (Kubernetes API validation rejects ``schedulingGates`` together
   with ``nodeName`` at create): allowed unchanged with an admission warning.
7. A pod that already carries the gate is allowed unchanged (idempotent under webhook
   reinvocation), except for the scheduler-name adoption below.
8. Otherwise the pod is allowed with a JSONPatch that appends the gate to
   ``spec.schedulingGates`` (creating the list if absent or null). No other gate or
   field is touched, except for the scheduler-name adoption below.

**Native gang scheduling** (Kubernetes' own, GenericWorkload; issue 18): a labelled pod that
sets ``spec.schedulingGroup`` (1.36+) or ``spec.workloadRef`` (the 1.35 alpha;
:func:`cogate.api.native_gang_field`) goes through the rules above like any other (gated, adopted,
refused or warned alike) and, when it leaves admission gated (rules 7 and 8), gets one more
warning (:func:`native_warning`). The webhook cannot know whether the field survives admission:
with GenericWorkload off (the default on every release up to 1.37) the API server drops it after
the mutating webhooks ran, and the pod is stored as an ordinary member; left ungated, it would be
bound alone. Only the stored pod tells: when it still has the field, it is no member and the
controller removes cogate's gate, so native places it (docs/semantics.md, "Native gang scheduling").

**Scheduler-name adoption** (``--adopt-scheduler-name``, issue 20): a pod that leaves
admission gated (rules 7 and 8) and whose ``spec.schedulerName`` is one of the adopted
names (chart default ``scheduler-plugins-scheduler``, the name KubeRay hard-codes and the
Kubeflow operators' docs tell users to set) gets, in the same JSONPatch, ``replace
/spec/schedulerName`` with :data:`cogate.api.DEFAULT_SCHEDULER_NAME`, the scheduler cogate
plans for and releases to, and an admission warning naming the rewrite (old -> new).
Without it such a group stays gated for ever (the controller plans only for the names it
knows: docs/semantics.md, "Scheduler names"), or, planned with ``--scheduler-name``, is
released to a scheduler that does not run. Edge cases, decided:

- Rule 7 is adopted too: a pod created already carrying the gate (copied from a gated pod)
  or one a later mutator gave the adopted name back before the API server reinvoked us would
  otherwise stay gated for ever. A pod we rewrote no longer names an adopted scheduler, so a
  reinvocation after our own patch gets no patch: the decision is idempotent.
- Pods the webhook does not gate (no label, empty label, unnameable label, ``spec.nodeName``)
  keep their scheduler name: they are not cogate's to place, and a pod with ``nodeName``
  bypasses every scheduler.
- Only ``spec.schedulerName`` changes; Kubernetes makes it immutable after creation, so
  admission is the one moment it can be rewritten.
- An adopted name may not be ``default-scheduler`` nor one the controller plans for
  (``--scheduler-name``): both are refused at start (:func:`validate_adoption`), since a
  name cannot both be released to as it is and rewritten.

Admission warnings are short (the API server asks for at most 120 characters each)
and are shown to the client by kubectl.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import orjson

from cogate import gates
from cogate.api import (DEFAULT_GATE_NAME, DEFAULT_SCHEDULER_NAME, POD_GROUP_LABEL, native_gang_field,
                        pod_group_name_error, validate_gate_name)

__all__ = [
    "ADMISSION_API_VERSION",
    "ADMISSION_KIND",
    "internal_error_response",
    "Admission",
    "InvalidReview",
    "Outcome",
    "admit",
    "adoption_warning",
    "evaluate",
    "gate_patch",
    "native_warning",
    "validate_adoption",
    "validate_gate_name",
]

ADMISSION_API_VERSION = "admission.k8s.io/v1"
ADMISSION_KIND = "AdmissionReview"


class InvalidReview(ValueError):
    """The request body is not a valid ``admission.k8s.io/v1`` AdmissionReview.

    ``str(exc)`` names the offending field, e.g. ``"request.uid: missing"``.
    """


class Outcome(StrEnum):
    """Outcome of an admission decision (also the ``outcome`` metric label; a ``StrEnum``
    equals its string, so labels and log fields are unchanged)."""

    GATED = "gated"  #: labelled pod, gate added by the patch
    ALREADY_GATED = "already_gated"  #: labelled pod that already carries the gate
    BOUND = "bound"  #: labelled pod with spec.nodeName: cannot be gated, warning
    EMPTY_GROUP = "empty_group"  #: label present with an empty value, warning
    INVALID_GROUP = "invalid_group"  #: label value that cannot name a PodGroup: refused
    IGNORED = "ignored"  #: not a pod CREATE, or a pod without the label
    INVALID = "invalid"  #: not a valid AdmissionReview (HTTP 400); set by the server
    ERROR = "error"  #: unexpected internal error; set by the server


@dataclass(frozen=True)
class Admission:
    """One admission decision.

    ``uid`` echoes ``request.uid``; ``patch`` is the JSONPatch operations list (RFC
    6902) or ``None`` for "allowed unchanged"; ``warnings`` are admission warnings;
    ``outcome`` is one of :class:`Outcome`; ``refusal``, when not empty, refuses the
    request with that message (``allowed: false``); ``namespace``/``name`` identify the
    object for logs (``name`` falls back to ``generateName`` for pods created by
    controllers, which have no name yet at admission); ``adopted``, when not empty, is the
    adopted scheduler name the patch rewrote to ``default-scheduler`` (module docstring).
    """

    uid: str
    outcome: Outcome
    patch: list[dict[str, Any]] | None = None
    warnings: tuple[str, ...] = ()
    refusal: str = ""
    namespace: str = ""
    name: str = ""
    operation: str = ""
    kind: str = ""
    adopted: str = ""
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def response(self) -> dict[str, Any]:
        """The AdmissionReview response body (``admission.k8s.io/v1``).

        ``allowed: true`` unless there is a ``refusal``: then ``allowed: false`` with a
        ``status`` (code 422, reason ``Invalid``, the refusal as message; the API server
        answers the client "admission webhook ... denied the request: <message>").
        ``patch`` (base64 of the JSON array) and ``patchType: JSONPatch`` only when there
        is a patch; ``warnings`` only when non-empty.
        """
        resp: dict[str, Any] = {"uid": self.uid, "allowed": not self.refusal}
        if self.refusal:
            resp["status"] = {"status": "Failure", "reason": "Invalid", "code": 422, "message": self.refusal}
        if self.patch is not None:
            raw = orjson.dumps(self.patch)
            resp["patchType"] = "JSONPatch"
            resp["patch"] = base64.b64encode(raw).decode("ascii")
        if self.warnings:
            resp["warnings"] = list(self.warnings)
        return {"apiVersion": ADMISSION_API_VERSION, "kind": ADMISSION_KIND, "response": resp}


def _obj(value: Any, path: str, *, required: bool = False) -> dict[str, Any] | None:
    """``value`` as a dict; ``None`` when absent/null; InvalidReview for other types."""
    if value is None:
        if required:
            raise InvalidReview(f"{path}: missing")
        return None
    if not isinstance(value, dict):
        raise InvalidReview(f"{path}: must be an object, got {type(value).__name__}")
    return value


def _str(value: Any, path: str) -> str:
    """``value`` as a string; ``""`` when absent/null; InvalidReview for other types."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidReview(f"{path}: must be a string, got {type(value).__name__}")
    return value


def _is_pod_resource(request: dict[str, Any]) -> bool:
    """True when the request is for the core ``pods`` resource itself (no subresource).

    Uses ``request.kind`` (core group, kind ``Pod``), falling back to
    ``request.resource`` (core group, resource ``pods``) when ``kind`` is absent.
    Subresource requests (``pods/binding``, ``pods/eviction``, ...) are not pods.
    """
    if _str(request.get("subResource"), "request.subResource"):
        return False
    kind = _obj(request.get("kind"), "request.kind")
    if kind is not None:
        return _str(kind.get("group"), "request.kind.group") == "" and _str(kind.get("kind"), "request.kind.kind") == "Pod"
    resource = _obj(request.get("resource"), "request.resource")
    if resource is not None:
        return (
            _str(resource.get("group"), "request.resource.group") == ""
            and _str(resource.get("resource"), "request.resource.resource") == "pods"
        )
    return False


def gate_patch(pod: dict[str, Any], gate_name: str = DEFAULT_GATE_NAME) -> list[dict[str, Any]] | None:
    """JSONPatch (RFC 6902) adding ``gate_name`` to a pod's ``spec.schedulingGates``
    (:func:`cogate.gates.add`: appends, or creates the list or ``spec`` when absent).

    ``pod`` is the pod as API JSON (camelCase). Returns ``None`` when the gate is
    already present. Raises :class:`InvalidReview` naming the field when ``spec``,
    ``spec.schedulingGates`` or one of its entries has the wrong type.
    """
    try:
        return gates.add(pod, gate_name)
    except gates.GateShapeError as exc:
        raise InvalidReview(f"request.object.{exc}") from None


def internal_error_response(uid: str, error: str) -> dict[str, Any]:
    """The AdmissionReview that denies request ``uid`` after an internal error (``error``:
    the exception's type name): a labelled pod is never admitted without its gate, and the
    API server reports a retryable 500 to the client."""
    return {
        "apiVersion": ADMISSION_API_VERSION,
        "kind": ADMISSION_KIND,
        "response": {
            "uid": uid,
            "allowed": False,
            "status": {
                "status": "Failure",
                "reason": "InternalError",
                "code": 500,
                "message": f"cogate webhook internal error ({error}); retry the request",
            },
        },
    }


def _validate_envelope(review: Any) -> dict[str, Any]:
    """Check the AdmissionReview envelope; return ``review["request"]``."""
    if not isinstance(review, dict):
        raise InvalidReview(f"body: must be a JSON object (AdmissionReview), got {type(review).__name__}")
    api_version = review.get("apiVersion")
    if api_version != ADMISSION_API_VERSION:
        raise InvalidReview(f"apiVersion: must be {ADMISSION_API_VERSION!r}, got {api_version!r}")
    kind = review.get("kind")
    if kind != ADMISSION_KIND:
        raise InvalidReview(f"kind: must be {ADMISSION_KIND!r}, got {kind!r}")
    request = _obj(review.get("request"), "request", required=True)
    assert request is not None
    uid = request.get("uid")
    if uid is None:
        raise InvalidReview("request.uid: missing")
    if not isinstance(uid, str) or not uid:
        raise InvalidReview("request.uid: must be a non-empty string")
    return request


def validate_adoption(adopted: Iterable[str],
                      scheduler_names: frozenset[str] = frozenset({DEFAULT_SCHEDULER_NAME})) -> frozenset[str]:
    """The adopted scheduler names (``--adopt-scheduler-name``) as a frozenset, checked
    against the planned ones (``--scheduler-name`` plus ``default-scheduler``).

    Raises ``ValueError`` naming the name and the flags when an adopted name is empty, is
    ``default-scheduler`` (the scheduler adoption rewrites to: rewriting it to itself means
    nothing) or is also planned for: a member naming it would be both released to that
    scheduler as it is and rewritten to ``default-scheduler``; cogate refuses to guess.
    """
    out = frozenset(adopted)
    for name in sorted(out):
        if not name:
            raise ValueError("--adopt-scheduler-name: must be a non-empty scheduler name")
        if name == DEFAULT_SCHEDULER_NAME:
            raise ValueError(f"--adopt-scheduler-name {name!r}: it is the scheduler adopted pods are rewritten to")
        if name in scheduler_names:
            raise ValueError(f"--adopt-scheduler-name {name!r} is also a --scheduler-name: pass it to one of them "
                             "(adopt: rewrite it to default-scheduler; scheduler-name: release to it as it is)")
    return out


def adoption_warning(old: str) -> str:
    """The admission warning of an adopted member (at most 120 characters: ``old`` is cut
    to 50), e.g. ``schedulerName 'scheduler-plugins-scheduler' -> 'default-scheduler':
    adopted by cogate``."""
    return f"schedulerName {old[:50]!r} -> {DEFAULT_SCHEDULER_NAME!r}: adopted by cogate"


def native_warning(native: str) -> str:
    """The extra admission warning of a gated pod that sets ``native`` (``"spec.schedulingGroup"``
    or ``"spec.workloadRef"``; module docstring, "Native gang scheduling"), at most 120 characters:
    ``spec.schedulingGroup set: if Kubernetes gang scheduling is on, it places the pod and cogate
    removes its gate``."""
    return f"{native} set: if Kubernetes gang scheduling is on, it places the pod and cogate removes its gate"


def evaluate(review: Any, gate_name: str = DEFAULT_GATE_NAME,
             scheduler_names: frozenset[str] = frozenset({DEFAULT_SCHEDULER_NAME}),
             adopted: frozenset[str] = frozenset()) -> Admission:
    """Decide one AdmissionReview (the parsed JSON body) for gate ``gate_name``.

    ``scheduler_names``: the ``spec.schedulerName`` values the controller plans for (its
    ``--scheduler-name`` flags plus ``default-scheduler``); a labelled pod naming another is
    still gated, with a warning that its PodGroup will not be released. ``adopted``: the
    scheduler names rewritten to ``default-scheduler`` in a gated pod (``--adopt-scheduler-name``;
    checked once by :func:`validate_adoption`, not here); such a pod gets no
    "not one cogate plans for" warning, but :func:`adoption_warning`.

    Returns an :class:`Admission` (allowed, except a label value that cannot name a
    PodGroup; see the module docstring for the rules). Raises :class:`InvalidReview` with the offending field when ``review`` is
    not a valid ``admission.k8s.io/v1`` AdmissionReview or a field the decision reads
    has the wrong type (``request.object`` not an object, labels not a map of
    strings, ...). Pure: no I/O, does not modify ``review``.
    """
    request = _validate_envelope(review)
    uid: str = request["uid"]
    operation = _str(request.get("operation"), "request.operation")
    obj = _obj(request.get("object"), "request.object")
    old = request.get("oldObject")
    if old is not None and not isinstance(old, dict):
        raise InvalidReview(f"request.oldObject: must be an object, got {type(old).__name__}")
    namespace = _str(request.get("namespace"), "request.namespace")
    name = _str(request.get("name"), "request.name")
    kind_obj = _obj(request.get("kind"), "request.kind") or {}
    kind = _str(kind_obj.get("kind"), "request.kind.kind")
    base = {"uid": uid, "namespace": namespace, "name": name, "operation": operation, "kind": kind}

    if operation != "CREATE" or not _is_pod_resource(request):
        return Admission(outcome=Outcome.IGNORED, **base)
    if obj is None:
        raise InvalidReview("request.object: missing for a pod CREATE")

    metadata = _obj(obj.get("metadata"), "request.object.metadata") or {}
    if not name:
        name = _str(metadata.get("name"), "request.object.metadata.name") or _str(
            metadata.get("generateName"), "request.object.metadata.generateName"
        )
        base["name"] = name
    labels = _obj(metadata.get("labels"), "request.object.metadata.labels") or {}
    if POD_GROUP_LABEL not in labels:
        return Admission(outcome=Outcome.IGNORED, **base)
    group = labels[POD_GROUP_LABEL]
    if not isinstance(group, str):
        raise InvalidReview(
            f"request.object.metadata.labels[{POD_GROUP_LABEL!r}]: must be a string, got {type(group).__name__}"
        )
    if group == "":
        return Admission(
            outcome=Outcome.EMPTY_GROUP,
            warnings=(f"label {POD_GROUP_LABEL} is empty: it names no PodGroup; pod not gang-gated",),
            **base,
        )
    error = pod_group_name_error(group)
    if error is not None:
        return Admission(
            outcome=Outcome.INVALID_GROUP,
            refusal=f"label {POD_GROUP_LABEL}={group!r} cannot name a PodGroup ({error}); "
                    "fix the label value to the name of a PodGroup in this namespace",
            extra={"group": group},
            **base,
        )
    spec = _obj(obj.get("spec"), "request.object.spec") or {}
    if _str(spec.get("nodeName"), "request.object.spec.nodeName"):
        return Admission(
            outcome=Outcome.BOUND,
            warnings=(f"pod sets spec.nodeName: it cannot be gang-gated (PodGroup {group!r})",),
            extra={"group": group},
            **base,
        )
    scheduler = _str(spec.get("schedulerName"), "request.object.spec.schedulerName") or DEFAULT_SCHEDULER_NAME
    patch = gate_patch(obj, gate_name)
    outcome = Outcome.GATED if patch is not None else Outcome.ALREADY_GATED
    native = native_gang_field(spec)
    extra = {"group": group} | ({"native": native} if native else {})
    also = (native_warning(native),) if native else ()
    if scheduler in adopted:
        patch = [*(patch or ()), {"op": "replace", "path": "/spec/schedulerName", "value": DEFAULT_SCHEDULER_NAME}]
        return Admission(outcome=outcome, patch=patch, warnings=(adoption_warning(scheduler), *also),
                         adopted=scheduler, extra=extra | {"adopted": scheduler}, **base)
    warnings = _scheduler_warning(scheduler, group, scheduler_names) + also
    return Admission(outcome=outcome, patch=patch, warnings=warnings, extra=extra, **base)


def _scheduler_warning(scheduler: str, group: str, scheduler_names: frozenset[str]) -> tuple[str, ...]:
    """The admission warning for a member naming a scheduler cogate does not plan for (the
    controller keeps such a group gated: docs/semantics.md, "Scheduler names"), else ``()``."""
    if scheduler in scheduler_names:
        return ()
    return (f"schedulerName {scheduler[:40]!r} is not one cogate plans for: PodGroup {group[:40]!r} stays gated",)


def admit(review: Any, gate_name: str = DEFAULT_GATE_NAME,
          scheduler_names: frozenset[str] = frozenset({DEFAULT_SCHEDULER_NAME}),
          adopted: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The AdmissionReview response dict for ``review`` (see :func:`evaluate`).

    Shape: ``{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
    "response": {"uid", "allowed", ["status": {...}], ["patchType": "JSONPatch",
    "patch": <base64>], ["warnings": [...]]}}`` (see :meth:`Admission.response`). Raises :class:`InvalidReview` on an invalid review.
    """
    return evaluate(review, gate_name, scheduler_names, adopted).response()
