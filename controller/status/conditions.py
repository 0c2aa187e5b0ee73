"""PodGroup conditions (pure): every condition type cogate writes, its reasons, and its one writer.

Two modules decide from what they see, and this one writes: :func:`cogate.controller.status.status.compute`
(``Released``, ``FitsCluster``, ``TimedOut``: the release, the capacity, the timeout) and
:func:`cogate.controller.status.lifecycle.lifecycle_conditions` (the after-release conditions, from the
shell's findings). Each ``write_*`` function below holds the whole rule of one condition type (and
:func:`refuse_release` the one refusal rule of ``Released``), so each type has one writer.

Types, their statuses and reasons, and their writer:

- ``Released``: True/``Released``; False/:func:`released_reason` of the planner's outcome
  (:func:`write_released`), False/``ReleaseRefused`` (:func:`refuse_release`); True/``ForceReleased``
  (:func:`write_force_released`, the annotation ``cogate.dev/force-release``);
- ``FitsCluster``: False/``ExceedsClusterCapacity``, True/``FitsEmptyCluster``
  (:func:`write_fits_cluster`);
- ``TimedOut``: True/``TimedOut``, False/``MembersBound``, False/``Released``
  (:func:`write_timed_out`);
- ``PlannedNodesUsable``: False/``PlannedNodeUnusable``, ``NodeNotReady``; True/``PlannedNodesUsable``
  (:func:`write_planned_nodes_usable`);
- ``ReleaseAccepted``: False/``ReleaseRefused``, True/``ReleaseAccepted``
  (:func:`write_release_accepted`);
- ``Disrupted``: True/``QuorumLost``, ``MemberLost``, ``UngatedWithoutRelease``;
  False/``Released``, ``MembersPlaced``, ``NoneUngatedWithoutRelease`` (:func:`write_disrupted`);
- ``MembersWaiting``: True/``WaitingForCapacity``, False/``MembersReleased``
  (:func:`write_members_waiting`);
- ``Satisfied`` (the gang's health after its release, both ways): True/``QuorumPlaced``;
  False/``WaitingForQuorum``, ``QuorumLost``, ``RecoveryFailed``, ``Finished`` (:func:`write_satisfied`);
- ``Recovery`` (only with the annotation ``cogate.dev/recovery-deadline``): True/``WaitingForQuorum``,
  ``MembersEvicted``; False/``RecoveryFailed``, ``Recovered`` (:func:`write_recovery`; its message
  holds the recovery's record, :func:`cogate.controller.model.recovery.record_of`);
- ``OwnerCanComplete`` (a RayCluster, MPIJob or PyTorchJob owner): False/``OwnerTooSmall``,
  ``OwnerSuspended``; True/``FollowingOwnerSize``, ``OwnerCanComplete`` (:func:`write_owner_can_complete`,
  called by ``sizing.OwnerSizes.conditions``);
- ``Preempting`` (only with ``--preemption``): True/``Preempting``; False/how it ended
  (``inflight.Step``: ``Placed``, ``VictimsStuck``, ``NominationLost``, ``PlanChanged``,
  ``DoesNotFitAfterPreemption``, ``Superseded``), why nothing is preempted (``preemption.Reason``:
  ``DoesNotFitEvenWithPreemption``, ``PreemptionPolicyNever``, ``NoLowerPriorityPods``, ...),
  ``ReleasedWithoutPreemption``, ``Interrupted`` (a restart lost the record)
  (:func:`write_preempting`, called by ``preempting.Preempting.conditions``).

metav1.Condition rules (:func:`condition`): ``lastTransitionTime`` moves only when ``status``
does; a message is cut at 32768 characters; ``observedGeneration`` is the PodGroup's
``metadata.generation``. Conditions of other types (written by someone else) are kept as they
are. Times are float epoch seconds (UTC).
"""

from __future__ import annotations

from collections.abc import Iterable

from cogate.controller.model.recovery import REASON_RECOVERY_FAILED
from cogate.controller.model.verdicts import Outcome
from cogate.models import Condition, format_time, parse_time

