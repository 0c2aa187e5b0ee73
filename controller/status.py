"""PodGroup status from its live members and the planner's verdict (pure).

:func:`compute_status` is the one place for the phase rule and the conditions;
:func:`status_patch` turns the result into the merge-patch body for the status
subresource, or ``None`` when nothing changed, so status is written only on change.

Phase (docs/semantics.md; names from scheduler-plugins' PodGroup): one ordered decision,
the first rule that holds wins. ``m`` is ``spec.minMember``; a member is *bound* when
it has a ``nodeName`` (any pod phase; ``status.scheduled`` counts these), *placed*
when bound and not Failed, *active* when its phase is neither Succeeded nor Failed.
``succeeded`` counts every member that ended Succeeded during the release, also those
deleted since (see "Counts" below).

====  ==========  =====================================================================
 #    phase       holds when
====  ==========  =====================================================================
 1    Finished    ``succeeded >= m`` and no member is active
 2    Failed      some live member failed and the live members not failed are fewer
                  than ``m`` (the quorum is lost through failures; a replacement
                  member brings the group back)
 3    Running     at least one member running and ``running + succeeded >= m``
                  (succeeded members keep counting, as in scheduler-plugins)
 4    Scheduled   ``placed + succeeded members deleted since >= m``
 5    Scheduling  released (status records the release, or the verdict releases now)
 6    Pending     otherwise
====  ==========  =====================================================================

The phase never moves backwards because pods were deleted: Finished and Failed are kept
while no member is active (a Job's pods may be deleted after they end). A Finished group
also stays Finished while members that joined later wait gated: its release is complete
(:func:`release_stands`), so they form a new gang, and the phase is decided afresh only
when that gang is released.

Counts: ``scheduled`` and ``running`` count live members. ``succeeded`` and ``failed``
count the members that ended so during the release (since ``scheduleStartTime``), deleted
ones included, so they never decrease while a release stands; a fresh release counts from
the members that exist then. The members seen ended are kept by the caller
(:class:`EndedMembers`, passed back to :func:`compute`); without it (a restarted
controller), the written counts are the base: ``max(written, live)``. A member that ends
and is deleted while no controller watches may be missed; none is counted twice.

Conditions: :func:`compute` decides ``Released``, ``FitsCluster`` and ``TimedOut`` from the
verdict, the counts and the clock; their rules and their one writer are in
:mod:`cogate.controller.conditions` (:func:`~cogate.controller.conditions.write_released`,
:func:`~cogate.controller.conditions.write_fits_cluster`,
:func:`~cogate.controller.conditions.write_timed_out`). ``Released`` is left as it is when
there is no verdict. The ``TimedOut`` window closes for good once the group first has ``m``
members placed (:func:`quorum_reached`): a member lost later is not lateness (no ``Timeout``
event, no eviction). A phase of ``Scheduled``, ``Running`` or ``Finished`` recorded for the
standing release also counts as quorum reached (status written before the condition existed,
or a timeout added later). ``scheduleTimeoutSeconds: 0`` (or unset) disables the timeout.

``scheduleStartTime`` is set when the verdict releases the group and is never changed
afterwards. ``occupiedBy`` is kept as it is.

Inputs are the documented records (docs/internals.md): members are
:class:`cogate.controller.records.PodInfo` (membership is
:func:`cogate.controller.records.is_member`); the verdict is
``cogate.controller.verdicts.GroupVerdict`` (``outcome``, ``message``, ``fits``).
Times are float epoch seconds (UTC).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from cogate.api import DEFAULT_GATE_NAME
from cogate.controller import conditions as cond_mod
from cogate.controller.conditions import (  # noqa: F401 - public here too (status.CONDITION_TIMED_OUT, ...)
    CONDITION_DISRUPTED,
    CONDITION_FITS_CLUSTER,
    CONDITION_RELEASED,
    CONDITION_TIMED_OUT,
    REASON_MEMBERS_BOUND,
    REASON_QUORUM_LOST,
    condition,
    released_reason,
)
from cogate.controller.verdicts import Outcome
from cogate.controller.records import PodInfo, is_member
from cogate.models import PodGroup, PodGroupStatus, format_time, parse_time

__all__ = [
    "CONDITION_RELEASED",
    "CONDITION_TIMED_OUT",
    "CONDITION_FITS_CLUSTER",
    "released_reason",
    "Counts",
    "EndedMembers",
    "count_members",
    "track_ended",
    "decide_phase",
    "quorum_reached",
    "timeout_deadline",
    "compute",
    "compute_status",
    "status_patch",
    "release_stands",
    "condition",
]

#: Phases that imply minMember members were bound during the standing release.
QUORUM_PHASES = frozenset({"Scheduled", "Running", "Finished"})


TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
#: Status fields cogate writes (a merge patch nulls only these when they disappear).
STATUS_FIELDS = ("phase", "scheduled", "running", "succeeded", "failed", "scheduleStartTime", "occupiedBy", "conditions")


class _Verdict(Protocol):
    outcome: str
    message: str


class Counts(NamedTuple):
    """Counts over a group's live members, plus the members that ended and were deleted since."""

    members: int
    bound: int  #: members with a nodeName, any phase (status.scheduled)
    placed: int  #: bound members not Failed (the ones that count toward a bound quorum)
    active: int  #: members not Succeeded/Failed
    running: int
    succeeded: int
    failed: int
    gone_succeeded: int = 0  #: members that ended Succeeded during the release and are gone (deleted)
    gone_failed: int = 0  #: members that ended Failed during the release and are gone

    @property
    def total_succeeded(self) -> int:
        """Members that ended Succeeded during the release, deleted ones included (status.succeeded)."""
        return self.succeeded + self.gone_succeeded

    @property
    def total_failed(self) -> int:
        """Members that ended Failed during the release, deleted ones included (status.failed)."""
        return self.failed + self.gone_failed

    @property
    def quorum_placed(self) -> int:
        """Members that count toward a bound quorum: placed ones and succeeded ones deleted since."""
        return self.placed + self.gone_succeeded


