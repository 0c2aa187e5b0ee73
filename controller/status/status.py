"""PodGroup status from its live members and the planner's verdict (pure).

:func:`compute_status` is the one place for the phase rule and the conditions; when and
what of the result is written (the merge-patch body, numbers-only changes held back) is
:mod:`cogate.controller.status.writes`.

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
while no member is active (a Job's pods may be deleted after they end). Members that join a
Finished group join its release while its finished pods exist (:func:`release_stands`); after
they were deleted they form a new gang, the group stays Finished while that gang waits gated,
and the phase is decided afresh when it is released. A group not released (a gang being
decided: :func:`release_end`) counts no Succeeded member toward Running or Scheduled.

Generations (docs/semantics.md "Generations"): a release (``scheduleStartTime``) stands while
its quorum holds (:func:`generation_quorum`: members that hold a place in it, Succeeded ones,
gated ones it planned) and none of the ends of :func:`release_end` applies; once it ended and
members come back gated the gang is decided again as a whole.

Counts: ``scheduled`` and ``running`` count live members. ``succeeded`` and ``failed``
count the members that ended so during the release (since ``scheduleStartTime``), deleted
ones included, so they never decrease while a release stands; a fresh release counts from
the members that exist then. The members seen ended are kept by the caller
(:class:`EndedMembers`, passed back to :func:`compute`); without it (a restarted
controller), the written counts are the base: ``max(written, live)``. A member that ends
and is deleted while no controller watches may be missed; none is counted twice.

Conditions: :func:`compute` decides ``Released``, ``FitsCluster`` and ``TimedOut`` from the
verdict, the counts and the clock; their rules and their one writer are in
:mod:`cogate.controller.status.conditions` (:func:`~cogate.controller.status.conditions.write_released`,
:func:`~cogate.controller.status.conditions.write_fits_cluster`,
:func:`~cogate.controller.status.conditions.write_timed_out`). ``Released`` is left as it is when
there is no verdict. The ``TimedOut`` window closes for good once the group first has ``m``
members placed (:func:`quorum_reached`): a member lost later is not lateness (no ``Timeout``
event, no eviction). A phase of ``Scheduled``, ``Running`` or ``Finished`` recorded for the
standing release also counts as quorum reached (status written before the condition existed,
or a timeout added later). ``scheduleTimeoutSeconds: 0`` (or unset) disables the timeout.

``scheduleStartTime`` is set when the verdict releases the group and is never changed
afterwards. ``occupiedBy`` is kept as it is.

Inputs are the documented records (docs/internals.md): members are
:class:`cogate.controller.model.records.PodInfo` (membership is
:func:`cogate.controller.model.records.is_member`); the verdict is
``cogate.controller.model.verdicts.GroupVerdict`` (``outcome``, ``message``, ``fits``).
Times are float epoch seconds (UTC).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

from cogate.api import DEFAULT_GATE_NAME
from cogate.controller.status import conditions as cond_mod
from cogate.controller.status.conditions import (  # noqa: F401 - public here too (status.CONDITION_TIMED_OUT, ...)
    CONDITION_DISRUPTED,
    CONDITION_FITS_CLUSTER,
    CONDITION_RELEASED,
    CONDITION_TIMED_OUT,
    REASON_MEMBER_LOST,
    REASON_MEMBERS_BOUND,
    REASON_QUORUM_LOST,
    condition,
    released_reason,
)
from cogate.controller.model import recovery
from cogate.controller.model.verdicts import Outcome, min_member_of
from cogate.controller.model.records import PodInfo, is_member
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
    "BindProgress",
    "track_progress",
    "Computed",
    "again_text",
    "succeeded_note",
    "compute",
    "compute_all",
    "compute_status",
    "release_stands",
    "release_end",
    "holds_place",
    "generation_quorum",
    "stand_ins",
    "run_goes_on",
    "condition",
]

#: Phases that imply minMember members were bound during the standing release.
QUORUM_PHASES = frozenset({"Scheduled", "Running", "Finished"})


TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


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
    bound_succeeded: int = 0  #: bound members that are Succeeded (placed, but never part of a new gang)

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
    """Live members of ``pg`` among ``members`` (:func:`cogate.controller.model.records.is_member`)."""
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
    ignored (the membership rule: :func:`cogate.controller.model.records.member_key`).
    """
    n = bound = placed = active = running = succeeded = failed = bound_succeeded = 0
    for p in _live(pg, members):
        n += 1
        phase = p.phase
        if p.bound:
            bound += 1
            placed += phase != "Failed"
            bound_succeeded += phase == "Succeeded"
        if phase not in TERMINAL_PHASES:
            active += 1
        running += phase == "Running"
        succeeded += phase == "Succeeded"
        failed += phase == "Failed"
    return Counts(n, bound, placed, active, running, succeeded, failed, bound_succeeded=bound_succeeded)