__all__ = [
    "CONDITION_RELEASED",
    "CONDITION_FITS_CLUSTER",
    "CONDITION_TIMED_OUT",
    "CONDITION_PLANNED_NODES_USABLE",
    "CONDITION_RELEASE_ACCEPTED",
    "CONDITION_DISRUPTED",
    "CONDITION_MEMBERS_WAITING",
    "CONDITION_PREEMPTING",
    "CONDITION_PROVISIONING",
    "CONDITION_SATISFIED",
    "CONDITION_RECOVERY",
    "REASON_QUORUM_PLACED",
    "REASON_WAITING_FOR_QUORUM",
    "REASON_RECOVERY_FAILED",
    "REASON_FINISHED",
    "REASON_MEMBERS_EVICTED",
    "REASON_RECOVERED",
    "CONDITION_OWNER_CAN_COMPLETE",
    "REASON_OWNER_TOO_SMALL",
    "REASON_OWNER_SUSPENDED",
    "REASON_FOLLOWING_OWNER_SIZE",
    "REASON_OWNER_CAN_COMPLETE",
    "REASON_PREEMPTING",
    "REASON_PREEMPTION_INTERRUPTED",
    "REASON_RELEASED_WITHOUT_PREEMPTION",
    "REASON_RELEASED",
    "REASON_RELEASE_REFUSED",
    "REASON_FORCE_RELEASED",
    "REASON_FITS_EMPTY_CLUSTER",
    "REASON_MEMBERS_BOUND",
    "REASON_TIMED_OUT",
    "REASON_PLANNED_NODE_UNUSABLE",
    "REASON_PLANNED_NODES_USABLE",
    "REASON_NODE_NOT_READY",
    "REASON_RELEASE_ACCEPTED",
    "REASON_QUORUM_LOST",
    "REASON_MEMBER_LOST",
    "REASON_UNGATED_WITHOUT_RELEASE",
    "REASON_MEMBERS_PLACED",
    "REASON_NONE_UNGATED_WITHOUT_RELEASE",
    "REASON_WAITING_FOR_CAPACITY",
    "REASON_MEMBERS_RELEASED",
    "released_reason",
    "condition",
    "ConditionSet",
    "write_released",
    "refuse_release",
    "write_force_released",
    "write_fits_cluster",
    "write_timed_out",
    "write_planned_nodes_usable",
    "write_release_accepted",
    "write_disrupted",
    "write_members_waiting",
    "write_preempting",
    "write_provisioning",
    "write_satisfied",
    "write_recovery",
    "write_owner_can_complete",
]

# -- types ---------------------------------------------------------------------------------------

#: Whether the group is released (its members' gates removed).
CONDITION_RELEASED = "Released"
#: Whether the group fits the cluster at all (every eligible node empty). False with reason
#: ``ExceedsClusterCapacity`` marks a group that waits for the cluster to grow, not for room.
CONDITION_FITS_CLUSTER = "FitsCluster"
#: Whether the release missed ``scheduleTimeoutSeconds`` (only with a timeout set).
CONDITION_TIMED_OUT = "TimedOut"
#: False while released, unbound members are pinned to a node that can no longer take them, or released
#: members wait for a node that is not Ready.
CONDITION_PLANNED_NODES_USABLE = "PlannedNodesUsable"
#: False while the API server refuses a member's release patch (nothing or only part released).
CONDITION_RELEASE_ACCEPTED = "ReleaseAccepted"
#: True when a member left a released group and fewer than minMember are placed (any departure with recovery
#: whole), a member runs without a release, or the gang lost its quorum.
CONDITION_DISRUPTED = "Disrupted"
#: True while members of a released group wait gated for room (at the release or added since).
CONDITION_MEMBERS_WAITING = "MembersWaiting"
#: True while cogate preempts lower-priority pods to place the group (``--preemption``).
CONDITION_PREEMPTING = "Preempting"
#: True while a ProvisioningRequest asks cluster-autoscaler for the group's missing nodes
#: (``--provisioning-class``); False with how the last one ended.
CONDITION_PROVISIONING = "Provisioning"

#: Whether the released gang holds its quorum: True while minMember members are placed (bound, not
#: Failed), False with the reason when it never had or lost it. Named after the two-way condition
#: proposed for Kubernetes' own gang scheduling (KEP-4671 ``PodGroupSatisfied``), without the kind
#: prefix as cogate's other types (it sits on the PodGroup itself).
CONDITION_SATISFIED = "Satisfied"
#: True while a group below minMember waits for its ``cogate.dev/recovery-deadline`` eviction rounds;
#: False once they are used up (``RecoveryFailed``) or the gang is back (``Recovered``).
CONDITION_RECOVERY = "Recovery"
#: Whether the group's operator (RayCluster, MPIJob, PyTorchJob) keeps enough pods for minMember.
CONDITION_OWNER_CAN_COMPLETE = "OwnerCanComplete"

