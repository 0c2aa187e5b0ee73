"""controller.status: the phase table, counts, conditions, and write-only-on-change patches."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from cogate.controller.model.records import PodInfo
from cogate.controller.planning.planner import GroupVerdict
from cogate.controller.status.status import (
    release_stands,
    quorum_reached,
    Counts,
    compute,
    track_ended,
    compute_status,
    count_members,
    decide_phase,
    timeout_deadline,
)
from cogate.controller.status.writes import progress_only, status_patch
from cogate.controller.status.notices import situation_key
from cogate.models import PHASES, PodGroup, format_time, parse_time
from tests.builders import pod

NS, NAME = "ml", "train"
T0 = parse_time("2024-05-01T10:00:00Z")


def verdict(outcome: str, message: str = "", fits: int = 0) -> GroupVerdict:
    return GroupVerdict(NS, NAME, outcome, {}, fits, message)


#: shorthand -> (node_name, phase)
STATES = {
    "G": ("", "Pending"),         # gated, unbound
    "U": ("", "Pending"),         # ungated, unbound: in kube-scheduler's queue
    "B": ("n1", "Pending"),       # bound, containers starting
    "R": ("n1", "Running"),
    "S": ("n1", "Succeeded"),
    "F": ("n1", "Failed"),
}


def member(state: str, i: int = 0, *, ns: str = NS, group: str = NAME, deleting: bool = False) -> PodInfo:
    node, phase = STATES[state]
    # a gated member is one created after the release (RELEASED's scheduleStartTime, T0): a new
    # member, a replacement, a recreated pod; the others were there before it
    b = pod(f"{group}-{i}", ns).uid(f"uid-{group}-{i}").group(group).phase(phase)
    b.created(T0 + 1 if state == "G" else T0 - 60)
    if state == "G":
        b.gated("scheduling.x-k8s.io/pod-group")
    if node:
        b.on(node, phase)
    if deleting:
        b.deleting(0)
    return b.info()


def members(spec: str) -> list[PodInfo]:
    return [member(s, i) for i, s in enumerate(spec)]


def podgroup(min_member: int = 3, status: dict | None = None, timeout: int | None = None) -> PodGroup:
    spec: dict = {"minMember": min_member}
    if timeout is not None:
        spec["scheduleTimeoutSeconds"] = timeout
    return PodGroup.from_api({
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": NAME, "namespace": NS, "generation": 1, "creationTimestamp": format_time(T0)},
        "spec": spec, "status": status or {},
    })


RELEASED = {"phase": "Scheduling", "scheduleStartTime": format_time(T0)}


# ------------------------------------------------------------------ phase table
# (minMember, members, released, previous phase) -> phase
PHASE_TABLE = [
    # Pending: not released, fewer than m bound
    (3, "", False, None, "Pending"),
    (3, "GG", False, None, "Pending"),
    (3, "GGG", False, None, "Pending"),
    (3, "GGGG", False, "Pending", "Pending"),
    (1, "G", False, None, "Pending"),
    # Scheduling: released, fewer than m bound
    (3, "GGG", True, None, "Scheduling"),
    (3, "BGG", True, None, "Scheduling"),
    (3, "BBG", True, "Scheduling", "Scheduling"),
    (3, "", True, "Scheduling", "Scheduling"),
    (3, "RGG", True, None, "Scheduling"),
    # Scheduled: >= m bound, not >= m running
    (3, "BBB", True, None, "Scheduled"),
    (3, "BBBG", True, None, "Scheduled"),
    (3, "RBB", True, None, "Scheduled"),
    (3, "RRB", True, None, "Scheduled"),
    (3, "BBB", False, None, "Scheduled"),  # bound without release (e.g. nodeName set by the creator)
    (1, "B", True, None, "Scheduled"),
    # Running: >= m running (+ succeeded)
    (3, "RRR", True, None, "Running"),
    (3, "RRRG", True, None, "Running"),
    (3, "RRRGGG", True, None, "Running"),
    (3, "RRS", True, None, "Running"),
    (3, "RSS", True, None, "Running"),
    (3, "RRRF", True, None, "Running"),  # a failure above quorum keeps Running
    (1, "R", True, None, "Running"),
    (2, "RRF", True, "Running", "Running"),
    # Finished: >= m succeeded, none active
    (3, "SSS", True, None, "Finished"),
    (3, "SSSF", True, None, "Finished"),
    (1, "S", True, None, "Finished"),
    (3, "SSSR", True, None, "Running"),  # still one active
    (3, "SSSG", True, None, "Scheduled"),  # a gated extra member is active: not Finished, none running
    (3, "SS", True, None, "Scheduling"),  # 2 succeeded < m, nothing active, 2 placed < m
    # Failed: quorum lost through failures
    (3, "RRF", True, None, "Failed"),
    (3, "FFF", True, None, "Failed"),
    (3, "SSF", True, None, "Failed"),
    (3, "GGF", False, None, "Failed"),
    (1, "F", True, None, "Failed"),
    (3, "RRFG", True, None, "Scheduling"),  # a replacement restores quorum: back to Scheduling
    (3, "RRFB", True, None, "Scheduled"),  # the replacement bound: 3 placed
    (3, "BBF", True, "Scheduled", "Failed"),
    # terminal phases stick while no member is active
    (3, "", True, "Finished", "Finished"),
    (3, "S", True, "Finished", "Finished"),
    (3, "", True, "Failed", "Failed"),
    (3, "GGG", True, "Finished", "Scheduling"),  # a new gang of members released: recomputed
    (3, "RRR", True, "Failed", "Running"),
]


@pytest.mark.parametrize("m,spec,released,previous,expected", PHASE_TABLE)
def test_phase_table(m, spec, released, previous, expected):
    c = count_members(podgroup(m), members(spec))
    assert decide_phase(m, c, released, previous) == expected


@pytest.mark.parametrize("m,spec,released,previous,expected", PHASE_TABLE)
def test_compute_status_phase_matches_table(m, spec, released, previous, expected):
    status = dict(RELEASED) if released else {}
    if previous:
        status["phase"] = previous
        if previous != "Pending" and not released:
            pytest.fail("table row inconsistent: a non-Pending previous phase implies a release")
    pg = podgroup(m, status)
    ms = members(spec)
    # A release that no longer stands (e.g. new gated members of a Finished group) is
    # "released" in the table only by a fresh release verdict.
    v = verdict("Released", "fits", m) if released and not release_stands(pg.status, ms, min_member=m) else None
    st_ = compute_status(pg, ms, v, T0 + 10)
    assert st_.phase == expected
    assert st_.scheduled == sum(s in "BRSF" for s in spec)
    assert st_.running == spec.count("R")
    assert st_.succeeded == spec.count("S")
    assert st_.failed == spec.count("F")


def test_decide_phase_rejects_bad_min_member():
    with pytest.raises(ValueError, match="minMember"):
        decide_phase(0, Counts(0, 0, 0, 0, 0, 0, 0), False)


@given(
    m=st.integers(1, 6),
    spec=st.text(alphabet="GBRSF", max_size=10),
    released=st.booleans(),
)
def test_phase_invariants(m, spec, released):
    c = count_members(podgroup(m), members(spec))
    phase = decide_phase(m, c, released)
    assert phase in PHASES
    if phase == "Finished":
        assert c.succeeded >= m and c.active == 0
    if phase == "Failed":
        assert c.failed > 0 and c.members - c.failed < m
    done = c.succeeded if released else 0  # a gang being decided does not count Succeeded members
    placed = c.placed if released else c.placed - c.bound_succeeded
    if phase == "Running":
        assert c.running + done >= m
    if phase == "Scheduled":
        assert placed >= m and (c.running + done < m or c.running == 0)
    if phase == "Pending":
        assert not released and c.placed - c.bound_succeeded < m  # Succeeded: no part of a new gang
    if c.placed < m and c.failed == 0 and not released:
        assert phase == "Pending"
    assert c.placed == c.bound - c.failed  # every Failed member here is bound


def test_members_filtering():
    pods = [member("R", 0), member("R", 1, ns="other"), member("R", 2, group="other"),
            member("R", 3, deleting=True), member("B", 4)]
    c = count_members(podgroup(2), pods)
    assert c == Counts(members=2, bound=2, placed=2, active=2, running=1, succeeded=0, failed=0)


# ------------------------------------------------------------------ release, conditions
def test_release_sets_start_time_and_condition():
    v = verdict("Released", "fits 4 of 4", fits=4)
    st_ = compute_status(podgroup(4), members("GGGG"), v, T0)
    assert st_.phase == "Scheduling"
    assert st_.scheduleStartTime == format_time(T0)
    rel = st_.condition("Released")
    assert (rel.status, rel.reason, rel.message, rel.lastTransitionTime) == ("True", "Released", "fits 4 of 4", format_time(T0))
    assert rel.observedGeneration == 1


def test_start_time_kept_once_set():
    pg = podgroup(2, {**RELEASED})
    st_ = compute_status(pg, members("GG"), verdict("AlreadyReleased"), T0 + 500)
    assert st_.scheduleStartTime == RELEASED["scheduleStartTime"]


@pytest.mark.parametrize("outcome,reason,message", [
    ("InsufficientCapacity", "InsufficientCapacity", "fits 3 of 4: cpu short by 2 on every node"),
    ("ExceedsClusterCapacity", "InsufficientCapacity", "needs 64 cpu on one node; largest allocatable 32"),
    ("WaitingForMembers", "WaitingForMembers", "2 of minMember 4 members exist"),
    ("Unschedulable", "Unschedulable", "required pod affinity is not supported"),
])
def test_not_released_condition_carries_planner_reason(outcome, reason, message):
    st_ = compute_status(podgroup(4), members("GGG"), verdict(outcome, message, 3), T0)
    assert st_.phase == "Pending"
    assert st_.scheduleStartTime is None
    cond = st_.condition("Released")
    assert (cond.status, cond.reason, cond.message) == ("False", reason, message)


def test_exceeds_cluster_capacity_marks_fits_cluster_false_until_it_fits():
    msg = "fits 3 of 4 even with every eligible node empty: cpu short by 2 on eligible nodes"
    st_ = compute_status(podgroup(4), members("GGGGGG"), verdict("ExceedsClusterCapacity", msg, 3), T0)
    fits = st_.condition("FitsCluster")
    assert (fits.status, fits.reason, fits.message) == ("False", "ExceedsClusterCapacity", msg)
    assert st_.condition("Released").reason == "InsufficientCapacity"
    # A node is added: the group now fits an empty cluster but the room is taken.
    later = compute_status(podgroup(4, st_.to_api()), members("GGGGGG"),
                           verdict("InsufficientCapacity", "fits 3 of 4: cpu short by 2", 3), T0 + 60)
    fits = later.condition("FitsCluster")
    assert (fits.status, fits.reason) == ("True", "FitsEmptyCluster")
    assert fits.lastTransitionTime != st_.condition("FitsCluster").lastTransitionTime


def test_fits_cluster_absent_for_groups_that_always_fit():
    st_ = compute_status(podgroup(4), members("GGGG"), verdict("InsufficientCapacity", "fits 3 of 4", 3), T0)
    assert st_.condition("FitsCluster") is None


def test_last_transition_time_kept_while_status_unchanged():
    first = compute_status(podgroup(4), members("GGG"), verdict("WaitingForMembers", "3 of 4"), T0)
    pg = podgroup(4, first.to_api())
    second = compute_status(pg, members("GGGG"), verdict("InsufficientCapacity", "fits 3 of 4"), T0 + 60)
    cond = second.condition("Released")
    assert cond.reason == "InsufficientCapacity"
    assert cond.lastTransitionTime == format_time(T0)  # still False
    third = compute_status(podgroup(4, second.to_api()), members("GGGG"), verdict("Released", "fits 4 of 4"), T0 + 120)
    assert third.condition("Released").lastTransitionTime == format_time(T0 + 120)
    # later verdicts do not rewrite the True condition's message
    fourth = compute_status(podgroup(4, third.to_api()), members("RRRR"), verdict("AlreadyReleased", "other"), T0 + 180)
    assert fourth.condition("Released") == third.condition("Released")


def test_no_verdict_leaves_released_condition_alone():
    first = compute_status(podgroup(4), members("GGG"), verdict("WaitingForMembers", "3 of 4"), T0)
    again = compute_status(podgroup(4, first.to_api()), members("GGG"), None, T0 + 30)
    assert again.conditions == first.conditions
    assert compute_status(podgroup(4), members("GG"), None, T0).conditions == []


def test_foreign_conditions_kept():
    foreign = {"type": "example.com/Audited", "status": "True", "reason": "Ok", "message": "",
               "lastTransitionTime": format_time(T0)}
    st_ = compute_status(podgroup(2, {"conditions": [foreign]}), members("GG"), verdict("Released"), T0 + 1)
    assert st_.condition("example.com/Audited").to_api() == foreign


def test_occupied_by_kept():
    st_ = compute_status(podgroup(2, {"occupiedBy": "job-uid"}), members("GG"), None, T0)
    assert st_.occupiedBy == "job-uid"


# ------------------------------------------------------------------ timeout
@pytest.mark.parametrize("spec,elapsed,expected", [
    ("BGG", 59, None),
    ("BGG", 60, ("True", "TimedOut")),
    ("BBG", 600, ("True", "TimedOut")),
    ("BBB", 600, ("False", "MembersBound")),
    ("RRR", 600, ("False", "MembersBound")),
    ("BBB", 1, ("False", "MembersBound")),
])
def test_timeout_from_schedule_start_time(spec, elapsed, expected):
    pg = podgroup(3, dict(RELEASED), timeout=60)
    st_ = compute_status(pg, members(spec), None, T0 + elapsed)
    cond = st_.condition("TimedOut")
    if expected is None:
        assert cond is None
        return
    assert (cond.status, cond.reason) == expected
    assert cond.lastTransitionTime == format_time(T0 + elapsed)
    if expected[0] == "True":
        assert f"{sum(s in 'BR' for s in spec)} of minMember 3" in cond.message
    else:
        assert f"3 of 3 members bound {elapsed}s after the release" in cond.message


def _steps(pg_status: dict, timeout: int, steps: list[tuple[str, float]], m: int = 2):
    """Run compute_status over (members, seconds after T0) steps, feeding each status into the next."""
    out = []
    status = dict(pg_status)
    for spec, at in steps:
        st_ = compute_status(podgroup(m, status, timeout=timeout), members(spec), None, T0 + at)
        status = st_.to_api()
        out.append(st_)
    return out


def test_member_lost_after_quorum_is_not_a_timeout():
    """Issue 9 item 4: minMember 2, timeout 5, both bound within a second, one deleted 10 s
    later: no TimedOut=True (the window closed when the quorum was first bound)."""
    bound, later, much_later = _steps(dict(RELEASED), 5, [("BB", 1), ("R", 11), ("R", 600)])
    assert (bound.condition("TimedOut").status, bound.condition("TimedOut").reason) == ("False", "MembersBound")
    for st_ in (later, much_later):
        cond = st_.condition("TimedOut")
        assert (cond.status, cond.reason) == ("False", "MembersBound"), cond
        assert cond.lastTransitionTime == format_time(T0 + 1)
    assert timeout_deadline(podgroup(2, later.to_api(), timeout=5)) is None


def test_quorum_reached_is_remembered_by_a_phase_written_before_the_condition():
    """A status written by an older controller (phase Running, no TimedOut condition) or a
    timeout added to a running group: the release reached its quorum, so no timeout."""
    status = {**RELEASED, "phase": "Running"}
    assert quorum_reached(podgroup(2, status).status)
    st_ = compute_status(podgroup(2, status, timeout=5), members("R"), None, T0 + 60)
    assert st_.condition("TimedOut") is None
    assert timeout_deadline(podgroup(2, status, timeout=5)) is None
    assert not quorum_reached(podgroup(2, {"phase": "Running"}).status)  # no release recorded


def test_healed_timeout_does_not_fire_again_when_a_member_is_lost():
    late, healed, lost = _steps(dict(RELEASED), 5, [("BG", 10), ("BB", 12), ("B", 20)])
    assert late.condition("TimedOut").status == "True"
    assert (healed.condition("TimedOut").status, healed.condition("TimedOut").reason) == ("False", "MembersBound")
    assert lost.condition("TimedOut") == healed.condition("TimedOut")


def test_fresh_release_reopens_the_timeout_window():
    """After the gang re-forms (e.g. lost quorum through failures, replacements gated), the
    new release is judged on its own window."""
    (bound,) = _steps(dict(RELEASED), 5, [("BB", 1)])
    failed = {**bound.to_api(), "phase": "Failed"}
    again = compute_status(podgroup(2, failed, timeout=5), members("GG"), verdict("Released", "fits 2 of 2", 2),
                           T0 + 100)
    cond = again.condition("TimedOut")
    assert (cond.status, cond.reason) == ("False", "Released")
    assert again.scheduleStartTime == format_time(T0 + 100)
    assert not quorum_reached(again)
    (late,) = _steps(again.to_api(), 5, [("BU", 106)])
    assert (late.condition("TimedOut").status, late.condition("TimedOut").reason) == ("True", "TimedOut")


def test_timeout_clears_when_quorum_binds_and_is_disabled_by_zero():
    pg = podgroup(3, dict(RELEASED), timeout=60)
    late = compute_status(pg, members("BGG"), None, T0 + 100)
    healed = compute_status(podgroup(3, late.to_api(), timeout=60), members("BBB"), None, T0 + 200)
    cond = healed.condition("TimedOut")
    assert (cond.status, cond.reason, cond.lastTransitionTime) == ("False", "MembersBound", format_time(T0 + 200))
    assert compute_status(podgroup(3, dict(RELEASED), timeout=0), members("BGG"), None, T0 + 10**6).condition("TimedOut") is None


def test_timeout_not_counted_before_release():
    st_ = compute_status(podgroup(3, timeout=1), members("GGG"), verdict("InsufficientCapacity", "x"), T0 + 10**6)
    assert st_.condition("TimedOut") is None


def test_timeout_deadline():
    assert timeout_deadline(podgroup(3, dict(RELEASED), timeout=90)) == T0 + 90
    assert timeout_deadline(podgroup(3, dict(RELEASED))) is None
    assert timeout_deadline(podgroup(3, timeout=90)) is None


# ------------------------------------------------------------------ patches
def test_patch_none_when_unchanged():
    st_ = compute_status(podgroup(3, dict(RELEASED)), members("RRR"), None, T0 + 5)
    assert status_patch(st_.to_api(), st_) is None
    # recomputing from the written status is stable (the reconciler's steady state)
    again = compute_status(podgroup(3, st_.to_api()), members("RRR"), None, T0 + 50)
    assert status_patch(st_.to_api(), again) is None


def test_patch_only_changed_fields():
    before = compute_status(podgroup(3, dict(RELEASED)), members("BBR"), None, T0 + 5)
    after = compute_status(podgroup(3, before.to_api()), members("RRR"), None, T0 + 6)
    assert status_patch(before.to_api(), after) == {"status": {"phase": "Running", "running": 3}}


def test_patch_from_empty_status():
    st_ = compute_status(podgroup(2), members("GG"), verdict("Released", "fits 2 of 2"), T0)
    body = status_patch(None, st_)
    assert body["status"]["phase"] == "Scheduling"
    assert body["status"]["scheduleStartTime"] == format_time(T0)
    assert body["status"]["conditions"][0]["type"] == "Released"
    assert "occupiedBy" not in body["status"]  # None is never written
    assert status_patch({}, st_) == body


def test_patch_keeps_old_last_transition_time_and_nulls_dropped_fields():
    old = {"phase": "Pending", "scheduled": 0, "running": 0, "succeeded": 0, "failed": 0, "occupiedBy": "x",
           "somethingElse": 1,
           "conditions": [{"type": "Released", "status": "False", "reason": "WaitingForMembers", "message": "1 of 2",
                           "lastTransitionTime": "2020-01-01T00:00:00Z", "observedGeneration": 1}]}
    st_ = compute_status(podgroup(2), members("G"), verdict("WaitingForMembers", "1 of 2"), T0)
    st_ = st_.model_copy(update={"occupiedBy": None})
    body = status_patch(old, st_)
    assert body == {"status": {"occupiedBy": None}}


def test_patch_sends_whole_conditions_list_on_change():
    old = compute_status(podgroup(2), members("G"), verdict("WaitingForMembers", "1 of 2"), T0).to_api()
    new = compute_status(podgroup(2, old), members("GG"), verdict("InsufficientCapacity", "fits 1 of 2"), T0 + 9)
    body = status_patch(old, new)
    (cond,) = body["status"]["conditions"]
    assert cond["reason"] == "InsufficientCapacity"
    assert cond["lastTransitionTime"] == format_time(T0)


# ------------------------------------------------------------------ release stands / re-release

_TIMED_OUT = {"type": "TimedOut", "status": "True", "reason": "TimedOut", "message": "1 of 3",
              "lastTransitionTime": format_time(T0 + 60)}
_HEALED = {"type": "TimedOut", "status": "False", "reason": "MembersBound", "message": "3 of 3",
           "lastTransitionTime": format_time(T0 + 90)}


@pytest.mark.parametrize("status,spec,stands", [
    ({}, "GGG", False),
    ({"phase": "Pending", "scheduleStartTime": format_time(T0)}, "GGG", False),
    ({"phase": "Scheduling"}, "UUU", False),
    ({"phase": "Scheduling", "scheduleStartTime": format_time(T0)}, "UUU", True),
    ({"phase": "Scheduling", "scheduleStartTime": format_time(T0)}, "BBUG", True),  # a replacement joins
    ({"phase": "Scheduling", "scheduleStartTime": format_time(T0)}, "BBG", False),  # 2 of 3 left: decided again
    ({"phase": "Running", "scheduleStartTime": format_time(T0)}, "RRSG", True),     # a Job's next pod joins
    ({"phase": "Finished", "scheduleStartTime": format_time(T0)}, "SSSG", True),    # ... also after a wave ended
    ({"phase": "Running", "scheduleStartTime": format_time(T0)}, "RRR", True),
    ({"phase": "Finished", "scheduleStartTime": format_time(T0)}, "SSS", True),
    ({"phase": "Failed", "scheduleStartTime": format_time(T0)}, "RFF", True),        # nothing came back gated
    ({"phase": "Failed", "scheduleStartTime": format_time(T0)}, "RFG", False),       # a replacement: gang again
    ({"phase": "Scheduling", "scheduleStartTime": format_time(T0), "conditions": [_TIMED_OUT]}, "BUU", True),
    ({"phase": "Scheduling", "scheduleStartTime": format_time(T0), "conditions": [_TIMED_OUT]}, "GGG", False),
    ({"phase": "Running", "scheduleStartTime": format_time(T0), "conditions": [_HEALED]}, "RRRG", True),
    ({"phase": "Running", "scheduleStartTime": format_time(T0), "conditions": [_HEALED]}, "RRG", False),
])
def test_release_stands(status, spec, stands):
    assert release_stands(podgroup(3, status).status, members(spec), min_member=3) is stands


def test_timed_out_group_waiting_in_the_scheduler_keeps_reporting_scheduling():
    pg = podgroup(3, dict(RELEASED), timeout=60)
    timed_out = compute_status(pg, members("BUU"), None, T0 + 100)
    later = compute_status(podgroup(3, timed_out.to_api(), timeout=60), members("BUU"),
                           verdict("AlreadyReleased"), T0 + 200)
    assert later.phase == "Scheduling"
    assert later.condition("TimedOut").status == "True"
    assert later.condition("Released").status == "True"


def test_re_release_after_timeout_restarts_the_clock_and_clears_timed_out():
    pg = podgroup(3, dict(RELEASED), timeout=60)
    timed_out = compute_status(pg, members("BGG"), None, T0 + 100)
    assert timed_out.condition("TimedOut").status == "True"
    pg2 = podgroup(3, timed_out.to_api(), timeout=60)
    assert not release_stands(pg2.status, members("BGG"), min_member=3)
    again = compute_status(pg2, members("BGG"), verdict("Released", "fits 3 of 3", 3), T0 + 200)
    assert again.scheduleStartTime == format_time(T0 + 200)
    cond = again.condition("TimedOut")
    assert (cond.status, cond.reason) == ("False", "Released")
    assert release_stands(podgroup(3, again.to_api(), timeout=60).status, members("BUU"), min_member=3)


def test_timed_out_group_short_of_room_reports_it_and_keeps_start_time():
    pg = podgroup(3, dict(RELEASED), timeout=60)
    timed_out = compute_status(pg, members("BGG"), None, T0 + 100)
    pg2 = podgroup(3, timed_out.to_api(), timeout=60)
    st_ = compute_status(pg2, members("BGG"), verdict("InsufficientCapacity", "fits 1 of 3: cpu short by 4", 1),
                         T0 + 150)
    assert st_.phase == "Pending"
    assert st_.scheduleStartTime == format_time(T0)
    assert (st_.condition("Released").status, st_.condition("Released").reason) == ("False", "InsufficientCapacity")
    assert st_.condition("TimedOut").status == "True"


# ------------------------------------------------------------------ counts and phase survive deleted members


def _pass(status: dict, spec: dict[int, str], m: int, at: float, ended=None, v=None):
    """One compute() over members {index: state}; returns (status as API JSON, ended, PodGroupStatus)."""
    ms = [member(state, i) for i, state in sorted(spec.items())]
    st_, ended = compute(podgroup(m, status), ms, v, T0 + at, ended=ended)
    return st_.to_api(), ended, st_


def test_finished_group_keeps_phase_and_counts_when_members_are_deleted_and_a_new_one_joins():
    """Issue 9 item 9: two bare members succeed and are deleted; a third joins. Before: succeeded
    dropped to 0 and the phase went Finished -> Scheduling."""
    status, ended, st_ = _pass(dict(RELEASED), {0: "R", 1: "R"}, 2, 1)
    status, ended, st_ = _pass(status, {0: "S", 1: "S"}, 2, 5, ended)
    assert (st_.phase, st_.succeeded) == ("Finished", 2)
    for mem in (ended, None):  # with the controller's memory, and after a restart (written counts)
        s2, e2, gone = _pass(status, {}, 2, 6, mem)
        assert (gone.phase, gone.succeeded, gone.scheduled) == ("Finished", 2, 0)
        # A new member joins: the finished release no longer stands; it waits for a new gang.
        assert not release_stands(podgroup(2, s2).status, [member("G", 7)], min_member=2)
        _, _, joined = _pass(s2, {7: "G"}, 2, 7, e2, verdict("WaitingForMembers", "1 of 2 members present"))
        assert (joined.phase, joined.succeeded) == ("Finished", 2)
        rel = joined.condition("Released")
        assert (rel.status, rel.reason, rel.message) == (
            "False", "WaitingForMembers",
            f"the release of {RELEASED['scheduleStartTime']} ended (0 of minMember 2 members are left of it): the "
            "gang is decided again as a whole, all or nothing; 1 of 2 members present")


def test_members_deleted_one_by_one_after_succeeding_still_finish_the_group():
    status, ended, _ = _pass(dict(RELEASED), {0: "R", 1: "R"}, 2, 1)
    status, ended, st_ = _pass(status, {0: "S", 1: "R"}, 2, 2, ended)
    assert st_.phase == "Running"
    status, ended, st_ = _pass(status, {1: "R"}, 2, 3, ended)  # 0 garbage-collected
    assert (st_.phase, st_.succeeded, st_.running) == ("Running", 1, 1)
    status, ended, st_ = _pass(status, {1: "S"}, 2, 4, ended)
    assert (st_.phase, st_.succeeded) == ("Finished", 2)


def test_failed_count_survives_deletion_and_failed_phase_sticks():
    status, ended, st_ = _pass(dict(RELEASED), {0: "R", 1: "F"}, 2, 1)
    assert (st_.phase, st_.failed) == ("Failed", 1)
    status, ended, st_ = _pass(status, {0: "S"}, 2, 2, ended)
    assert (st_.phase, st_.failed, st_.succeeded) == ("Failed", 1, 1)
    status, ended, st_ = _pass(status, {}, 2, 3, ended)
    assert (st_.phase, st_.failed, st_.succeeded) == ("Failed", 1, 1)


def test_fresh_release_counts_from_its_own_members():
    status, ended, _ = _pass(dict(RELEASED), {0: "S", 1: "S"}, 2, 1)
    status, ended, _ = _pass(status, {}, 2, 2, ended)
    status, ended, st_ = _pass(status, {5: "G", 6: "G"}, 2, 3, ended, verdict("Released", "fits 2 of 2", 2))
    assert st_.phase == "Scheduling" and st_.scheduleStartTime == format_time(T0 + 3)
    assert (st_.succeeded, st_.failed) == (0, 0)
    status, ended, st_ = _pass(status, {5: "S", 6: "S"}, 2, 9, ended)
    assert (st_.phase, st_.succeeded) == ("Finished", 2)


def test_job_wave_joining_a_finished_group_counts_its_finished_pods():
    """A Job's next wave (finished pods still exist) joins a Finished group: the new gang is
    released at once by the planner (Succeeded members count as bound) and counts them too."""
    status, ended, st_ = _pass(dict(RELEASED), {0: "S", 1: "S", 2: "S"}, 3, 1)
    assert st_.phase == "Finished"
    wave = {0: "S", 1: "S", 2: "S", 3: "G", 4: "G", 5: "G"}
    status, ended, st_ = _pass(status, wave, 3, 2, ended, verdict("Released", "fits 6 of 3", 6))
    assert st_.phase == "Scheduled"  # the 3 succeeded (bound) count toward minMember; the wave is active
    assert st_.succeeded == 3
    status, ended, st_ = _pass(status, {i: "S" for i in range(6)}, 3, 5, ended)
    assert (st_.phase, st_.succeeded) == ("Finished", 6)


@given(st.lists(st.tuples(st.sampled_from(["start", "succeed", "fail", "delete"]), st.integers(0, 5)),
                max_size=40))
def test_ended_counts_are_exact_and_never_decrease_while_the_release_stands(ops):
    """Members start, end and get deleted in any order; with the controller's memory the counts
    equal the members that ever ended so, and never go down."""
    live: dict[int, str] = {}
    ever_s: set[int] = set()
    ever_f: set[int] = set()
    status, ended, _ = _pass(dict(RELEASED), {}, 3, 0)
    last = (0, 0)
    for t, (op, i) in enumerate(ops, 1):
        if op == "start" and i not in live and i not in ever_s | ever_f:
            live[i] = "R"
        elif op in ("succeed", "fail") and live.get(i) == "R":
            live[i] = "S" if op == "succeed" else "F"
            (ever_s if op == "succeed" else ever_f).add(i)
        elif op == "delete" and i in live:
            del live[i]
        status, ended, st_ = _pass(status, dict(live), 3, t, ended)
        assert (st_.succeeded, st_.failed) == (len(ever_s), len(ever_f))
        assert st_.succeeded >= last[0] and st_.failed >= last[1]
        last = (st_.succeeded, st_.failed)
        if st_.phase in ("Finished", "Failed") and not any(s == "R" for s in live.values()):
            assert st_.scheduleStartTime == RELEASED["scheduleStartTime"]


def test_track_ended_first_sight_takes_written_counts_as_base():
    pg = podgroup(2, {**RELEASED, "succeeded": 3, "failed": 1})
    seen = track_ended(None, pg.status, pg, [member("S", 0)], RELEASED["scheduleStartTime"], fresh=False)
    assert (seen.total_succeeded, seen.total_failed) == (3, 1)
    other = track_ended(None, pg.status, pg, [member("S", 0)], format_time(T0 + 50), fresh=False)
    assert (other.total_succeeded, other.total_failed) == (1, 0)  # another release: no base
    fresh = track_ended(seen, pg.status, pg, [], format_time(T0 + 50), fresh=True)
    assert (fresh.total_succeeded, fresh.total_failed) == (0, 0)


# ------------------------------------------------------------------ situation key (event de-duplication)


@pytest.mark.parametrize("a,b,same", [
    ("fits 3 of 4: cpu short by 2 on eligible nodes (at most 1500m free on one node, a member requests 2)",
     "fits 2 of 4: cpu short by 4 on eligible nodes (at most 0 free on one node, a member requests 2)", True),
    ("fits 1 of 2: no eligible node; 1 node excluded by taint", "fits 1 of 2: no eligible node; 3 nodes excluded by taint",
     True),
    ("fits 3 of 4: memory short by 2Gi", "fits 3 of 4: memory short by 512Mi", True),
    ("fits 3 of 4: cpu short by 2", "fits 3 of 4: memory short by 2Gi", False),
    ("fits 3 of 4: cpu short by 2", "fits 3 of 4: cpu short by 2; starving for 301s: later groups wait", False),
    ("waiting behind starving PodGroup ml/big", "waiting behind starving PodGroup ml/other", False),
    ("2 of 3 members present", "1 of 3 members present", True),
    # explanations are not the situation: a new node is briefly NotReady (tainted), pods end
    ("fits 1 of 2: cpu short by 2; 2 nodes excluded by taint", "fits 1 of 2: cpu short by 1; 1 node excluded by "
     "nodeSelector; 1 pod terminating on eligible nodes (old) still holds room until gone", True),
    ("fits 1 of 2: cpu short by 2", "fits 1 of 2: cpu short by 2; 1 node excluded by taint", True),
    ("fits 1 of 2: cpu short by 2", "fits 1 of 2: no eligible node; 1 node excluded by taint", False),
    ("2 of 3 members present", "2 of 3 members present; ResourceQuota compute: requests.cpu 2 of 2 used", False),
])
def test_situation_key_ignores_counts_only(a, b, same):
    assert (situation_key(a) == situation_key(b)) is same


def test_situation_key_of_odd_input():
    assert situation_key("") == ""
    assert situation_key(None) == ""  # type: ignore[arg-type]


# -- messages-only changes (written at most every PROGRESS_WRITE_SECONDS) ----------------------

def _status(*conds, **fields):
    return {"phase": "Pending", **fields,
            "conditions": [{"type": t, "status": s, "reason": r, "message": m,
                            "lastTransitionTime": "2024-01-01T00:00:00Z"} for t, s, r, m in conds]}


WAIT = ("Released", "False", "WaitingForMembers", "5 of 8 members present")


@pytest.mark.parametrize("old,new,expected", [
    (_status(WAIT), [("Released", "False", "WaitingForMembers", "6 of 8 members present")], True),
    (_status(WAIT), [("Released", "False", "WaitingForMembers", "6 of 9 members present")], True),
    (_status(WAIT), [("Released", "False", "WaitingForMembers", "6 of 8 members present, 2 held")], False),
    (_status(WAIT), [("Released", "False", "InsufficientCapacity", "5 of 8 members present")], False),
    (_status(WAIT), [("Released", "True", "WaitingForMembers", "5 of 8 members present")], False),
    (_status(WAIT), [("Released", "False", "WaitingForMembers", "6 of 8 members present"),
                     ("FitsCluster", "True", "Fits", "fits")], False),
    (_status(WAIT, ("FitsCluster", "True", "Fits", "fits 8")),
     [("Released", "False", "WaitingForMembers", "6 of 8 members present")], False),
    (_status(("Released", "False", "InsufficientCapacity", "fits 1 of 2: cpu short by 1")),
     [("Released", "False", "InsufficientCapacity", "fits 1 of 2: memory short by 1Gi")], False),
    (None, [("Released", "False", "WaitingForMembers", "6 of 8 members present")], False),
    (_status(("Released", "False", "WaitingForMembers", "6 of 8 members present.")),
     [("Released", "False", "WaitingForMembers", "7 of 8 members present.")], True),
    (_status(("Released", "False", "WaitingForMembers", "6 of 8 present; 1 held by other gates (w-1: x)")),
     [("Released", "False", "WaitingForMembers", "6 of 8 present; 1 held by other gates (w-2: x)")], False),
    (_status(("Released", "False", "InsufficientCapacity", "fits 1 of 2: memory short by 1Gi on node3")),
     [("Released", "False", "InsufficientCapacity", "fits 1 of 2: memory short by 2Gi on node3")], False),
    (_status(("Released", "False", "InsufficientCapacity", "fits 1 of 2: short on node3")),
     [("Released", "False", "InsufficientCapacity", "fits 1 of 2: short on node4")], False),
])
def test_progress_only_is_a_change_of_numbers_in_messages(old, new, expected):
    body = {"status": {"conditions": [{"type": t, "status": s, "reason": r, "message": m,
                                       "lastTransitionTime": "2024-01-01T00:00:00Z"} for t, s, r, m in new]}}
    assert progress_only(old, body) is expected


@pytest.mark.parametrize("body", [None, {}, {"status": {}}, {"status": {"phase": "Running"}},
                                  {"status": {"running": 3, "conditions": []}}])
def test_other_changes_are_not_progress_only(body):
    assert progress_only(_status(WAIT), body) is False