def decide_phase(min_member: int, c: Counts, released: bool, previous: str | None = None) -> str:
    """The phase for ``min_member`` and counts ``c`` (rules table in the module docstring).

    ``previous`` is the phase currently in status: Finished/Failed are kept while no
    member is active, and Finished also while the group is not released (members that
    joined a finished group wait gated for a new gang release). A group not ``released``
    (being decided) does not count Succeeded members toward Running or Scheduled: they are no
    part of the gang being decided. Raises ``ValueError`` if ``min_member < 1``.
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
    if not released:  # Succeeded members are no part of a gang being decided (docs/semantics.md "Generations")
        c = c._replace(succeeded=0, gone_succeeded=0, placed=c.placed - c.bound_succeeded)
    if c.failed > 0 and c.members - c.failed < m:
        return "Failed"
    if c.running > 0 and c.running + c.total_succeeded >= m:
        return "Running"
    if c.quorum_placed >= m:
        return "Scheduled"
    if released:
        return "Scheduling"
    return "Pending"


def holds_place(m: PodInfo, gate: str = DEFAULT_GATE_NAME) -> bool:
    """``m`` holds a place in its group's standing release (is *active in* that generation): it
    carries no gate of ours (the release, or an earlier one, removed it), is not terminal nor
    being deleted, and is bound or waits for kube-scheduler (released, unbound)."""
    return not m.gated_by(gate) and not m.terminal and not m.deleting


def generation_quorum(members: Sequence[PodInfo], gate: str = DEFAULT_GATE_NAME, start: str | None = None) -> int:
    """The members that keep a standing release's quorum: those that hold a place in it
    (:func:`holds_place`), the Succeeded members that still exist (their share of the release's
    work is done: a Job's finished pods keep its waves in one release) and, with the release's
    ``start`` (``scheduleStartTime``), the gated members created no later than it: the release
    planned them and has not reached them yet (a controller restarted mid-release) or they wait
    for room beyond minMember. A gated member created after the release is new (a replacement,
    a recreated pod) and does not keep it."""
    t0 = parse_time(start) if start else None
    return sum(1 for m in members
               if holds_place(m, gate) or m.phase == "Succeeded"
               or (t0 is not None and m.gated_by(gate) and not m.bound and not m.terminal and m.created <= t0))


def stand_ins(members: Sequence[PodInfo], gate: str = DEFAULT_GATE_NAME, start: str | None = None) -> int:
    """How many of a standing release's new gated members stand in for its failed ones: the
    gated, unbound members created after the release (``start``, its ``scheduleStartTime``),
    at most as many as the members that ended ``Failed`` and still exist. A Job's replacement of
    a failed pod (Indexed Jobs, ``backoffLimitPerIndex``, a ``podFailurePolicy`` rule of action
    ``Ignore`` or ``Count``) is created after the failure and is part of the same run; a pod
    that failed and was deleted since (or was deleted without failing: a suspended Job's
    pods) leaves no stand-in (docs/semantics.md "Generations")."""
    if not start:
        return 0
    failed = sum(1 for m in members if m.phase == "Failed" and not m.deleting)
    return min(failed, _new_gated(members, gate, start))


def _new_gated(members: Sequence[PodInfo], gate: str, start: str) -> int:
    """Gated, unbound, live members created after the release that starts at ``start``."""
    t0 = parse_time(start)
    return sum(1 for m in members if m.gated_by(gate) and not m.bound and not m.terminal and not m.deleting
               and m.created > t0)


def run_goes_on(members: Sequence[PodInfo], min_member: int, gate: str = DEFAULT_GATE_NAME,
                start: str | None = None) -> bool:
    """A standing release whose work is partly done goes on through its failures: at least one
    Succeeded member still exists, a failed member has a replacement (:func:`stand_ins`), and the
    release's quorum (:func:`generation_quorum`) with those replacements makes ``min_member``
    (a Job's next pods beside the replacement join as its waves do). Limit: a Job suspended after
    one of its pods failed, and resumed, joins the run as well (docs/semantics.md). Why: a release
    decided again never counts Succeeded members (an MPI gang's finished member must not stand
    in for a missing one), so a Job that lost a pod after others finished (index 2 failed, index
    3 succeeded) could never be decided again and its replacement would wait for ever; the Job
    keeps its completions and the replacement is part of the same run, as kube-scheduler would
    place it (issue 37 kind 7). Without a Succeeded member the rule of a lost member stands
    (decided again as a whole with the members still placed: no member is left out)."""
    if not start or not any(m.phase == "Succeeded" and not m.deleting for m in members):
        return False
    n = stand_ins(members, gate, start)
    # Timestamps are whole seconds: a gated member created in the release's own second counts in its
    # quorum (planned by it) and may as well be a failed member's replacement made within that second.
    t0 = parse_time(start)
    same_second = any(m.gated_by(gate) and not m.bound and not m.terminal and not m.deleting and m.created == t0
                      for m in members)
    failed = any(m.phase == "Failed" and not m.deleting for m in members)
    return (n > 0 or (same_second and failed)) and generation_quorum(members, gate, start) + n >= min_member


def release_end(status: PodGroupStatus, members: Sequence[PodInfo], min_member: int,
                gate: str = DEFAULT_GATE_NAME, lost: bool = False, whole: bool = False) -> str:
    """Why the release recorded in ``status`` has ended, in words ('' while it holds, or when no
    release is recorded). The first that holds (docs/semantics.md "Generations"):

    - timed out (condition ``TimedOut=True``);
    - ``--evict-below-quorum`` evicted what was left of it (``Disrupted=True`` reason ``QuorumLost``);
    - none of the three below while its work is partly done and the replacements of its failed
      members make it whole again (:func:`run_goes_on`: the replacements join it);
    - its quorum was lost through failures (phase ``Failed``);
    - members left it without finishing (``Disrupted=True`` reason ``MemberLost``: deleted,
      evicted, preempted, failed) and fewer than ``min_member`` hold a place (:func:`holds_place`),
      or, with ``whole`` (``cogate.dev/recovery: whole``, :mod:`cogate.controller.model.recovery`), at all;
    - fewer than ``min_member`` keep its quorum (:func:`generation_quorum`: members that hold a
      place, Succeeded members that still exist, gated members the release has not reached yet):
      all or most of the gang is gone (scale to 0, Job suspend, pods recreated by an operator, a
      drain) or its finished pods were deleted.

    ``members``: the group's live members; ``lost``: members left it in this pass (not recorded
    in ``Disrupted`` yet: the pass that sees a Job's pods deleted may also see its new ones).
    """
    if not status.scheduleStartTime or status.phase in (None, "Pending"):
        return ""
    timed_out = status.condition(CONDITION_TIMED_OUT)
    disrupted = status.condition(CONDITION_DISRUPTED)
    if timed_out is not None and timed_out.status == "True":
        return "it timed out"
    broken = disrupted is not None and disrupted.status == "True"
    if broken and disrupted.reason == REASON_QUORUM_LOST:
        return "it fell below minMember and its remaining members were evicted"
    if run_goes_on(members, min_member, gate, status.scheduleStartTime):
        return ""
    if status.phase == "Failed":
        return "its quorum was lost through failures"
    placed = sum(1 for m in members if holds_place(m, gate))
    if (lost or (broken and disrupted.reason == REASON_MEMBER_LOST)) and (placed < min_member or whole):
        return f"members left it and {placed} of minMember {min_member} hold a place" + \
            ("; recovery: whole" if whole and placed >= min_member else "")
    quorum = generation_quorum(members, gate, status.scheduleStartTime)
    if quorum < min_member:
        return f"{quorum} of minMember {min_member} members are left of it"
    return ""


def release_stands(status: PodGroupStatus, members: Sequence[PodInfo] = (), gate: str = DEFAULT_GATE_NAME, *,
                   min_member: int, lost: bool = False, whole: bool = False) -> bool:
    """The status records a release that still stands (the planner's ``GroupRequest.released``).

    A release is recorded by ``scheduleStartTime`` with a phase other than Pending. It stops
    standing only when it has ended (:func:`release_end`: timed out, Failed, evicted for a lost
    quorum, members lost below ``min_member``, or fewer than ``min_member`` members left of it)
    **and** members came back behind ``gate`` (recreated pods, replacements, a resumed Job's
    pods): those and the members still placed are then decided again as a whole, with the
    all-or-nothing rule of a first release, instead of being ungated one by one. Until a member
    is gated again the release stands, so a timed-out group whose members wait in
    kube-scheduler's queue keeps reporting ``Scheduling`` with ``TimedOut=True``. While it stands,
    new members (replacements, a Job's next pods) are ungated as they appear (docs/semantics.md).
    A Finished release stands while its finished members exist (a Job's next wave joins it).

    ``members``: the group's live members; ``min_member``: ``spec.minMember``; ``lost``: members
    left the release in this pass; ``whole``: the group's recovery rule is ``whole`` (:func:`release_end`).
    """
    if not status.scheduleStartTime or status.phase in (None, "Pending"):
        return False
    if not release_end(status, members, min_member, gate, lost, whole):
        return True
    return not any(m.gated_by(gate) and not m.bound for m in members)


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


class BindProgress(NamedTuple):
    """How far one release has got binding its members, kept by the caller between passes (one
    per PodGroup, passed back to :func:`compute_all`): ``start`` (the release's
    ``scheduleStartTime``), ``placed`` (members placed at the last pass: bound, not Failed, plus
    succeeded ones deleted since) and ``since`` (epoch seconds: when ``placed`` last rose, or the
    release's start). The timeout clock runs from ``since``: it measures lack of progress."""

    start: str | None
    placed: int = 0
    since: float = 0.0


#: The bind progress of a caller that keeps none: the window counts from ``scheduleStartTime``.
NO_PROGRESS = BindProgress(None)


def track_progress(prev: BindProgress | None, start: str | None, placed: int, now: float,
                   binding: bool = False) -> BindProgress:
    """The bind progress of the release that starts at ``start`` after a pass that saw ``placed``
    members placed at ``now`` (epoch seconds). A release seen for the first time counts from its
    start, or from ``now`` when ``prev`` is ``None`` (a restarted controller: it does not know when
    members last bound) and members are placed and others still ``binding`` (released, unbound:
    kube-scheduler may be binding them this instant, so the gang gets a full window from now, never
    less); then ``since`` moves to ``now`` each time ``placed`` rises above the last pass's."""
    if not start:
        return BindProgress(None, placed, now)
    if prev is None or prev.start != start:
        t0 = parse_time(start)
        return BindProgress(start, placed, max(t0, now) if prev is None and placed > 0 and binding else t0)
    if placed > prev.placed:
        return BindProgress(start, placed, now)
    return prev._replace(placed=placed)


def timeout_deadline(pg: PodGroup, progress: BindProgress | None = None) -> float | None:
    """Epoch seconds at which ``pg`` times out if fewer than minMember are bound, or ``None``.

    ``since + scheduleTimeoutSeconds``, ``since`` being when the standing release last made
    progress (``progress.since``: a member bound) or, without ``progress`` for this release,
    its ``scheduleStartTime``; ``None`` when not released yet, the timeout is unset or 0, or the
    release already had minMember members placed (:func:`quorum_reached`). The reconciler
    requeues the group for this time.
    """
    timeout = pg.spec.scheduleTimeoutSeconds
    if not timeout or not pg.status.scheduleStartTime or quorum_reached(pg.status):
        return None
    return _window_start(pg.status.scheduleStartTime, progress) + timeout


def _window_start(start: str, progress: BindProgress | None) -> float:
    if progress is not None and progress.start == start:
        return max(parse_time(start), progress.since)
    return parse_time(start)


class Computed(NamedTuple):
    """What :func:`compute_all` returns: the ``status`` to write, and what the caller keeps for the
    next pass of this PodGroup: the members seen ``ended`` and the release's bind ``progress``."""

    status: PodGroupStatus
    ended: EndedMembers
    progress: BindProgress


def again_text(status: PodGroupStatus, members: Sequence[PodInfo], min_member: int,
               gate: str = DEFAULT_GATE_NAME, lost: bool = False, whole: bool = False) -> str:
    """What the ``Released`` condition of a group whose recorded release no longer stands says
    before the planner's message: "the release of <scheduleStartTime> ended (<why>): the gang is
    decided again as a whole, all or nothing"; '' when no release is recorded or it stands."""
    if not status.scheduleStartTime or release_stands(status, members, gate, min_member=min_member, lost=lost,
                                                      whole=whole):
        return ""
    why = (release_end(status, members, min_member, gate, lost, whole)
           or _end_after_pending(status, members, min_member, gate, whole))
    return f"the release of {status.scheduleStartTime} ended ({why}): the gang is decided again as a whole, " \
           "all or nothing"


def _end_after_pending(status: PodGroupStatus, members: Sequence[PodInfo], min_member: int, gate: str,
                       whole: bool = False) -> str:
    """Why, once the phase was written Pending (the release ended in an earlier pass)."""
    recorded = status.model_copy(update={"phase": "Scheduling"})
    return release_end(recorded, members, min_member, gate, whole=whole) or "it no longer stands"


def succeeded_note(members: Sequence[PodInfo], released: bool) -> str:
    """For a group being decided (not released) that has Succeeded members: they do not count
    toward the new gang (they cannot run again); '' otherwise."""
    n = sum(1 for m in members if m.phase == "Succeeded")
    if released or not n:
        return ""
    return (f"{n} Succeeded member{'s' if n != 1 else ''} not counted: a new gang needs minMember members "
            "that can run")


def compute_status(pg: PodGroup, members: Sequence[PodInfo], verdict: _Verdict | None, now: float,
                   gate: str = DEFAULT_GATE_NAME, ended: EndedMembers | None = None) -> PodGroupStatus:
    """The status ``pg`` should have (:func:`compute` without the members seen ended)."""
    return compute(pg, members, verdict, now, gate, ended)[0]


def compute(pg: PodGroup, members: Sequence[PodInfo], verdict: _Verdict | None, now: float,
            gate: str = DEFAULT_GATE_NAME, ended: EndedMembers | None = None
            ) -> tuple[PodGroupStatus, EndedMembers]:
    """:func:`compute_all` for a caller that keeps no bind progress: the timeout window counts
    from ``scheduleStartTime``."""
    done = compute_all(pg, members, verdict, now, gate, ended, NO_PROGRESS)
    return done.status, done.ended


def _recorded(verdict: _Verdict | None, message: str) -> str:
    """The ``Released`` condition's text of ``message``: without the verdict's ``waiting_note`` (``GroupVerdict``; the
    members a release leaves gated are ``MembersWaiting``'s to name: they change, the record does not)."""
    note = getattr(verdict, "waiting_note", "")
    return message.replace(note, "", 1) if note else message  # notes added after planning stay


def _planners(verdict: _Verdict | None, outcome: Outcome | None) -> Outcome | None:
    """``outcome`` when the planner gave it; ``None`` for a forced release (``GroupVerdict.forced``),
    which says nothing of the room: ``FitsCluster`` keeps what the planner last said."""
    return None if getattr(verdict, "forced", False) else outcome


def compute_all(pg: PodGroup, members: Sequence[PodInfo], verdict: _Verdict | None, now: float,
                gate: str = DEFAULT_GATE_NAME, ended: EndedMembers | None = None,
                progress: BindProgress | None = None, lost: bool = False) -> Computed:
    """The status ``pg`` should have, from its live ``members`` and the planner's ``verdict``,
    and what to pass back next time: the members seen ended and the release's bind progress.

    ``verdict`` is ``None`` when the planner did not look at the group in this pass;
    the Released condition is then left as it is. ``now``: epoch seconds, used for
    ``scheduleStartTime`` on release, timeouts and new ``lastTransitionTime`` values.
    ``ended``/``progress``: what the previous call returned for this PodGroup (``None`` at first:
    the written counts are the base; the timeout window starts at the release, or now when
    members are placed already). ``lost``: members left the release in this pass
    (:func:`release_stands`). Conditions of other types already in status (written by
    someone else) are kept.
    """
    old = pg.status
    members = _live(pg, members)
    live = count_members(pg, members)
    m = min_member_of(pg)
    outcome = Outcome(verdict.outcome) if verdict is not None else None
    message = (verdict.message or "") if verdict is not None else ""
    whole = recovery.policy_of(pg.metadata.annotations).whole
    stands = release_stands(old, members, gate, min_member=m, lost=lost, whole=whole)
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
    bind = track_progress(None if fresh else progress, start, c.quorum_placed, now,
                          binding=any(holds_place(p, gate) and not p.bound for p in members))

    conds = cond_mod.ConditionSet(old.conditions, now, pg.metadata.generation)
    cond_mod.write_released(conds, released=released, outcome=outcome, message=_recorded(verdict, message), members=c.members,
                            min_member=m, again=again_text(old, members, m, gate, lost, whole),
                            note=succeeded_note(members, released))
    cond_mod.write_fits_cluster(conds, outcome=_planners(verdict, outcome), message=message, min_member=m)
    # A recorded release that ended while never reaching minMember is still judged while members
    # hold room (survivors bound): the timeout is what frees it (--evict-on-timeout).
    holding = released or (bool(start) and any(holds_place(p, gate) for p in members))
    cond_mod.write_timed_out(conds, timeout=pg.spec.scheduleTimeoutSeconds, start=start, fresh=fresh,
                             released=holding, window_closed=quorum_reached(old), quorum_placed=c.quorum_placed,
                             placed=c.placed, min_member=m,
                             since=_window_start(start, bind) if start else None)

    return Computed(PodGroupStatus(
        phase=phase,
        scheduled=c.bound,
        running=c.running,
        succeeded=c.total_succeeded,
        failed=c.total_failed,
        scheduleStartTime=start,
        occupiedBy=old.occupiedBy,
        conditions=conds.to_list(),
    ), seen, bind)