# -- reasons (Released=False also takes the planner's outcome: released_reason) -----------------

#: ``Released=True``; also ``TimedOut=False`` and ``Disrupted=False`` on a fresh release.
REASON_RELEASED = "Released"
#: ``Released=False`` and ``ReleaseAccepted=False``: the API server refused a release patch.
REASON_RELEASE_REFUSED = "ReleaseRefused"
#: ``Released=True`` when the annotation ``cogate.dev/force-release`` released the group without the
#: gang rule (:mod:`cogate.controller.release.force`); kept while that release stands.
REASON_FORCE_RELEASED = "ForceReleased"
#: ``FitsCluster=True`` (``FitsCluster=False`` has the outcome ``ExceedsClusterCapacity`` as reason).
REASON_FITS_EMPTY_CLUSTER = "FitsEmptyCluster"
#: ``TimedOut=False`` once the release had minMember members placed.
REASON_MEMBERS_BOUND = "MembersBound"
#: ``TimedOut=True``.
REASON_TIMED_OUT = "TimedOut"
REASON_PLANNED_NODE_UNUSABLE = "PlannedNodeUnusable"
REASON_PLANNED_NODES_USABLE = "PlannedNodesUsable"
#: ``PlannedNodesUsable=False``: released members wait, pinned and not bound or bound and not started, for a
#: node that is only not Ready, until their deadline (:mod:`cogate.controller.status.notready`).
REASON_NODE_NOT_READY = "NodeNotReady"
REASON_RELEASE_ACCEPTED = "ReleaseAccepted"
#: ``Disrupted=True`` once ``--evict-below-quorum`` evicted the rest of a gang: the release no
#: longer stands, members that come back gated are planned as a gang again.
REASON_QUORUM_LOST = "QuorumLost"
#: ``Disrupted=True``: members left the released group and fewer than minMember are placed.
REASON_MEMBER_LOST = "MemberLost"
REASON_UNGATED_WITHOUT_RELEASE = "UngatedWithoutRelease"
#: ``Disrupted=False``: minMember members are placed (again, or still after a departure it names).
REASON_MEMBERS_PLACED = "MembersPlaced"
REASON_NONE_UNGATED_WITHOUT_RELEASE = "NoneUngatedWithoutRelease"
REASON_WAITING_FOR_CAPACITY = "WaitingForCapacity"
REASON_MEMBERS_RELEASED = "MembersReleased"
#: ``Satisfied=True``: minMember members placed.
REASON_QUORUM_PLACED = "QuorumPlaced"
#: ``Satisfied=False`` after a release until minMember are placed the first time; ``Recovery=True``
#: below minMember before the first eviction round.
REASON_WAITING_FOR_QUORUM = "WaitingForQuorum"
#: ``Satisfied=False`` once minMember members are done (phase ``Finished``).
REASON_FINISHED = "Finished"
#: ``Recovery=True`` after an eviction round, still below minMember.
REASON_MEMBERS_EVICTED = "MembersEvicted"
#: ``Recovery=False`` once minMember are placed again after a recovery.
REASON_RECOVERED = "Recovered"
#: ``OwnerCanComplete=False``: the operator keeps fewer pods than minMember (a scale-down, an edit).
REASON_OWNER_TOO_SMALL = "OwnerTooSmall"
#: ``OwnerCanComplete=False``: the operator is suspended and keeps no pods until resumed.
REASON_OWNER_SUSPENDED = "OwnerSuspended"
#: ``OwnerCanComplete=True``: the gang follows its operator's size (``cogate.dev/follow-owner-size``).
REASON_FOLLOWING_OWNER_SIZE = "FollowingOwnerSize"
#: ``OwnerCanComplete=True`` again after a ``False``.
REASON_OWNER_CAN_COMPLETE = "OwnerCanComplete"
#: ``Preempting=True``.
REASON_PREEMPTING = "Preempting"
#: ``Preempting=False`` after a restart lost the record of the preemption in flight.
REASON_PREEMPTION_INTERRUPTED = "Interrupted"
#: ``Preempting=False`` once a group whose last selection preempted nothing is released anyway.
REASON_RELEASED_WITHOUT_PREEMPTION = "ReleasedWithoutPreemption"


