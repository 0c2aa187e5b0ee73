"""ResourceQuota room for a group's missing members (pure; the informer is in the shell).

The API server's ResourceQuota admission plugin charges a pod to its namespace's quotas
when the pod is *created*, gated or not: a gated member holds quota (``status.used``)
but no node room. When a namespace's quota is used up, a workload controller's next
member is refused at creation (its ``FailedCreate`` event says "exceeded quota"), and
the PodGroup waits for members that cannot exist. :func:`explain_waiting` adds that
reason to a ``WaitingForMembers`` verdict, from the quotas' ``status`` (always present,
unlike Events, which expire, and available also for bare pods and for groups with no
member yet).

Usage of one member, as kube's pod quota evaluator (pkg/quota/v1/evaluator/core/pods.go)
charges it: ``pods`` and ``count/pods`` 1; ``cpu``/``requests.cpu``, ``memory``/
``requests.memory``, ``ephemeral-storage``/``requests.ephemeral-storage``,
``hugepages-*``/``requests.hugepages-*`` and ``requests.<extended resource>`` the
member's effective request (the same sum kube-scheduler uses, overhead included).
Not evaluated (a quota on them never produces a message here): ``limits.*`` (the
planner's records keep requests only), storage and object counts other than pods, and
quotas with ``scopes`` or a ``scopeSelector`` (whether a member is in their scope
depends on fields the records do not keep). So a message is only given when the quota
certainly refuses a member like the existing ones; silence proves nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cogate.controller.model import readers
from cogate.controller.model.records import InvalidObject, PodInfo
from cogate.controller.model.verdicts import Outcome, with_note
from cogate.controller.model.resources import format_quantity, parse_quantity, to_units

__all__ = ["QuotaInfo", "quota_info", "member_usage", "quota_refusal", "explain_waiting"]

_REQUESTS = "requests."
_PLAIN = ("cpu", "memory", "ephemeral-storage")
_POD_COUNTS = ("pods", "count/pods")


@dataclass(frozen=True)
class QuotaInfo:
    """A ResourceQuota reduced to what :func:`quota_refusal` reads.

    ``hard``/``used``: quota resource name -> amount in the unit of its base resource
    (cpu millicores, bytes, counts). ``scoped``: the quota has ``scopes`` or a
    ``scopeSelector`` (not evaluated).
    """

    namespace: str
    name: str
    hard: Mapping[str, int]
    used: Mapping[str, int]
    scoped: bool = False
    resource_version: str = dataclasses.field(default="", compare=False)


def _base(key: str) -> str:
    """The pod resource a quota key charges (``requests.cpu``/``limits.cpu`` -> ``cpu``, ``pods`` -> ``pods``)."""
    for prefix in (_REQUESTS, "limits."):
        if key.startswith(prefix):
            return key[len(prefix):]
    return key


def _amounts(raw: Any, path: str) -> dict[str, int]:
    out = {}
    for key, value in readers.mapping(raw, path).items():
        try:
            out[str(key)] = to_units(_base(str(key)), parse_quantity(value))
        except (ValueError, TypeError) as exc:
            raise InvalidObject(f"{path}.{key}: {exc}") from None
    return out


def quota_info(obj: Mapping[str, Any]) -> QuotaInfo:
    """Reduce a v1 ResourceQuota (API JSON). Raises :class:`InvalidObject` naming the field."""
    meta, spec, status = readers.sections(obj, "resourcequota")
    return QuotaInfo(
        namespace=readers.text(meta.get("namespace"), "metadata.namespace"),
        name=readers.text(meta.get("name"), "metadata.name"),
        # status.hard is what the quota controller enforces (spec.hard as last observed).
        hard=_amounts(status.get("hard", spec.get("hard")), "status.hard"),
        used=_amounts(status.get("used"), "status.used"),
        scoped=bool(spec.get("scopes") or spec.get("scopeSelector")),
        resource_version=readers.text(meta.get("resourceVersion"), "metadata.resourceVersion"),
    )


def member_usage(member: PodInfo | None, key: str) -> int | None:
    """Quota usage of quota resource ``key`` by one pod like ``member``; ``None`` if not evaluated.

    ``member`` ``None`` (no member exists yet): only the pod counts are known.
    """
    if key in _POD_COUNTS:
        return 1
    if key.startswith("limits."):
        return None  # limits are not in the planner's records
    base = _base(key)
    pod_resource = base in _PLAIN or base.startswith("hugepages-")
    if key.startswith(_REQUESTS):
        # requests.<extended resource> is domain-qualified (nvidia.com/gpu); requests.storage is for claims
        pod_resource = pod_resource or "/" in base
    if not pod_resource or member is None:
        return None
    return int(member.requests.get(base, 0))


def quota_refusal(quotas: Iterable[QuotaInfo], namespace: str, member: PodInfo | None) -> str:
    """Why the namespace's quotas refuse another pod like ``member``, or ``""``.

    A quota refuses it when, for a resource it limits and the pod uses,
    ``used + usage > hard`` (kube's quota admission check). Names the first refusing
    quota (by name) and its exhausted resources, e.g. ``"ResourceQuota compute: requests.cpu
    8 of 8 used, a member requests 2"``.
    """
    for q in sorted((q for q in quotas if q.namespace == namespace and not q.scoped), key=lambda q: q.name):
        short = []
        for key in sorted(q.hard):
            usage = member_usage(member, key)
            if not usage:
                continue
            used, hard = q.used.get(key, 0), q.hard[key]
            if used + usage > hard:
                base = _base(key)
                short.append(f"{key} {format_quantity(base, used)} of {format_quantity(base, hard)} used, "
                             f"a member {'is' if key in _POD_COUNTS else 'requests'} "
                             f"{'1 pod' if key in _POD_COUNTS else format_quantity(base, usage)}")
        if short:
            return f"ResourceQuota {q.name}: " + "; ".join(short)
    return ""


def explain_waiting(verdict: Any, request: Any, quotas: Sequence[QuotaInfo]) -> Any:
    """``verdict`` with the quota reason appended when it waits for members a quota refuses.

    Only for ``WaitingForMembers`` verdicts of groups with fewer than ``min_member``
    members present (not Failed); the template member is the group's newest non-failed
    member (``None`` when there is none). ``verdict``: a frozen ``verdicts.GroupVerdict``
    (a copy is returned); ``request``: its ``verdicts.GroupRequest``.
    """
    if not quotas or verdict.outcome != Outcome.WAITING_FOR_MEMBERS:
        return verdict
    present = [m for m in request.members if m.phase != "Failed"]
    if len(present) >= request.min_member:
        return verdict
    template = max(present, key=lambda m: (m.created, m.name), default=None)
    why = quota_refusal(quotas, request.namespace, template)
    if not why:
        return verdict
    text = (f"{why}: the API server refuses more members at creation (see the owner's FailedCreate "
            "events); members hold quota from creation, gated or not")
    return with_note(verdict, text)