class EndedMembers(NamedTuple):
    """Members seen ended during one release, kept by the caller between passes (one per PodGroup).

    ``start``: the release's ``scheduleStartTime`` (``None`` before any release).
    ``base_succeeded``/``base_failed``: members the written status counted that were already
    gone when this process first saw the release (``written - live``, at least 0).
    ``succeeded``/``failed``: uids of members seen Succeeded/Failed since.
    """

    start: str | None
    base_succeeded: int = 0
    base_failed: int = 0
    succeeded: frozenset[str] = frozenset()
    failed: frozenset[str] = frozenset()

    @property
    def total_succeeded(self) -> int:
        return self.base_succeeded + len(self.succeeded)

    @property
    def total_failed(self) -> int:
        return self.base_failed + len(self.failed)


def _live(pg: PodGroup, members: Sequence[PodInfo]) -> list[PodInfo]:
    """Live members of ``pg`` among ``members`` (:func:`cogate.controller.records.is_member`)."""
    return [p for p in members if is_member(p, pg.namespace, pg.name)]


def track_ended(prev: EndedMembers | None, status: PodGroupStatus, pg: PodGroup, members: Sequence[PodInfo],
                start: str | None, fresh: bool) -> EndedMembers:
    """The members seen ended during the release that starts at ``start``, after this pass.

    ``prev``: what the caller kept from the previous pass (or ``None``); ``status``: the
    written status; ``fresh``: this pass records a new release (counting restarts from the
    live members). When ``prev`` belongs to another release (or is ``None``), the written
    counts of the same release are the base: members they counted that are no longer live.
    """
    live = _live(pg, members)
    succeeded = frozenset(p.uid for p in live if p.phase == "Succeeded")
    failed = frozenset(p.uid for p in live if p.phase == "Failed")
    if fresh:
        return EndedMembers(start, 0, 0, succeeded, failed)
    if prev is None or prev.start != start:
        same = status.scheduleStartTime == start
        base_s = max(0, (status.succeeded or 0) - len(succeeded)) if same else 0
        base_f = max(0, (status.failed or 0) - len(failed)) if same else 0
        return EndedMembers(start, base_s, base_f, succeeded, failed)
    return prev._replace(succeeded=prev.succeeded | succeeded, failed=prev.failed | failed)