def released_reason(outcome: str) -> str:
    """Reason of ``Released=False`` (and of the matching event) for a planner outcome.

    A group short of capacity is reported as ``InsufficientCapacity`` whether the room is
    taken (it waits for it) or never existed (planner outcome ``ExceedsClusterCapacity``,
    which the ``FitsCluster`` condition marks separately): users look for one reason that
    says "not enough room", and the message says how much ("fits 3 of 4: cpu short by 2").
    """
    outcome = Outcome(outcome)
    return Outcome.INSUFFICIENT_CAPACITY if outcome is Outcome.EXCEEDS_CLUSTER_CAPACITY else outcome


def condition(old: Condition | None, type_: str, status: str, reason: str, message: str, now: float,
              generation: int | None) -> Condition:
    """A condition; keeps ``old.lastTransitionTime`` when ``status`` did not change (metav1.Condition)."""
    ltt = old.lastTransitionTime if old is not None and old.status == status else format_time(now)
    return Condition(type=type_, status=status, reason=reason, message=message[:32768],
                     lastTransitionTime=ltt, observedGeneration=generation)


class ConditionSet:
    """The conditions of one status being computed, by type: a working copy the writers change.

    ``existing``: the conditions as they are (their types keep their order; a type written for
    the first time is appended); ``now`` (epoch seconds) and ``generation`` (the PodGroup's
    ``metadata.generation``) go into every condition written. :meth:`to_list` is the result.
    """

    def __init__(self, existing: Iterable[Condition], now: float, generation: int | None) -> None:
        self._by_type: dict[str, Condition] = {c.type: c for c in existing}
        self.now = now
        self.generation = generation

    def get(self, type_: str) -> Condition | None:
        return self._by_type.get(type_)

    def has(self, type_: str, status: str) -> bool:
        """A condition of ``type_`` with ``status`` is there."""
        prev = self._by_type.get(type_)
        return prev is not None and prev.status == status

    def put(self, type_: str, status: str, reason: str, message: str) -> None:
        self._by_type[type_] = condition(self._by_type.get(type_), type_, status, reason, message, self.now,
                                         self.generation)

    def flip_back(self, type_: str, bad: str, status: str, reason: str, message: str) -> None:
        """Put the condition back to ``status`` only while it is ``bad`` (never created as "fine")."""
        if self.has(type_, bad):
            self.put(type_, status, reason, message)

    def to_list(self) -> list[Condition]:
        return list(self._by_type.values())


# -- written by status.compute ----------------------------------------------------------------------


def write_released(conds: ConditionSet, *, released: bool, outcome: Outcome | None, message: str,
                   members: int, min_member: int, again: str = "", note: str = "") -> None:
    """``Released``: ``True``/``Released`` once the group is ``released`` (the verdict's ``message``,
    else "released with <members> members for minMember <m>"; an earlier ``True`` is kept as it
    is); before that ``False`` with :func:`released_reason` of the planner's ``outcome`` (when it
    waits: ``WaitingForMembers``, ``InsufficientCapacity``, ``Unschedulable``) and its message
    (e.g. "fits 3 of 4: cpu short by 2"), after ``again`` (a recorded release that ended and is
    decided again: :func:`cogate.controller.status.status.again_text`) and followed by ``note`` (Succeeded
    members not counted: :func:`cogate.controller.status.status.succeeded_note`). Left as it is without a
    verdict (``outcome`` ``None``)."""
    if released:
        if not conds.has(CONDITION_RELEASED, "True"):
            conds.put(CONDITION_RELEASED, "True", REASON_RELEASED,
                      message or f"released with {members} members for minMember {min_member}")
    elif outcome is not None and outcome.waiting:
        text = message or outcome
        conds.put(CONDITION_RELEASED, "False", released_reason(outcome),
                  "; ".join(t for t in (again, text, note) if t))


