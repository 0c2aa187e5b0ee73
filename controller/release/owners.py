"""Owners that cannot complete their group (pure): what a member's owner's state means for it.

A group that waits for members (fewer than minMember present) waits for its members' owners to
create them. Some owners never will, and the PodGroup would only say "1 of 3 members present"
for ever (issue 21 item 5). This module judges, from the owners' objects as the shell read
them (:class:`OwnerState`, built by :func:`owner_state` from API JSON), how many members each
owner can keep at once (:func:`limit`), and whether the owners together can ever reach
minMember (:func:`judge`). Rules, each from the owner controller's documented behaviour:

* **deleted** (not found, or another object now has its name: another uid) or being deleted
  (``deletionTimestamp``): 0; garbage collection removes its pods.
* **Job** (``batch/v1``; kube-controller-manager's job controller):
  a ``Failed`` or ``FailureTarget`` condition ``True`` (``DeadlineExceeded``: ``activeDeadlineSeconds``
  ran out, which a gang waiting gated counts against it; ``BackoffLimitExceeded``, ...): 0, it
  deletes its active pods and creates none. ``Complete`` or ``SuccessCriteriaMet`` ``True``: 0.
  ``spec.suspend``: 0 until resumed (Kueue and other queues suspend on purpose: said, as
  Normal). Otherwise at most ``parallelism`` (default 1) pods at once, and no more than
  ``completions - status.succeeded`` when ``completions`` is set.
* **ReplicaSet** (``apps/v1``): ``spec.replicas`` (default 1); a Deployment's ReplicaSet names
  its Deployment, which is what to scale.
* **StatefulSet** (``apps/v1``): ``spec.replicas`` (default 1). With ``podManagementPolicy``
  ``OrderedReady`` (the default) it creates pod N only once pods 0..N-1 are Running and Ready
  (Kubernetes docs, "Pod Management Policies"); a gated pod is never Ready, so while one of its
  members is unbound it keeps the members it has. The fix is ``Parallel``, which cannot be
  changed in place.
* any other kind (or a ReplicaSet/Job of another API group): unknown, never judged.

:func:`judge` adds the owners' limits (each at least the members of it present now) and the
members without a controller owner; only when **every** owner is known and the total is below
minMember does it return a :class:`Finding`, naming the owners that limit and the fix. A
``Warning`` unless every limiting owner is only suspended or complete. Plain data in, plain
data out; never raises on a well-typed input (:func:`owner_state` raises ``ValueError`` on a
malformed object, which the shell treats as unknown).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from cogate.controller.model.readers import integer
from cogate.controller.model.records import PodInfo

__all__ = ["KINDS", "OwnerRef", "OwnerState", "Limit", "Finding", "owner_ref", "readable", "owner_state", "gone",
           "limit", "judge"]

#: The owner kinds cogate reads (``(API group, kind)``), each by ``get`` only.
KINDS = frozenset({("batch", "Job"), ("apps", "ReplicaSet"), ("apps", "StatefulSet")})
#: How many owners are named in one message.
OWNERS_SHOWN = 3


@dataclass(frozen=True)
class OwnerRef:
    """A member's controller owner (``PodInfo.owner``): ``api_version`` (``apps/v1``), ``kind``,
    ``namespace`` (the member's), ``name``, ``uid``."""

    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str

    @property
    def group(self) -> str:
        """The API group (``""`` for core)."""
        return self.api_version.rpartition("/")[0]

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


def owner_ref(p: PodInfo) -> OwnerRef | None:
    """``p``'s controller owner, or None (a bare pod)."""
    if not p.owner:
        return None
    api_version, kind, name, uid = p.owner
    return OwnerRef(api_version, kind, p.namespace, name, uid)


def readable(ref: OwnerRef) -> bool:
    """Whether cogate reads owners of this kind (:data:`KINDS`)."""
    return (ref.group, ref.kind) in KINDS


@dataclass(frozen=True)
class OwnerState:
    """An owner as read (:func:`owner_state`): ``exists`` False when not found or replaced by
    another object of that name (another ``uid``); ``deleting``; ``replicas`` (ReplicaSet,
    StatefulSet ``spec.replicas``, default 1); ``ordered_ready`` (StatefulSet
    ``podManagementPolicy`` OrderedReady, the default); Job: ``parallelism`` (default 1),
    ``completions`` (None: not set), ``succeeded`` (``status.succeeded``), ``suspended``,
    ``failed`` (the reason of a ``True`` Failed or FailureTarget condition, '' if none) and
    ``failed_message``, ``complete``, ``active_deadline`` (``activeDeadlineSeconds``);
    ``parent``: a ReplicaSet's controller (``Deployment web``), '' if none."""

    ref: OwnerRef
    exists: bool = True
    deleting: bool = False
    replicas: int = 1
    ordered_ready: bool = False
    parallelism: int = 1
    completions: int | None = None
    succeeded: int = 0
    suspended: bool = False
    failed: str = ""
    failed_message: str = ""
    complete: bool = False
    active_deadline: int | None = None
    parent: str = ""


def gone(ref: OwnerRef) -> OwnerState:
    """The state of an owner that was not found (HTTP 404)."""
    return OwnerState(ref, exists=False)


def _true(conditions: Any, *types: str) -> Mapping[str, Any] | None:
    for c in conditions if isinstance(conditions, list) else ():
        if isinstance(c, Mapping) and c.get("type") in types and c.get("status") == "True":
            return c
    return None


def owner_state(ref: OwnerRef, raw: Mapping[str, Any]) -> OwnerState:
    """``ref``'s state from its object as read (API JSON). An object with another uid is a new
    one under the same name: the owner is gone. Raises ``ValueError`` naming the field on a
    malformed object."""
    if not isinstance(raw, Mapping):
        raise ValueError(f"{ref}: not an object")
    meta = raw.get("metadata") if isinstance(raw.get("metadata"), Mapping) else {}
    spec = raw.get("spec") if isinstance(raw.get("spec"), Mapping) else {}
    status = raw.get("status") if isinstance(raw.get("status"), Mapping) else {}
    if ref.uid and meta.get("uid") and meta.get("uid") != ref.uid:
        return OwnerState(ref, exists=False)
    deleting = meta.get("deletionTimestamp") is not None
    if ref.kind == "Job":
        failed = _true(status.get("conditions"), "Failed", "FailureTarget")
        return OwnerState(
            ref, deleting=deleting,
            parallelism=integer(spec.get("parallelism"), "spec.parallelism", 1),
            completions=integer(spec.get("completions"), "spec.completions", None),
            succeeded=integer(status.get("succeeded"), "status.succeeded", 0),
            suspended=spec.get("suspend") is True,
            failed=str(failed.get("reason") or "Failed") if failed else "",
            failed_message=str(failed.get("message") or "") if failed else "",
            complete=_true(status.get("conditions"), "Complete", "SuccessCriteriaMet") is not None,
            active_deadline=integer(spec.get("activeDeadlineSeconds"), "spec.activeDeadlineSeconds", None))
    replicas = integer(spec.get("replicas"), "spec.replicas", 1)
    parent = ""
    owners = meta.get("ownerReferences")
    for o in owners if isinstance(owners, list) else ():
        if isinstance(o, Mapping) and o.get("controller") is True:
            parent = f"{o.get('kind', '')} {o.get('name', '')}"
    return OwnerState(ref, deleting=deleting, replicas=replicas,
                      ordered_ready=ref.kind == "StatefulSet"
                      and (spec.get("podManagementPolicy") or "OrderedReady") == "OrderedReady",
                      parent=parent)


@dataclass(frozen=True)
class Limit:
    """How many members an owner keeps at once (``most``), why (``why``: a phrase after the
    owner's name, '' when nothing stops it), what to do (``fix``) and whether that is a
    ``warning`` (False: suspended or complete, which is how such owners end or wait)."""

    state: OwnerState
    most: int
    why: str = ""
    fix: str = ""
    warning: bool = True


def _job_failure_fix(s: OwnerState) -> str:
    if s.failed == "DeadlineExceeded":
        deadline = f" ({s.active_deadline}s)" if s.active_deadline is not None else ""
        return (f"its activeDeadlineSeconds{deadline} ran out while the gang waited gated (it counts from the Job's "
                "start, gated time included): recreate the Job with an activeDeadlineSeconds longer than the gang "
                "may wait for room")
    if s.failed == "BackoffLimitExceeded":
        return "its pods failed more often than backoffLimit allows: see their events, then recreate the Job"
    return "recreate the Job"


def limit(s: OwnerState, present: Sequence[PodInfo]) -> Limit:
    """The most members ``s``'s owner keeps at once, given ``present``: its members present now
    (module doc for the rules)."""
    kind = s.ref.kind
    if not s.exists:
        return Limit(s, 0, "was deleted, so it creates no more members", "recreate the workload, or delete this "
                     "PodGroup")
    if s.deleting:
        return Limit(s, 0, "is being deleted, so it creates no more members", "recreate the workload, or delete "
                     "this PodGroup")
    if kind == "Job":
        if s.failed:
            detail = f": {s.failed_message}" if s.failed_message else ""
            return Limit(s, 0, f"failed ({s.failed}{detail}) and creates no more members", _job_failure_fix(s))
        if s.complete:
            return Limit(s, 0, "is complete and creates no more members", "delete this PodGroup, or recreate the "
                         "Job to run again", warning=False)
        if s.suspended:
            return Limit(s, 0, "is suspended (spec.suspend) and keeps no pods until resumed",
                         "resume it (spec.suspend: false); a queue such as Kueue does so once it admits the Job",
                         warning=False)
        most = s.parallelism
        if s.completions is not None:
            most = min(most, max(0, s.completions - s.succeeded))
        done = f", completions {s.completions}, {s.succeeded} succeeded" if s.completions is not None else ""
        return Limit(s, most, f"runs at most {most} pods at once (parallelism {s.parallelism}{done})",
                     "raise its parallelism to minMember, or lower minMember")
    scale = s.parent if s.parent.startswith("Deployment ") else f"the {kind}"
    if kind == "StatefulSet" and s.ordered_ready and len(present) < s.replicas \
            and any(not p.bound for p in present):
        n = len(present)
        return Limit(s, n, f"creates its pods one at a time (podManagementPolicy OrderedReady, the default): "
                     f"{s.ref.name}-{n} only once {s.ref.name}-{n - 1} is Running and Ready, which a gated pod never "
                     "is",
                     f"recreate it with podManagementPolicy: Parallel (the field cannot be changed in place: "
                     f"kubectl delete statefulset {s.ref.name} --cascade=orphan, then apply it with Parallel)")
    of = f"(of {s.parent}) " if s.parent else ""
    return Limit(s, s.replicas, f"{of}keeps {s.replicas} pods (spec.replicas {s.replicas})",
                 f"scale {scale} to at least minMember, or lower minMember")


@dataclass(frozen=True)
class Finding:
    """The owners cannot complete the group: ``most`` members at most, ``message`` (names the
    limiting owners and the fix), ``warning`` (else Normal), ``owners`` (as ``Kind ns/name``)."""

    most: int
    message: str
    warning: bool
    owners: tuple[str, ...]


def judge(min_member: int, members: Sequence[PodInfo], known: Sequence[OwnerRef],
          states: Mapping[str, OwnerState | None]) -> Finding | None:
    """Whether the owners of a waiting group can never make minMember members.

    ``members``: the group's live members; ``known``: every owner seen for the group's members
    (now or earlier: the shell remembers them, since a failed Job deletes its pods);
    ``states``: owner uid -> its state as read (``None``: not read, e.g. an error). Returns
    ``None`` unless every owner (of members present now and remembered) is of a kind in
    :data:`KINDS` and read, and ``sum(max(limit, its members present)) + members without a
    controller owner < min_member``. Present: not Failed (as the planner counts them).
    """
    present = [m for m in members if m.phase != "Failed"]
    owners: dict[str, OwnerRef] = {r.uid: r for r in known}
    by_owner: dict[str, list[PodInfo]] = {}
    bare = 0
    for m in present:
        ref = owner_ref(m)
        if ref is None:
            bare += 1
            continue
        owners.setdefault(ref.uid, ref)
        by_owner.setdefault(ref.uid, []).append(m)
    if not owners:
        return None
    limits = []
    for uid, ref in owners.items():
        s = states.get(uid)
        if not readable(ref) or s is None:
            return None
        limits.append(limit(s, by_owner.get(uid, ())))
    total = bare + sum(max(lim.most, len(by_owner.get(lim.state.ref.uid, ()))) for lim in limits)
    if total >= min_member:
        return None
    # The owners that limit: all but those that keep minMember or more (none, here), most
    # telling first (a gone or failed owner before one that keeps a few pods).
    shown = sorted(limits, key=lambda lim: (lim.most, str(lim.state.ref)))[:OWNERS_SHOWN]
    more = len(limits) - len(shown)
    noun = "owner" if len(limits) == 1 else "owners"
    parts = [f"{lim.state.ref} {lim.why}" + (f"; fix: {lim.fix}" if lim.fix else "") for lim in shown]
    text = (f"its {noun} can keep at most {total} of minMember {min_member} members: " + "; ".join(parts)
            + (f"; and {more} more" if more else ""))
    return Finding(total, text, any(lim.warning for lim in limits), tuple(str(lim.state.ref) for lim in limits))