def count_members(pg: PodGroup, members: Sequence[PodInfo]) -> Counts:
    """Count the live members of ``pg`` in ``members``.

    Pods that are deleting, in another namespace or labelled for another group are
    ignored (the membership rule: :func:`cogate.controller.records.member_key`).
    """
    n = bound = placed = active = running = succeeded = failed = 0
    for p in _live(pg, members):
        n += 1
        phase = p.phase
        if p.bound:
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
    member is active, and Finished also while the group is not released (members that
    joined a finished group wait gated for a new gang release). Raises ``ValueError`` if
    ``min_member < 1``.
    """
    if min_member < 1:
        raise ValueError(f"spec.minMember must be >= 1, got {min_member}")
    m = min_member
    if previous in ("Finished", "Failed") and c.active == 0:
        return previous
    if previous == "Finished" and not released:
        return previous
    if c.total_succeeded >= m and c.active == 0:
        return "Finished"
    if c.failed > 0 and c.members - c.failed < m:
        return "Failed"
    if c.running > 0 and c.running + c.total_succeeded >= m:
        return "Running"
    if c.quorum_placed >= m:
        return "Scheduled"
    if released:
        return "Scheduling"
    return "Pending"


def release_stands(status: PodGroupStatus, members: Sequence[PodInfo] = (), gate: str = DEFAULT_GATE_NAME) -> bool:
    """The status records a release that still stands (the planner's ``GroupRequest.released``).

    A release is recorded by ``scheduleStartTime`` with a phase other than Pending. It stops
    standing only when the group timed out (condition ``TimedOut=True``), lost its quorum
    through failures (phase ``Failed``), finished (phase ``Finished``: its work is done) or
    ``--evict-below-quorum`` evicted the rest of a gang that lost its quorum (condition
    ``Disrupted=True`` reason ``QuorumLost``, :mod:`cogate.controller.lifecycle`), **and**
    members came back behind ``gate`` (pods evicted on timeout and recreated, replacements of
    failed pods, new pods labelled for a finished group): those are then planned as a gang
    again instead of being ungated one by one. Members that still exist
    count toward that gang (the planner counts Succeeded members as bound, as
    scheduler-plugins' Permit counts a group's pods on nodes), so a Job's next wave is
    released at once while its finished pods exist. Until a member is gated again the
    release stands, so a timed-out group whose members wait in kube-scheduler's queue keeps
    reporting ``Scheduling`` with ``TimedOut=True``. While it stands, new members
    (replacements, Job pods) are ungated as they appear (docs/semantics.md).

    ``members``: the group's live members.
    """
    if not status.scheduleStartTime or status.phase in (None, "Pending"):
        return False
    timed_out = status.condition(CONDITION_TIMED_OUT)
    disrupted = status.condition(CONDITION_DISRUPTED)
    lost = (status.phase in ("Failed", "Finished") or (timed_out is not None and timed_out.status == "True")
            or (disrupted is not None and disrupted.status == "True" and disrupted.reason == REASON_QUORUM_LOST))
    return not lost or not any(m.gated_by(gate) and not m.bound for m in members)


def quorum_reached(status: PodGroupStatus) -> bool:
    """The standing release has had minMember members placed at some point (its timeout
    window is closed): condition ``TimedOut=False`` with reason ``MembersBound``, or a
    recorded phase of ``Scheduled``, ``Running`` or ``Finished`` (each implies ``m`` members
    were bound during the release). ``False`` before any release."""
    if not status.scheduleStartTime:
        return False
    cond = status.condition(CONDITION_TIMED_OUT)
    if cond is not None and cond.status == "False" and cond.reason == REASON_MEMBERS_BOUND:
        return True
    return status.phase in QUORUM_PHASES


def timeout_deadline(pg: PodGroup) -> float | None:
    """Epoch seconds at which ``pg`` times out if fewer than minMember are bound, or ``None``.

    ``scheduleStartTime + scheduleTimeoutSeconds``; ``None`` when not released yet, the
    timeout is unset or 0, or the release already had minMember members placed
    (:func:`quorum_reached`). The reconciler requeues the group for this time.
    """
    timeout = pg.spec.scheduleTimeoutSeconds
    if not timeout or not pg.status.scheduleStartTime or quorum_reached(pg.status):
        return None
    return parse_time(pg.status.scheduleStartTime) + timeout


def compute_status(pg: PodGroup, members: Sequence[PodInfo], verdict: _Verdict | None, now: float,
                   gate: str = DEFAULT_GATE_NAME, ended: EndedMembers | None = None) -> PodGroupStatus:
    """The status ``pg`` should have (:func:`compute` without the members seen ended)."""
    return compute(pg, members, verdict, now, gate, ended)[0]


def compute(pg: PodGroup, members: Sequence[PodInfo], verdict: _Verdict | None, now: float,
            gate: str = DEFAULT_GATE_NAME, ended: EndedMembers | None = None
            ) -> tuple[PodGroupStatus, EndedMembers]:
    """The status ``pg`` should have, from its live ``members`` and the planner's ``verdict``,
    and the members seen ended to pass back as ``ended`` next time.

    ``verdict`` is ``None`` when the planner did not look at the group in this pass;
    the Released condition is then left as it is. ``now``: epoch seconds, used for
    ``scheduleStartTime`` on release, timeouts and new ``lastTransitionTime`` values.
    ``ended``: what the previous call returned for this PodGroup (``None`` at first: the
    written counts are the base). Conditions of other types already in status (written by
    someone else) are kept.
    """
    old = pg.status
    live = count_members(pg, members)
    m = pg.spec.minMember
    outcome = Outcome(verdict.outcome) if verdict is not None else None
    message = (verdict.message or "") if verdict is not None else ""
    stands = release_stands(old, members, gate)
    released = stands or (outcome is not None and outcome.releases)
    start = old.scheduleStartTime
    # A fresh release decision (also a re-release after a timeout or lost quorum) restarts the clock.
    fresh = outcome is Outcome.RELEASED and not stands
    if (released and not start) or fresh:
        start = format_time(now)
    seen = track_ended(ended, old, pg, members, start, fresh)
    c = live._replace(gone_succeeded=max(0, seen.total_succeeded - live.succeeded),
                      gone_failed=max(0, seen.total_failed - live.failed))
    phase = decide_phase(m, c, released, old.phase)

    conds = cond_mod.ConditionSet(old.conditions, now, pg.metadata.generation)
    cond_mod.write_released(conds, released=released, outcome=outcome, message=message, members=c.members,
                            min_member=m)
    cond_mod.write_fits_cluster(conds, outcome=outcome, message=message, min_member=m)
    cond_mod.write_timed_out(conds, timeout=pg.spec.scheduleTimeoutSeconds, start=start, fresh=fresh,
                             released=released, window_closed=quorum_reached(old), quorum_placed=c.quorum_placed,
                             placed=c.placed, min_member=m)

    return PodGroupStatus(
        phase=phase,
        scheduled=c.bound,
        running=c.running,
        succeeded=c.total_succeeded,
        failed=c.total_failed,
        scheduleStartTime=start,
        occupiedBy=old.occupiedBy,
        conditions=conds.to_list(),
    ), seen


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


def progress_only(old: Mapping[str, Any] | None, body: Mapping[str, Any] | None) -> bool:
    """Whether ``body`` (from :func:`status_patch`) changes only numbers in condition messages of
    status ``old`` (API JSON): the same condition types, each with the same ``status`` and
    ``reason`` and a message equal but for its numbers, and no other field. Such a change reports
    progress ("5 of 8 members present" -> "6 of 8 ..."); the controller writes it at most every
    :data:`PROGRESS_WRITE_SECONDS` per group. Any other change (a new situation in the words of a
    message, a status, a reason, a count field, the phase) is not progress only."""
    if not body or set(body.get("status") or {}) != {"conditions"}:
        return False
    before = _normal(old if isinstance(old, Mapping) else None)
    old_conditions = {c.get("type"): c for c in before.get("conditions", []) if isinstance(c, Mapping)}
    new_conditions = body["status"]["conditions"] or []
    if {c.get("type") for c in new_conditions} != set(old_conditions) or len(new_conditions) != len(old_conditions):
        return False
    def words(message: Any) -> str:
        return _DIGITS.sub("#", message) if isinstance(message, str) else repr(message)

    return all(old_conditions[c.get("type")].get("status") == c.get("status")
               and old_conditions[c.get("type")].get("reason") == c.get("reason")
               and words(old_conditions[c.get("type")].get("message")) == words(c.get("message"))
               for c in new_conditions)


#: Numbers standing alone ("5 of 8", "short by 2"), not part of a name ("w-1", "node3") or a
#: quantity ("1Gi"): a change of those is a change of words.
_DIGITS = re.compile(r"(?<![\w.-])\d+(?![\w-]|\.\d)")


#: Seconds between two status writes of one PodGroup that change only condition messages.
PROGRESS_WRITE_SECONDS = 1.0