def refuse_release(conds: ConditionSet, answer: str) -> None:
    """``Released=False``/``ReleaseRefused`` with the API server's ``answer`` when the release is not
    ``True`` (nothing was released: the refusal was known before any gate was removed)."""
    if not conds.has(CONDITION_RELEASED, "True"):
        conds.put(CONDITION_RELEASED, "False", REASON_RELEASE_REFUSED, answer)


def write_force_released(conds: ConditionSet, message: str, *, was_released: bool) -> None:
    """``Released``: ``True``/``ForceReleased`` with ``message`` (who set the annotation, how many
    members went) when a force-release releases a group whose written status was not released
    (``was_released``: its ``Released`` condition was ``True`` before this pass); written after
    :func:`write_released`, whose ``True``/``Released`` of this pass it replaces. An earlier ``True``
    (released by the gang rule, or forced before) is kept as it is, like :func:`write_released`."""
    if not was_released:
        conds.put(CONDITION_RELEASED, "True", REASON_FORCE_RELEASED, message)


def write_fits_cluster(conds: ConditionSet, *, outcome: Outcome | None, message: str, min_member: int) -> None:
    """``FitsCluster``: ``False``/``ExceedsClusterCapacity`` (the planner's message) while even an
    empty cluster could not hold minMember; back to ``True``/``FitsEmptyCluster`` once an outcome
    says it fits an empty cluster (only after a ``False``: never created as "fine")."""
    prev = conds.get(CONDITION_FITS_CLUSTER)
    if outcome is Outcome.EXCEEDS_CLUSTER_CAPACITY:
        conds.put(CONDITION_FITS_CLUSTER, "False", outcome, message or outcome)
    elif outcome is not None and outcome.fits_empty_cluster and prev is not None and prev.status != "True":
        conds.put(CONDITION_FITS_CLUSTER, "True", REASON_FITS_EMPTY_CLUSTER,
                  f"minMember {min_member} fits on the eligible nodes when they have room")


def write_timed_out(conds: ConditionSet, *, timeout: int | None, start: str | None, fresh: bool, released: bool,
                    window_closed: bool, quorum_placed: int, placed: int, min_member: int,
                    since: float | None = None) -> None:
    """``TimedOut`` (only with ``scheduleTimeoutSeconds`` ``timeout`` > 0): the timeout judges one
    window, from ``start`` (``scheduleStartTime``) until the group *first* has minMember members
    placed (``quorum_placed``: placed ones and succeeded ones deleted since). The clock measures
    lack of progress: it runs from ``since`` (epoch seconds: when a member last bound, at the
    earliest ``start``; :class:`cogate.controller.status.status.BindProgress`), so a big gang that is still
    binding (each member bound restarts it) never times out.

    - A ``fresh`` release (after a timeout or a lost quorum) opens a new window:
      ``False``/``Released`` (only when the condition exists).
    - Otherwise, while the window is open (``window_closed``: :func:`cogate.controller.status.status.quorum_reached`
      of the written status) and the group is ``released`` (or the condition is ``True``):
      ``False``/``MembersBound`` once ``quorum_placed >= minMember`` (also healing an earlier
      ``True``; that release can no longer time out: a member lost later is not lateness);
      ``True``/``TimedOut`` when ``timeout`` seconds passed since ``start`` without that
      (message: ``placed`` of minMember members bound).
    """
    if fresh and conds.get(CONDITION_TIMED_OUT) is not None:
        conds.put(CONDITION_TIMED_OUT, "False", REASON_RELEASED,
                  f"released again; scheduleTimeoutSeconds counts from {start}")
    elif timeout and start and not window_closed and (released or conds.has(CONDITION_TIMED_OUT, "True")):
        released_at = parse_time(start)
        elapsed = conds.now - released_at
        idle = conds.now - max(released_at, since if since is not None else released_at)
        if quorum_placed >= min_member:
            conds.put(CONDITION_TIMED_OUT, "False", REASON_MEMBERS_BOUND,
                      f"minMember reached: {quorum_placed} of {min_member} members bound {max(0, int(elapsed))}s "
                      f"after the release (scheduleTimeoutSeconds {timeout}); members lost later do not time "
                      "this release out")
        elif idle >= timeout:
            conds.put(CONDITION_TIMED_OUT, "True", REASON_TIMED_OUT,
                      f"{placed} of minMember {min_member} members bound; no member bound for "
                      f"scheduleTimeoutSeconds {timeout}")


