"""What the controller tells users in Events (pure): the reasons, and the messages built from a verdict.

Event reasons are one vocabulary (:class:`Reason`, a ``StrEnum``: it equals its string, so
Event objects and the ``cogate_events_total{reason}`` metric label are unchanged). Each
builder returns a :class:`Notice` (type, reason, message) or ``None`` when there is nothing
to say; the reconciler decides when to emit it (:class:`cogate.controller.kube.events.EventDeduplicator`).
Messages of verdicts are the planner's, as in the ``Released=False`` condition, so both say
the same. :class:`ObjectRef` names the object an Event is about.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from enum import StrEnum
from dataclasses import dataclass
from typing import NamedTuple

from cogate import api
from cogate.controller.model import verdicts
from cogate.controller.status.conditions import released_reason
from cogate.controller.model.records import PodInfo

class EventType(StrEnum):
    """``core/v1`` Event ``type``."""

    NORMAL = "Normal"
    WARNING = "Warning"


NORMAL = EventType.NORMAL
WARNING = EventType.WARNING


class Reason(StrEnum):
    """Reasons of the Events cogate writes (docs/semantics.md, "Events")."""

    #: On the PodGroup: members were released (their gates removed).
    RELEASED = "Released"
    #: On the PodGroup: the annotation ``cogate.dev/force-release`` released members without the gang rule.
    FORCE_RELEASED = "ForceReleased"
    #: On the PodGroup (Warning): the annotation ``cogate.dev/force-release`` has a value other than
    #: ``"true"``/``"false"`` and is ignored.
    INVALID_FORCE_RELEASE = "InvalidForceRelease"
    #: On the PodGroup: fewer members exist than ``minMember`` (a plain "k of N members present" only once no member arrived for 5 s: ``plain_wait``).
    WAITING_FOR_MEMBERS = "WaitingForMembers"
    #: On the PodGroup: the group does not fit now (or not even an empty cluster).
    INSUFFICIENT_CAPACITY = "InsufficientCapacity"
    #: On the PodGroup: a member's spec can never be placed by the planner.
    UNSCHEDULABLE = "Unschedulable"
    #: On the PodGroup: ``scheduleTimeoutSeconds`` passed (and, opted in, members were evicted).
    TIMEOUT = "Timeout"
    #: On the PodGroup: members differ in priority.
    MIXED_PRIORITIES = "MixedPriorities"
    #: On the PodGroup: the PodGroup or one of its members failed validation.
    INVALID_OBJECT = "InvalidObject"
    #: On the PodGroup: released members are pinned to a node that can no longer take them.
    PLANNED_NODE_UNUSABLE = "PlannedNodeUnusable"
    #: On the PodGroup (Warning): released members wait for a node that is not Ready (until their
    #: deadline: :mod:`cogate.controller.status.notready`); once when it starts or another node is waited for.
    NODE_NOT_READY = "NodeNotReady"
    #: On the PodGroup: the API server refused a member's release patch.
    RELEASE_REFUSED = "ReleaseRefused"
    #: On the PodGroup: a member left the released group (deleted, evicted, preempted, failed).
    MEMBER_LOST = "MemberLost"
    #: On the PodGroup: members run although the group was never released.
    UNGATED_WITHOUT_RELEASE = "UngatedWithoutRelease"
    #: On the PodGroup: the group fell below minMember; ``--evict-below-quorum`` evicted the rest.
    QUORUM_LOST = "QuorumLost"
    #: On the PodGroup: new members of a released group wait gated for room.
    WAITING_FOR_CAPACITY = "WaitingForCapacity"
    #: On the PodGroup: its PodDisruptionBudget name is taken by one cogate did not make.
    POD_DISRUPTION_BUDGET_CONFLICT = "PodDisruptionBudgetConflict"
    #: On the PodGroup: members of several LeaderWorkerSet or JobSet replicas share it.
    REPLICAS_SHARE_POD_GROUP = "ReplicasSharePodGroup"
    #: On the PodGroup: the API server dropped status fields cogate wrote (a CRD that prunes them).
    STATUS_FIELDS_DROPPED = "StatusFieldsDropped"
    #: On the PodGroup: another field manager also writes its status (scheduler-plugins' controller).
    FOREIGN_STATUS_WRITER = "ForeignStatusWriter"
    #: On the PodGroup: its members' owners can never make minMember members (failed, suspended,
    #: deleted, too few replicas, a StatefulSet creating pods one at a time); also on the operator
    #: (RayCluster, MPIJob, PyTorchJob) that keeps fewer pods than minMember.
    OWNER_CANNOT_COMPLETE = "OwnerCannotComplete"
    #: On the PodGroup and the owner (Warning): the owner creates members in stages (an MPIJob's
    #: launcher after its workers are Ready, a JobSet's ``dependsOn``) and the first stage is
    #: fewer than minMember, so the gang cannot form (:mod:`cogate.controller.release.stages`).
    STAGED_CREATION = "StagedCreation"
    #: On the PodGroup: cogate is preempting lower-priority pods to place it (issue 15).
    PREEMPTING = "Preempting"
    #: On the PodGroup (Warning): a preemption ended without placing it (victims stuck, nomination
    #: lost, plan changed, room taken once the victims went).
    PREEMPTION_ENDED = "PreemptionEnded"
    #: On a pod cogate preempted: names the PodGroup it made room for.
    PREEMPTED = "Preempted"
    #: On the PodGroup: cogate asked cluster-autoscaler for its missing nodes (a ProvisioningRequest, issue 16).
    PROVISIONING_REQUESTED = "ProvisioningRequested"
    #: On the PodGroup: the request says Provisioned=True (the nodes are there or coming).
    PROVISIONED = "Provisioned"
    #: On the PodGroup (Warning): the request failed, its booking expired before the release, or it could
    #: not be made; cogate asks again (after a back-off when it failed).
    PROVISIONING_FAILED = "ProvisioningFailed"
    #: On the PodGroup (Warning): it stayed below minMember past ``cogate.dev/recovery-deadline`` (or
    #: the back-off after the last round) and its remaining members were evicted once.
    RECOVERY_EVICTED = "RecoveryEvicted"
    #: On the PodGroup (Warning): the recovery's eviction rounds are used up; the group is Failed.
    RECOVERY_FAILED = "RecoveryFailed"
    #: On the PodGroup (Warning): a ``cogate.dev/recovery*`` annotation is not understood (its
    #: default applies).
    INVALID_RECOVERY_POLICY = "InvalidRecoveryPolicy"
    #: On the PodGroup and its operator (Normal): the gang follows the operator's size
    #: (``cogate.dev/follow-owner-size``): minMember is lowered to what the operator keeps.
    FOLLOWING_OWNER_SIZE = "FollowingOwnerSize"
    #: On a gated pod: its label names a PodGroup that does not exist.
    POD_GROUP_NOT_FOUND = "PodGroupNotFound"
    #: On a pod: it left its group while gated, so its gate was removed.
    LEFT_POD_GROUP = "LeftPodGroup"
    #: On a pod: it is stored with ``spec.schedulingGroup`` (or ``spec.workloadRef``), so Kubernetes'
    #: own gang scheduling places it, and cogate's gate was removed.
    NATIVE_GANG_SCHEDULING = "NativeGangScheduling"


class Notice(NamedTuple):
    """One Event to write: ``type`` Normal/Warning, its reason and its message."""

    type: EventType
    reason: Reason
    message: str


def verdict_event(outcome: str, message: str) -> Notice | None:
    """The event for a verdict outcome, or None (Released/AlreadyReleased: see :func:`released`).

    The message is the planner's, as in the ``Released=False`` condition, so both say the same.
    """
    outcome = verdicts.Outcome(outcome)
    if outcome.releases:
        return None
    if outcome is verdicts.Outcome.WAITING_FOR_MEMBERS:
        return Notice(NORMAL, Reason.WAITING_FOR_MEMBERS, message or outcome)
    # Same reason as the Released=False condition (conditions.released_reason): a group larger
    # than the cluster is short of capacity too; its message says so.
    return Notice(WARNING, Reason(released_reason(outcome)), message or outcome)


#: A plain wait for members, as the planner words it ("3 of 8 members present") and nothing more.
_PLAIN_WAIT = re.compile(r"\d+ of \d+ members present")


def plain_wait(outcome: str, message: str) -> bool:
    """Whether a verdict is a plain wait for members: outcome ``WaitingForMembers`` and the
    planner's count alone, "k of N members present" (no quota refusing members, no gang set,
    role or replica waited for, no owner's finding appended). Such a wait is every gang's first
    moment while its owner creates the pods; its Event is held while members still arrive
    (:meth:`cogate.controller.release.ownership.Ownership.arriving`; issue 40). Pure."""
    return outcome == verdicts.Outcome.WAITING_FOR_MEMBERS and _PLAIN_WAIT.fullmatch(message or "") is not None


_NUMBER = re.compile(r"\d+(?:\.\d+)?[A-Za-z]*")
_PLURAL = re.compile(r"(?<=[A-Za-z])s\b")


#: Parts of a waiting message (``"; "``-separated, after :data:`_NUMBER`/:data:`_PLURAL`)
#: that explain rather than state the situation: which nodes are excluded and why, which
#: pods are terminating. They change whenever a node joins (a new node is briefly NotReady
#: and tainted) or a pod ends, while the group waits for the same thing.
_DETAIL = re.compile(r"^# node excluded by |terminating on eligible node")


def situation_key(message: str) -> str:
    """The situation a waiting message describes, without its counts: the key on which
    events for an unchanged situation are de-duplicated
    (:meth:`cogate.controller.kube.events.EventDeduplicator.should_emit`).

    Every number (with a unit or suffix: ``2``, ``1500m``, ``4Gi``, ``312s``) becomes
    ``#``, plural endings are dropped, and the explanatory parts (nodes excluded by a
    filter, pods terminating) are left out, so "fits 3 of 4: cpu short by 2 ...; 2 nodes
    excluded by taint" and "fits 2 of 4: cpu short by 4 ...; 1 node excluded by
    nodeSelector" are one situation (nodes came and went), while a different resource
    short, "no eligible node", starvation, a different blocking group or a quota is
    another. Pure; never raises.
    """
    parts = _PLURAL.sub("", _NUMBER.sub("#", message or "")).split("; ")
    return "; ".join(p for p in parts if not _DETAIL.search(p))


def release_message(release: Mapping[str, str], placement: str, new: bool = False) -> str:
    """Human text for a Released event: how many members and where
    ("released 4 members pinned to planned nodes: node-a x2, node-b x2"); ``new``: members
    that joined an already released group."""
    n = len(release)
    where = Counter(node for node in release.values() if node)
    noun = ("new " if new else "") + ("member" if n == 1 else "members")
    if placement != "pinned" or not where:
        return f"released {n} {noun} (placement by kube-scheduler)"
    parts = ", ".join(f"{node} x{count}" for node, count in sorted(where.items()))
    unpinned = n - sum(where.values())
    extra = f", {unpinned} placed by kube-scheduler" if unpinned else ""
    return f"released {n} {noun} pinned to planned nodes: {parts}{extra}"


def released(release: Mapping[str, str], placement: str, new: bool = False, placed_in: str = "") -> Notice:
    """The Normal ``Released`` event for members ungated (uid -> pinned node, '' for none); ``placed_in``:
    the topology domain they go to (``GroupVerdict.placed_in``: "rack r3", and when wider than the
    PodGroup's preferred level, "block b1 (wider than the preferred rack: ...)")."""
    message = release_message(release, placement, new=new)
    return Notice(NORMAL, Reason.RELEASED, f"{message}; in {placed_in}" if placed_in else message)


def force_released(message: str) -> Notice:
    """The Normal ``ForceReleased`` event (:func:`cogate.controller.release.force.event_message`)."""
    return Notice(NORMAL, Reason.FORCE_RELEASED, message)


def invalid_force_release(message: str) -> Notice:
    """The Warning ``InvalidForceRelease`` event (:func:`cogate.controller.release.force.invalid_message`)."""
    return Notice(WARNING, Reason.INVALID_FORCE_RELEASE, message)


def priority_event(request: verdicts.GroupRequest) -> Notice | None:
    """A Warning ``MixedPriorities`` when a GroupRequest's members differ in priority
    (``verdicts.mixed_priorities``; the group is ordered by the highest)."""
    if not verdicts.mixed_priorities(request):
        return None
    prios = {p.priority for p in request.members}
    return Notice(WARNING, Reason.MIXED_PRIORITIES,
                  f"members have priorities {min(prios)}..{max(prios)}; the group is ordered by the highest")


def replicas_share(message: str) -> Notice:
    """The Warning ``ReplicasSharePodGroup`` (:func:`cogate.controller.model.replicas.shared_message`)."""
    return Notice(WARNING, Reason.REPLICAS_SHARE_POD_GROUP, message)


def timed_out(message: str) -> Notice:
    """The Warning ``Timeout`` event; ``message`` is the ``TimedOut`` condition's."""
    return Notice(WARNING, Reason.TIMEOUT, message)


def recovery_evicted(count: int, rounds: int, limit: int, state: str, *, failed: int = 0, going: int = 0) -> Notice:
    """The Warning ``RecoveryEvicted`` event of one round of the recovery deadline: ``count``
    members evicted; ``failed``: evictions the API server did not take (tried again every 5 s,
    ``aftercare.RETRY_EVICTION_SECONDS``); ``going``: victims an earlier round evicted that the controller's view still shows
    (not evicted twice)."""
    if count:
        did = (f"evicted {count} remaining members with a controller owner so the gang frees its room and "
               "re-forms whole")
    elif going:
        did = f"nothing placed to evict ({going} members evicted in an earlier round are still going)"
    elif failed:
        did = "evicted none"
    else:
        did = "nothing placed to evict (the members came back and wait gated)"
    if failed:
        did += f"; {failed} evictions failed, tried again every 5 s (the controller's log says why)"
    return Notice(WARNING, Reason.RECOVERY_EVICTED, f"eviction round {rounds} of {limit}: {did}; {state}")


def recovery_evicted_again(count: int, failed: int, rounds: int, limit: int) -> Notice:
    """The Warning ``RecoveryEvicted`` event when evictions of round ``rounds`` that had failed
    went through on a later pass (``failed``: those that failed again, tried again)."""
    rest = f"; {failed} failed again, tried again every 5 s" if failed else ""
    return Notice(WARNING, Reason.RECOVERY_EVICTED,
                  f"eviction round {rounds} of {limit}: evicted {count} more remaining members whose eviction "
                  f"had failed{rest}")


def recovery_failed(state: str) -> Notice:
    """The Warning ``RecoveryFailed`` event: the rounds are used up, the group is Failed."""
    return Notice(WARNING, Reason.RECOVERY_FAILED, state)


def invalid_recovery_policy(problems: Sequence[str]) -> Notice:
    """The Warning ``InvalidRecoveryPolicy`` event naming the annotations not understood."""
    return Notice(WARNING, Reason.INVALID_RECOVERY_POLICY,
                  "; ".join(problems) + " (each read as its default: recovery free, no deadline, limit 3)")


def evicted_after_timeout(count: int, failed: int = 0) -> Notice:
    """The Warning ``Timeout`` event saying how many members ``--evict-on-timeout`` evicted
    (``failed``: evictions the API server refused or did not answer; not tried again)."""
    return Notice(WARNING, Reason.TIMEOUT,
                  f"evicted {count} members with a controller owner after the schedule timeout "
                  f"(bound ones, and unbound ones held on their pinned node); they return gated{failed_evictions(failed)}")


def failed_evictions(failed: int) -> str:
    """``"; 2 evictions failed (the controller's log says why)"`` for the once-per-release eviction
    policies' messages, ``""`` for none."""
    return f"; {failed} evictions failed (the controller's log says why)" if failed else ""


def pod_group_not_found(p: PodInfo) -> Notice:
    """The Normal ``PodGroupNotFound`` event on a gated member whose PodGroup does not exist."""
    return Notice(NORMAL, Reason.POD_GROUP_NOT_FOUND,
                  f"PodGroup {p.namespace}/{p.group} does not exist: the pod stays behind the scheduling "
                  f"gate until a PodGroup of that name is created in namespace {p.namespace}")


def left_pod_group(group: str) -> Notice:
    """The Normal ``LeftPodGroup`` event on a pod that left PodGroup ``group`` while gated."""
    return Notice(NORMAL, Reason.LEFT_POD_GROUP,
                  f"label {api.POD_GROUP_LABEL} no longer names PodGroup {group!r}: "
                  "scheduling gate removed, the pod is scheduled on its own")


def native_gang_scheduling(field: str, group: str) -> Notice:
    """The Normal ``NativeGangScheduling`` event on a labelled pod (label value ``group``) stored with
    native gang field ``field`` (``"spec.schedulingGroup"``, ``"spec.workloadRef"``) whose cogate gate
    was removed (:mod:`cogate.controller.release.strays`)."""
    return Notice(NORMAL, Reason.NATIVE_GANG_SCHEDULING,
                  f"{field} kept by the API server: Kubernetes' own gang scheduling places the pod, not "
                  f"PodGroup {group[:63]!r}; scheduling gate removed")


def invalid_member(pod_name: str, exc: Exception) -> Notice:
    """The Warning ``InvalidObject`` event on a PodGroup one of whose members failed conversion:
    the pod's name and the first line of the error (which names the field)."""
    text = str(exc)
    return Notice(WARNING, Reason.INVALID_OBJECT,
                  f"pod {pod_name}: {text.splitlines()[0] if text else type(exc).__name__}")


def invalid_podgroup(exc: Exception) -> Notice:
    """The Warning ``InvalidObject`` event on a PodGroup that failed validation (one line, at
    most 1000 characters)."""
    return Notice(WARNING, Reason.INVALID_OBJECT, " ".join(str(exc).split())[:1000])


def planned_node_unusable(message: str) -> Notice:
    """The Warning ``PlannedNodeUnusable`` event (:func:`cogate.controller.status.lifecycle.stuck_message`)."""
    return Notice(WARNING, Reason.PLANNED_NODE_UNUSABLE, message)


def node_not_ready(message: str) -> Notice:
    """The Warning ``NodeNotReady`` event (:func:`cogate.controller.status.notready.message`)."""
    return Notice(WARNING, Reason.NODE_NOT_READY, message)


def release_refused(answers: Mapping[str, str], released: int, retry_in: float) -> Notice:
    """The Warning ``ReleaseRefused`` event: which members' release patch the API server refused
    (``{pod name: its answer}``), how many members were released anyway, when it is tried again."""
    return Notice(WARNING, Reason.RELEASE_REFUSED, refusal_message(answers, released, retry_in))


def refusal_message(answers: Mapping[str, str], released: int, retry_in: float) -> str:
    """"the API server refused the release patch of pod k-3: <answer>; no gate removed; retrying in 10s"."""
    names = sorted(answers)
    what = "; ".join(f"pod {n}: {answers[n]}" for n in names[:3])
    more = f"; and {len(names) - 3} more" if len(names) > 3 else ""
    done = ("no gate removed (validated with a dry run first)" if released == 0
            else f"{released} other members were released")
    return f"the API server refused the release patch of {what}{more}; {done}; retrying in {int(retry_in)}s"


def member_lost(message: str) -> Notice:
    """The Warning ``MemberLost`` event (:func:`cogate.controller.status.lifecycle.lost_message`)."""
    return Notice(WARNING, Reason.MEMBER_LOST, message)


def ungated_without_release(message: str) -> Notice:
    """The Warning ``UngatedWithoutRelease`` event (:func:`cogate.controller.status.lifecycle.runners_message`)."""
    return Notice(WARNING, Reason.UNGATED_WITHOUT_RELEASE, message)


def quorum_lost(message: str) -> Notice:
    """The Warning ``QuorumLost`` event of the ``--evict-below-quorum`` policy."""
    return Notice(WARNING, Reason.QUORUM_LOST, message)


def waiting_for_capacity(message: str) -> Notice:
    """The Normal ``WaitingForCapacity`` event: members of a released group wait gated for room."""
    return Notice(NORMAL, Reason.WAITING_FOR_CAPACITY, message)


def owner_cannot_complete(message: str, warning: bool = True) -> Notice:
    """The ``OwnerCannotComplete`` event (:func:`cogate.controller.release.owners.judge`'s message): a
    Warning, or Normal when the owners only wait (a suspended Job) or are done (a complete one)."""
    return Notice(WARNING if warning else NORMAL, Reason.OWNER_CANNOT_COMPLETE, message)


def following_owner_size(message: str) -> Notice:
    """The Normal ``FollowingOwnerSize`` event (:func:`cogate.controller.release.operators.judge`)."""
    return Notice(NORMAL, Reason.FOLLOWING_OWNER_SIZE, message)


def staged_creation(message: str) -> Notice:
    """The Warning ``StagedCreation`` event (:func:`cogate.controller.release.stages.staged`'s message)."""
    return Notice(WARNING, Reason.STAGED_CREATION, message)


def pdb_conflict(name: str) -> Notice:
    """The Warning ``PodDisruptionBudgetConflict`` event: the budget's name is taken."""
    return Notice(WARNING, Reason.POD_DISRUPTION_BUDGET_CONFLICT,
                  f"a PodDisruptionBudget named {name} exists and was not made by cogate: left alone, "
                  "the group gets no budget from cogate")


def preempting(message: str) -> Notice:
    """The Normal ``Preempting`` event on a PodGroup cogate preempts for (``message``: the selection's
    line, "preempting 3 pods (ns/a, ns/b, ns/c) of priority <= 100 on nodes n1, n2 to place ...")."""
    return Notice(NORMAL, Reason.PREEMPTING, message)


def preemption_ended(reason: str, message: str) -> Notice:
    """The Warning ``PreemptionEnded`` event on a PodGroup whose preemption ended without placing it."""
    return Notice(WARNING, Reason.PREEMPTION_ENDED, f"{reason}: {message}")


def provisioning_requested(message: str) -> Notice:
    """The Normal ``ProvisioningRequested`` event on a PodGroup cogate asked nodes for (``message``:
    the request, its class, the pods asked for)."""
    return Notice(NORMAL, Reason.PROVISIONING_REQUESTED, message)


def provisioned(message: str) -> Notice:
    """The Normal ``Provisioned`` event: the group's request says ``Provisioned=True``."""
    return Notice(NORMAL, Reason.PROVISIONED, message)


def provisioning_failed(message: str) -> Notice:
    """The Warning ``ProvisioningFailed`` event: the group's request failed, expired or could not be made."""
    return Notice(WARNING, Reason.PROVISIONING_FAILED, message)


def preempted(group: str, priority: int, node: str) -> Notice:
    """The Normal ``Preempted`` event on a victim (kube-scheduler's says "Preempted by pod <uid> on
    node <n>"): the PodGroup ``group`` (``ns/name``) it made room for."""
    return Notice(NORMAL, Reason.PREEMPTED,
                  f"Preempted by cogate to place PodGroup {group} (priority {priority}) on node {node}")


def disruption_message(group: str, priority: int) -> str:
    """The ``DisruptionTarget`` message on a pod cogate preempts for PodGroup ``group`` (``ns/name``);
    read back by :func:`disruption_group`."""
    return f"cogate: preempting to place PodGroup {group} (priority {priority})"


_DISRUPTION_RE = re.compile(r"cogate: preempting to place PodGroup ([^/\s]+)/([^/\s]+) \(priority (-?\d+)\)")


def disruption_group(message: str) -> tuple[str, str, int] | None:
    """``(namespace, name, priority)`` of the PodGroup a :func:`disruption_message` names, None
    when ``message`` is not one (another writer's, or garbage)."""
    m = _DISRUPTION_RE.fullmatch(message)
    return (m.group(1), m.group(2), int(m.group(3))) if m else None


def log_extra(namespace: str, name: str) -> dict[str, str]:
    """``extra=`` of a log line about PodGroup ``namespace/name``: the ``podgroup`` attribute the
    log formatters render (the message names the group too, so it reads on its own)."""
    return {"podgroup": f"{namespace}/{name}"}


@dataclass(frozen=True)
class ObjectRef:
    """The involved object of an Event (a PodGroup): ``uid`` may be '' if unknown."""

    namespace: str
    name: str
    uid: str = ""
    kind: str = api.KIND
    api_version: str = api.API_VERSION
    resource_version: str = ""

    def log_extra(self) -> dict[str, str] | None:
        """``extra=`` of a log line about this object: the ``podgroup`` attribute when it is a PodGroup."""
        return log_extra(self.namespace, self.name) if self.kind == api.KIND else None

    def to_api(self) -> dict[str, str]:
        out = {"apiVersion": self.api_version, "kind": self.kind, "namespace": self.namespace, "name": self.name}
        if self.uid:
            out["uid"] = self.uid
        if self.resource_version:
            out["resourceVersion"] = self.resource_version
        return out
