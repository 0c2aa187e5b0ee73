"""PodGroup status from its live members and the planner's verdict (pure).

:func:`compute_status` is the one place for the phase rule and the conditions;
:func:`status_patch` turns the result into the merge-patch body for the status
subresource, or ``None`` when nothing changed, so status is written only on change.

Phase (docs/semantics.md; names from scheduler-plugins' PodGroup): one ordered decision,
the first rule that holds wins. ``m`` is ``spec.minMember``; a member is *bound* when
it has a ``nodeName`` (any pod phase; ``status.scheduled`` counts these), *placed*
when bound and not Failed, *active* when its phase is neither Succeeded nor Failed.

====  ==========  =====================================================================
 #    phase       holds when
====  ==========  =====================================================================
 1    Finished    ``succeeded >= m`` and no member is active
 2    Failed      some member failed and the members not failed are fewer than ``m``
                  (the quorum is lost through failures; a replacement member brings
                  the group back)
 3    Running     at least one member running and ``running + succeeded >= m``
                  (succeeded members keep counting, as in scheduler-plugins)
 4    Scheduled   ``placed >= m`` (bound and not Failed)
 5    Scheduling  released (status records the release, or the verdict releases now)
 6    Pending     otherwise
====  ==========  =====================================================================

Finished and Failed are kept while no member is active (a Job's pods may be deleted
after they end; the group stays Finished instead of sliding back to Scheduling).

Conditions (metav1.Condition; ``lastTransitionTime`` moves only when ``status`` does):

- ``Released``: ``True``/``Released`` once the group is released (message from the
  verdict that released it); before that ``False`` with the planner's outcome as reason
  (``WaitingForMembers``, ``InsufficientCapacity``, ``ExceedsClusterCapacity``,
  ``Unschedulable``) and its message (e.g. "fits 3 of 4: cpu short by 2").
  Left as it is when there is no verdict.
- ``TimedOut``: ``True``/``TimedOut`` when ``scheduleTimeoutSeconds`` (> 0) have passed
  since ``scheduleStartTime`` and fewer than ``m`` members are placed; ``False``/
  ``MembersBound`` once ``m`` are placed after a timeout. Absent otherwise.
  ``scheduleTimeoutSeconds: 0`` (or unset) disables the timeout.

``scheduleStartTime`` is set when the verdict releases the group and is never changed
afterwards. ``occupiedBy`` is kept as it is.

Inputs use the documented records (docs/internals.md) by attribute name only:
members are ``cogate.controller.records.PodInfo`` (``namespace``, ``labels``,
``node_name``, ``phase``, ``deleting``); the verdict is
``cogate.controller.planner.GroupVerdict`` (``outcome``, ``message``, ``fits``).
Times are float epoch seconds (UTC).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from cogate.api import DEFAULT_GATE_NAME, POD_GROUP_LABEL
from cogate.controller.planner import Outcome
from cogate.models import Condition, PodGroup, PodGroupStatus, format_time, parse_time

__all__ = [
    "CONDITION_RELEASED",
    "CONDITION_TIMED_OUT",
    "CONDITION_FITS_CLUSTER",
    "released_reason",
    "Counts",
    "count_members",
    "decide_phase",
    "timeout_deadline",
    "compute_status",
    "status_patch",
    "release_stands",
    "condition",
]

CONDITION_RELEASED = "Released"
CONDITION_TIMED_OUT = "TimedOut"
#: Whether the group fits the cluster at all (every eligible node empty). False with reason
#: ``ExceedsClusterCapacity`` marks a group that waits for the cluster to grow, not for room.
CONDITION_FITS_CLUSTER = "FitsCluster"


def released_reason(outcome: str) -> str:
    """Reason of ``Released=False`` (and of the matching event) for a planner outcome.

    A group short of capacity is reported as ``InsufficientCapacity`` whether the room is
    taken (it waits for it) or never existed (planner outcome ``ExceedsClusterCapacity``,
    which the ``FitsCluster`` condition marks separately): users look for one reason that
    says "not enough room", and the message says how much ("fits 3 of 4: cpu short by 2").
    """
    outcome = Outcome(outcome)
    return Outcome.INSUFFICIENT_CAPACITY if outcome is Outcome.EXCEEDS_CLUSTER_CAPACITY else outcome


TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
#: Status fields cogate writes (a merge patch nulls only these when they disappear).
STATUS_FIELDS = ("phase", "scheduled", "running", "succeeded", "failed", "scheduleStartTime", "occupiedBy", "conditions")


class _Member(Protocol):
    namespace: str
    labels: Mapping[str, str]
    node_name: str
    phase: str
    deleting: bool


class _Verdict(Protocol):
    outcome: str
    message: str


class Counts(NamedTuple):
    """Counts over a group's live members."""

    members: int
    bound: int  #: members with a nodeName, any phase (status.scheduled)
    placed: int  #: bound members not Failed (the ones that count toward a bound quorum)
    active: int  #: members not Succeeded/Failed
    running: int
    succeeded: int
    failed: int