# -- written by lifecycle.lifecycle_conditions --------------------------------------------------------


def write_planned_nodes_usable(conds: ConditionSet, *, stuck: str, placed: int, min_member: int,
                               not_ready: str = "") -> None:
    """``PlannedNodesUsable``, the first that holds:

    - ``False``/``PlannedNodeUnusable`` with the ``stuck`` message
      (:func:`cogate.controller.status.lifecycle.stuck_message`), followed by ``not_ready`` when
      others wait too;
    - ``False``/``NodeNotReady`` with ``not_ready`` (:func:`cogate.controller.status.notready.message`:
      members wait for nodes that are not Ready, and until when);
    - back to ``True``/``PlannedNodesUsable`` from ``NodeNotReady`` at once once nothing waits (the
      node is Ready again, or its members were given up: then ``stuck`` said so first), from
      ``PlannedNodeUnusable`` when nothing is stuck and minMember members are ``placed`` again."""
    if stuck:
        conds.put(CONDITION_PLANNED_NODES_USABLE, "False", REASON_PLANNED_NODE_UNUSABLE,
                  "; ".join(t for t in (stuck, not_ready) if t))
    elif not_ready:
        conds.put(CONDITION_PLANNED_NODES_USABLE, "False", REASON_NODE_NOT_READY, not_ready)
    elif (prev := conds.get(CONDITION_PLANNED_NODES_USABLE)) is not None and prev.status == "False" \
            and prev.reason == REASON_NODE_NOT_READY:
        conds.put(CONDITION_PLANNED_NODES_USABLE, "True", REASON_PLANNED_NODES_USABLE,
                  "no released member waits for a node that is not Ready any more")
    elif placed >= min_member:
        # Not at once when the stuck members are gone: their replacements come back gated and
        # the condition says what happened until the gang is placed again (a flip back within
        # one pass, ~100 ms, was easy to miss in `kubectl get pg -o yaml`).
        conds.flip_back(CONDITION_PLANNED_NODES_USABLE, "False", "True", REASON_PLANNED_NODES_USABLE,
                        "every released, unbound member's planned node can take it")


def write_release_accepted(conds: ConditionSet, *, refused: str, releases: bool) -> None:
    """``ReleaseAccepted``: ``False``/``ReleaseRefused`` with ``refused`` (which member's release
    patch the API server refused, and its answer), with :func:`refuse_release`; back to
    ``True``/``ReleaseAccepted`` when the outcome ``releases`` and nothing was refused."""
    if refused:
        conds.put(CONDITION_RELEASE_ACCEPTED, "False", REASON_RELEASE_REFUSED, refused)
        refuse_release(conds, refused)
    elif releases:
        conds.flip_back(CONDITION_RELEASE_ACCEPTED, "False", "True", REASON_RELEASE_ACCEPTED,
                        "the API server accepted the release patches")


def write_disrupted(conds: ConditionSet, *, quorum_evicted: str, lost: str, runners: str, fresh: bool,
                    placed: int, min_member: int, whole: bool = False) -> None:
    """``Disrupted``, the first that holds: ``True``/``QuorumLost`` (``quorum_evicted``: the text
    of an ``--evict-below-quorum`` eviction), ``True``/``MemberLost`` (``lost``: the departures'
    message) when fewer than ``min_member`` are ``placed`` after them, ``True``/``UngatedWithoutRelease``
    (``runners``: members running without a release). Departures that leave minMember members
    ``placed`` (an operator's scale-down, a member beyond minMember deleted) do not disrupt the
    gang: they are told as ``False``/``MembersPlaced`` with the departures' message.
    A ``True`` condition turns ``False``/``Released`` on a ``fresh`` release,
    ``False``/``MembersPlaced`` (MemberLost) once minMember members are ``placed`` again, and
    ``False``/``NoneUngatedWithoutRelease`` (UngatedWithoutRelease) when none runs so any more.
    With ``whole`` (``cogate.dev/recovery: whole``) every departure is ``True``/``MemberLost`` and
    stays until the fresh release: it is what ends the release
    (:func:`cogate.controller.status.status.release_end`)."""
    prev = conds.get(CONDITION_DISRUPTED)
    if quorum_evicted:
        conds.put(CONDITION_DISRUPTED, "True", REASON_QUORUM_LOST, quorum_evicted)
    elif lost and placed >= min_member and not whole:
        conds.put(CONDITION_DISRUPTED, "False", REASON_MEMBERS_PLACED, lost)
    elif lost:
        conds.put(CONDITION_DISRUPTED, "True", REASON_MEMBER_LOST, lost)
    elif runners:
        conds.put(CONDITION_DISRUPTED, "True", REASON_UNGATED_WITHOUT_RELEASE, runners)
    elif prev is not None and prev.status == "True":
        if fresh:
            conds.put(CONDITION_DISRUPTED, "False", REASON_RELEASED, "released again as a gang")
        elif prev.reason == REASON_MEMBER_LOST and placed >= min_member and not whole:
            conds.put(CONDITION_DISRUPTED, "False", REASON_MEMBERS_PLACED,
                      f"{placed} of minMember {min_member} placed again; last loss: {prev.message}"[:1000])
        elif prev.reason == REASON_UNGATED_WITHOUT_RELEASE:
            conds.put(CONDITION_DISRUPTED, "False", REASON_NONE_UNGATED_WITHOUT_RELEASE,
                      "no member runs without a release any more")


def write_members_waiting(conds: ConditionSet, *, waiting: bool, message: str, outcome: Outcome | None) -> None:
    """``MembersWaiting``: ``True``/``WaitingForCapacity`` while new members of a released group are
    ``waiting`` gated for room (``message``: the planner's); ``False``/``MembersReleased`` once the
    outcome is ``AlreadyReleased`` or ``Released`` and none waits (only after a ``True``)."""
    if waiting:
        conds.put(CONDITION_MEMBERS_WAITING, "True", REASON_WAITING_FOR_CAPACITY, message)
    elif outcome is Outcome.ALREADY_RELEASED or outcome is Outcome.RELEASED:
        conds.flip_back(CONDITION_MEMBERS_WAITING, "True", "False", REASON_MEMBERS_RELEASED,
                        "no new member waits for room")


# -- written by preempting.Preempting.conditions ------------------------------------------------------


def write_provisioning(conds: ConditionSet, *, active: bool, reason: str, message: str) -> None:
    """``Provisioning``: ``True`` while a ProvisioningRequest asks for the group's nodes (``reason``
    ``Requested``, ``NotProvisioned`` or ``Provisioned``: the autoscaler's answer so far), else
    ``False`` with how the last one ended (``Consumed``, ``NotNeeded``, ``Failed``,
    ``BookingExpired``, ``CapacityTaken``, ``CreateFailed``, ``OptedOut``); ``message`` names the request and the
    autoscaler's reason (controller/provisioning/room.py)."""
    conds.put(CONDITION_PROVISIONING, "True" if active else "False", reason, message or reason)


def write_preempting(conds: ConditionSet, *, active: str, reason: str, message: str) -> None:
    """``Preempting``: ``True``/``Preempting`` with ``active`` (the in-flight text: victims, their
    priority, nodes, the group's priority, those still terminating) while a preemption is in flight;
    otherwise ``False`` with ``reason`` and ``message`` when there is one (how the last preemption
    ended, or why none is made); without either a ``True`` left by an earlier process (the record
    is lost on a restart) turns ``False``/``Interrupted``; else it is left as it is."""
    if active:
        conds.put(CONDITION_PREEMPTING, "True", REASON_PREEMPTING, active)
    elif reason:
        conds.put(CONDITION_PREEMPTING, "False", reason, message or reason)
    else:
        conds.flip_back(CONDITION_PREEMPTING, "True", "False", REASON_PREEMPTION_INTERRUPTED,
                        "the controller restarted while preempting (its record is lost); the group is planned "
                        "again and may preempt again")


# -- written by lifecycle.lifecycle_conditions: the gang's health after the start ---------------------