def count_members(pg: PodGroup, members: Sequence[_Member]) -> Counts:
    """Count the live members of ``pg`` in ``members``.

    Pods that are deleting, in another namespace or labelled for another group are
    ignored (docs/semantics.md: a member is a pod of the PodGroup's namespace whose label
    names it and that has no deletionTimestamp).
    """
    n = bound = placed = active = running = succeeded = failed = 0
    for p in members:
        if getattr(p, "deleting", False) or getattr(p, "namespace", None) != pg.namespace:
            continue
        if (getattr(p, "labels", None) or {}).get(POD_GROUP_LABEL) != pg.name:
            continue
        n += 1
        phase = getattr(p, "phase", "") or ""
        if getattr(p, "node_name", ""):
            bound += 1
            placed += phase != "Failed"
        if phase not in TERMINAL_PHASES:
            active += 1
        running += phase == "Running"
        succeeded += phase == "Succeeded"
        failed += phase == "Failed"
    return Counts(n, bound, placed, active, running, succeeded, failed)


def decide_phase(min_member: int, c: Counts, released: bool, previous: str | None = None) -> str:
    """The phase for ``min_member`` and counts ``c`` (rules table in the module docstring).

    ``previous`` is the phase currently in status: Finished/Failed are kept while no
    member is active. Raises ``ValueError`` if ``min_member < 1``.
    """
    if min_member < 1:
        raise ValueError(f"spec.minMember must be >= 1, got {min_member}")
    m = min_member
    if previous in ("Finished", "Failed") and c.active == 0:
        return previous
    if c.succeeded >= m and c.active == 0:
        return "Finished"
    if c.failed > 0 and c.members - c.failed < m:
        return "Failed"
    if c.running > 0 and c.running + c.succeeded >= m:
        return "Running"
    if c.placed >= m:
        return "Scheduled"
    if released:
        return "Scheduling"
    return "Pending"


def release_stands(status: PodGroupStatus, members: Sequence[Any] = (), gate: str = DEFAULT_GATE_NAME) -> bool:
    """The status records a release that still stands (the planner's ``GroupRequest.released``).

    A release is recorded by ``scheduleStartTime`` with a phase other than Pending. It stops
    standing only when the group timed out (condition ``TimedOut=True``) or lost its quorum
    through failures (phase ``Failed``), or ``--evict-below-quorum`` evicted the rest of a gang
    that lost its quorum (condition ``Disrupted=True`` reason ``QuorumLost``,
    :mod:`cogate.controller.lifecycle`), **and** members came back behind ``gate`` (pods
    evicted on timeout and recreated, replacements of failed pods): those are then planned
    as a gang again instead of being ungated one by one. Until a member is gated again the
    release stands, so a timed-out group whose members wait in kube-scheduler's queue keeps
    reporting ``Scheduling`` with ``TimedOut=True``. While it stands, new members
    (replacements, Job pods) are ungated as they appear (docs/semantics.md).

    ``members``: the group's live members (objects with ``gated_by(gate)`` and ``bound``).
    """
    if not status.scheduleStartTime or status.phase in (None, "Pending"):
        return False
    timed_out = status.condition(CONDITION_TIMED_OUT)
    disrupted = status.condition("Disrupted")
    lost = (status.phase == "Failed" or (timed_out is not None and timed_out.status == "True")
            or (disrupted is not None and disrupted.status == "True" and disrupted.reason == "QuorumLost"))
    return not lost or not any(m.gated_by(gate) and not m.bound for m in members)


def timeout_deadline(pg: PodGroup) -> float | None:
    """Epoch seconds at which ``pg`` times out if fewer than minMember are bound, or ``None``.

    ``scheduleStartTime + scheduleTimeoutSeconds``; ``None`` when not released yet or
    the timeout is unset or 0. The reconciler requeues the group for this time.
    """
    timeout = pg.spec.scheduleTimeoutSeconds
    if not timeout or not pg.status.scheduleStartTime:
        return None
    return parse_time(pg.status.scheduleStartTime) + timeout


def _condition(old: Condition | None, type_: str, status: str, reason: str, message: str, now: float,
               generation: int | None) -> Condition:
    """A condition; keeps ``old.lastTransitionTime`` when ``status`` did not change."""
    ltt = old.lastTransitionTime if old is not None and old.status == status else format_time(now)
    return Condition(type=type_, status=status, reason=reason, message=message[:32768],
                     lastTransitionTime=ltt, observedGeneration=generation)


#: The one rule for building a condition (public: :mod:`cogate.controller.lifecycle` uses it too).
condition = _condition