def write_satisfied(conds: ConditionSet, *, released: bool, reached: bool, placed: int, min_member: int,
                    finished: bool, lost: str = "", failed: str = "") -> None:
    """``Satisfied``, both ways (docs/semantics.md "Health after the start"), the first that holds:

    - ``False``/``Finished`` when the group is ``finished`` (only once the condition exists);
    - ``False``/``RecoveryFailed`` with ``failed`` (the recovery's rounds are used up);
    - ``True``/``QuorumPlaced`` while ``placed`` (bound, not Failed; Succeeded ones of the release
      count) reaches ``min_member`` in a ``released`` group, or one that ``reached`` it before;
    - ``False``/``QuorumLost`` when it ``reached`` minMember before (the condition was True, or
      ``QuorumLost``/``RecoveryFailed``) and fewer are placed now (``lost``: who left, this pass, without counts: the message says its own once);
    - ``False``/``WaitingForQuorum`` in a ``released`` group that has not had minMember placed yet.

    Nothing is written before the first release (``Released`` says why the group waits)."""
    prev = conds.get(CONDITION_SATISFIED)
    if finished:
        if prev is not None:
            conds.put(CONDITION_SATISFIED, "False", REASON_FINISHED, f"minMember {min_member} members are done")
    elif failed:
        conds.put(CONDITION_SATISFIED, "False", REASON_RECOVERY_FAILED, failed)
    elif placed >= min_member and (released or reached):
        conds.put(CONDITION_SATISFIED, "True", REASON_QUORUM_PLACED,
                  f"{placed} of minMember {min_member} members placed")
    elif reached:
        text = f"{placed} of minMember {min_member} members placed"
        if lost:
            text = f"{text}; {lost}"
        elif prev is not None and prev.reason == REASON_QUORUM_LOST and prev.message.startswith(text):
            text = prev.message  # keeps who left, while the numbers stand
        conds.put(CONDITION_SATISFIED, "False", REASON_QUORUM_LOST, text[:1000])
    elif released:
        conds.put(CONDITION_SATISFIED, "False", REASON_WAITING_FOR_QUORUM,
                  f"{placed} of minMember {min_member} members placed since the release")


def write_recovery(conds: ConditionSet, *, active: bool, evicted: bool, failed: bool, message: str) -> None:
    """``Recovery`` (only with ``cogate.dev/recovery-deadline``): ``True`` while ``active`` (below
    minMember after reaching it), reason ``MembersEvicted`` once a round evicted (``evicted``), else
    ``WaitingForQuorum``; ``False``/``RecoveryFailed`` once ``failed``; back to ``False``/``Recovered``
    when no recovery is under way (only after one). ``message``: :func:`cogate.controller.model.recovery.message`,
    the record a restart goes on from."""
    if failed:
        conds.put(CONDITION_RECOVERY, "False", REASON_RECOVERY_FAILED, message)
    elif active:
        conds.put(CONDITION_RECOVERY, "True", REASON_MEMBERS_EVICTED if evicted else REASON_WAITING_FOR_QUORUM,
                  message)
    else:
        prev = conds.get(CONDITION_RECOVERY)
        if prev is not None and (prev.status == "True" or prev.reason == REASON_RECOVERY_FAILED):
            conds.put(CONDITION_RECOVERY, "False", REASON_RECOVERED, "minMember members are placed again")


def write_owner_can_complete(conds: ConditionSet, *, verdict: str, following: str, suspended: bool,
                             fine: str) -> None:
    """``OwnerCanComplete`` (:mod:`cogate.controller.release.operators`): ``False``/``OwnerTooSmall``
    (or ``OwnerSuspended`` when ``suspended``) with ``verdict``, the operator's finding;
    ``True``/``FollowingOwnerSize`` with ``following`` (minMember lowered to the owner's size);
    else back to ``True``/``OwnerCanComplete`` (``fine``: what the owner keeps, or a generic text)
    only after one of those (never created as "fine")."""
    if verdict:
        conds.put(CONDITION_OWNER_CAN_COMPLETE, "False", REASON_OWNER_SUSPENDED if suspended
                  else REASON_OWNER_TOO_SMALL, verdict)
    elif following:
        conds.put(CONDITION_OWNER_CAN_COMPLETE, "True", REASON_FOLLOWING_OWNER_SIZE, following)
    else:
        prev = conds.get(CONDITION_OWNER_CAN_COMPLETE)
        if prev is not None and (prev.status == "False" or prev.reason == REASON_FOLLOWING_OWNER_SIZE):
            conds.put(CONDITION_OWNER_CAN_COMPLETE, "True", REASON_OWNER_CAN_COMPLETE,
                      fine or "the owner keeps at least minMember pods")