def compute_status(pg: PodGroup, members: Sequence[_Member], verdict: _Verdict | None, now: float,
                   gate: str = DEFAULT_GATE_NAME) -> PodGroupStatus:
    """The status ``pg`` should have, from its live ``members`` and the planner's ``verdict``.

    ``verdict`` is ``None`` when the planner did not look at the group in this pass;
    the Released condition is then left as it is. ``now``: epoch seconds, used for
    ``scheduleStartTime`` on release, timeouts and new ``lastTransitionTime`` values.
    Conditions of other types already in status (written by someone else) are kept.
    """
    old = pg.status
    c = count_members(pg, members)
    m = pg.spec.minMember
    outcome = Outcome(verdict.outcome) if verdict is not None else None
    message = str(getattr(verdict, "message", "") or "") if verdict is not None else ""
    stands = release_stands(old, members, gate)
    released = stands or (outcome is not None and outcome.releases)
    start = old.scheduleStartTime
    # A fresh release decision (also a re-release after a timeout or lost quorum) restarts the clock.
    fresh = outcome is Outcome.RELEASED and not stands
    if (released and not start) or fresh:
        start = format_time(now)
    phase = decide_phase(m, c, released, old.phase)
    generation = pg.metadata.generation

    conditions: dict[str, Condition] = {cond.type: cond for cond in old.conditions}
    prev = conditions.get(CONDITION_RELEASED)
    if released:
        if prev is None or prev.status != "True":
            conditions[CONDITION_RELEASED] = _condition(
                prev, CONDITION_RELEASED, "True", "Released",
                message or f"released with {c.members} members for minMember {m}", now, generation)
    elif outcome is not None and outcome.waiting:
        conditions[CONDITION_RELEASED] = _condition(prev, CONDITION_RELEASED, "False", released_reason(outcome),
                                                    message or outcome, now, generation)

    prev = conditions.get(CONDITION_FITS_CLUSTER)
    if outcome is Outcome.EXCEEDS_CLUSTER_CAPACITY:
        conditions[CONDITION_FITS_CLUSTER] = _condition(prev, CONDITION_FITS_CLUSTER, "False", outcome,
                                                        message or outcome, now, generation)
    elif outcome is not None and outcome.fits_empty_cluster and prev is not None and prev.status != "True":
        conditions[CONDITION_FITS_CLUSTER] = _condition(
            prev, CONDITION_FITS_CLUSTER, "True", "FitsEmptyCluster",
            f"minMember {m} fits on the eligible nodes when they have room", now, generation)

    prev = conditions.get(CONDITION_TIMED_OUT)
    timeout = pg.spec.scheduleTimeoutSeconds
    if fresh and prev is not None and prev.status == "True":
        conditions[CONDITION_TIMED_OUT] = _condition(
            prev, CONDITION_TIMED_OUT, "False", "Released",
            f"released again; scheduleTimeoutSeconds counts from {start}", now, generation)
    elif timeout and start and (released or (prev is not None and prev.status == "True")):
        elapsed = now - parse_time(start)
        if c.placed < m and elapsed >= timeout:
            conditions[CONDITION_TIMED_OUT] = _condition(
                prev, CONDITION_TIMED_OUT, "True", "TimedOut",
                f"{c.placed} of minMember {m} members bound within scheduleTimeoutSeconds {timeout}", now, generation)
        elif c.placed >= m and prev is not None and prev.status == "True":
            conditions[CONDITION_TIMED_OUT] = _condition(
                prev, CONDITION_TIMED_OUT, "False", "MembersBound",
                f"{c.placed} of minMember {m} members bound", now, generation)

    return PodGroupStatus(
        phase=phase,
        scheduled=c.bound,
        running=c.running,
        succeeded=c.succeeded,
        failed=c.failed,
        scheduleStartTime=start,
        occupiedBy=old.occupiedBy,
        conditions=list(conditions.values()),
    )


def _normal(status: Mapping[str, Any] | None) -> dict[str, Any]:
    """Known status fields of an API status dict, ``None``/empty dropped; conditions keyed by type."""
    out: dict[str, Any] = {}
    for key in STATUS_FIELDS:
        value = (status or {}).get(key)
        if value is None or (key == "conditions" and not value):
            continue
        out[key] = value
    return out


def status_patch(old: Mapping[str, Any] | None, new: PodGroupStatus) -> dict[str, Any] | None:
    """Merge-patch body (``{"status": {...}}``) taking status ``old`` (API JSON) to ``new``.

    Only changed fields are in the patch; a field cogate writes that ``new`` drops is
    set to ``null``; ``conditions`` is sent whole (a merge patch replaces lists). A
    condition whose ``status`` is unchanged keeps ``old``'s ``lastTransitionTime``.
    Returns ``None`` when nothing changed. Fields unknown to cogate in ``old`` are left alone.
    """
    before = _normal(old if isinstance(old, Mapping) else None)
    old_conditions = {c.get("type"): c for c in before.get("conditions", []) if isinstance(c, Mapping)}
    after = new.to_api()
    if after.get("conditions"):
        fixed = []
        for cond in after["conditions"]:
            prev = old_conditions.get(cond["type"])
            if prev is not None and prev.get("status") == cond["status"] and prev.get("lastTransitionTime"):
                cond = {**cond, "lastTransitionTime": prev["lastTransitionTime"]}
            fixed.append(cond)
        after["conditions"] = fixed
    after = _normal(after)
    body: dict[str, Any] = {}
    for key in STATUS_FIELDS:
        if key in after and before.get(key) != after[key]:
            body[key] = after[key]
        elif key not in after and key in before:
            body[key] = None
    return {"status": body} if body else None
