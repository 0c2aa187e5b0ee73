"""The gang's health after the start (docs/semantics.md "Health after the start"): the two-way
``Satisfied`` condition, the ``Recovery`` condition and ``Failed``, the ``whole`` recovery rule."""

from __future__ import annotations

import pytest

from cogate import api
from cogate.controller.model import recovery
from cogate.controller.model.records import PodInfo
from cogate.controller.status import conditions as cond_mod
from cogate.controller.status import lifecycle
from cogate.controller.status import status as status_mod
from cogate.models import Condition, PodGroupStatus

from tests.builders import NS, podgroup

GATE = api.DEFAULT_GATE_NAME
NOW = 1_704_067_300.0
START = "2024-01-01T00:00:00Z"


def member(name, *, node="", gates=(), phase=None, created=0.0):
    return PodInfo(NS, name, "uid-" + name, labels={api.POD_GROUP_LABEL: "g"}, node_name=node,
                   phase=phase or ("Running" if node else "Pending"), requests={"cpu": 1000}, gates=tuple(gates),
                   has_controller=True, created=created)


def pg(min_member=4, annotations=None, conditions=(), **status):
    b = podgroup("g").uid("u1").created(None).rv(None).min_member(min_member)
    b.status(conditions=[c.model_dump(exclude_none=True) if isinstance(c, Condition) else c for c in conditions],
             **status)
    raw = b.raw()
    if annotations:
        raw["metadata"]["annotations"] = annotations
    from cogate.models import PodGroup
    return PodGroup.model_validate(raw)


def conditions_after(g, members, findings=lifecycle.Findings(), outcome="AlreadyReleased", now=NOW):
    st = status_mod.compute_status(g, members, None, now, GATE)
    return lifecycle.lifecycle_conditions(st, g.status, g, members, outcome, "", findings, now)


def placed(n, total=4, gated_at=NOW):
    """``n`` members bound, the rest up to ``total`` gated, created at ``gated_at`` (NOW: after the release)."""
    return [member(f"k-{i}", node=f"n{i}") for i in range(n)] + \
        [member(f"k-{i}", gates=(GATE,), created=gated_at) for i in range(n, total)]


def test_nothing_is_said_before_the_first_release():
    st = conditions_after(pg(4), placed(0), outcome="InsufficientCapacity")
    assert st.condition("Satisfied") is None


def test_satisfied_goes_both_ways_within_one_pass():
    g = pg(4, phase="Scheduling", scheduleStartTime=START)
    st = conditions_after(g, placed(2, gated_at=0.0))  # planned by the release, not bound yet
    assert (st.condition("Satisfied").status, st.condition("Satisfied").reason) == ("False", "WaitingForQuorum")
    g = pg(4, phase="Scheduling", scheduleStartTime=START, conditions=st.conditions)
    st = conditions_after(g, placed(4))
    c = st.condition("Satisfied")
    assert (c.status, c.reason, c.message) == ("True", "QuorumPlaced", "4 of minMember 4 members placed")
    # a node goes with k-3: the pass that sees it says so, with who left
    g = pg(4, phase="Running", scheduleStartTime=START, conditions=st.conditions)
    gone = lifecycle.Departure(member("k-3", node="n3"), "deleted by the pod garbage collector (node gone)")
    st = conditions_after(g, placed(3, 3), lifecycle.Findings(lost=(gone,)), now=NOW + 5)
    c = st.condition("Satisfied")
    assert (c.status, c.reason) == ("False", "QuorumLost")
    assert c.message.startswith("3 of minMember 4 members placed; member k-3 left") and "node gone" in c.message
    assert c.message.count("of minMember") == 1, c.message  # the count once (issue 29)
    # the next pass keeps who left; the gang back whole: True again
    g = pg(4, phase="Scheduling", scheduleStartTime=START, conditions=st.conditions)
    st2 = conditions_after(g, placed(3, 4), now=NOW + 6)
    assert st2.condition("Satisfied").message == c.message
    st3 = conditions_after(g, placed(4), now=NOW + 7)
    assert st3.condition("Satisfied").status == "True"


def test_a_group_released_before_satisfied_existed_counts_as_having_reached_its_quorum():
    g = pg(4, phase="Running", scheduleStartTime=START)  # no Satisfied condition yet
    assert lifecycle.reached_quorum(g) and lifecycle.below_quorum(g, placed(3))
    st = conditions_after(g, placed(3))
    assert st.condition("Satisfied").reason == "QuorumLost"


def test_finished_members_of_a_job_are_no_lost_quorum():
    # a Job's pods finish and are deleted while the next ones run: the release's Succeeded count
    g = pg(2, phase="Running", scheduleStartTime=START, succeeded=3,
           conditions=[Condition(type="Satisfied", status="True", reason="QuorumPlaced", message="",
                                 lastTransitionTime=START)])
    ms = [member("j-4", node="n1")]
    assert not lifecycle.below_quorum(g, ms)
    assert conditions_after(g, ms).condition("Satisfied").status == "True"


def test_finished_group_says_finished():
    g = pg(2, phase="Running", scheduleStartTime=START,
           conditions=[Condition(type="Satisfied", status="True", reason="QuorumPlaced", message="",
                                 lastTransitionTime=START)])
    ms = [member("k-0", node="n1", phase="Succeeded"), member("k-1", node="n1", phase="Succeeded")]
    st = conditions_after(g, ms)
    assert st.phase == "Finished" and st.condition("Satisfied").reason == "Finished"


def test_recovery_condition_and_failed_phase_follow_the_step():
    policy = recovery.Policy(deadline=10, limit=1)
    lost = [Condition(type="Satisfied", status="False", reason="QuorumLost", message="3 of minMember 4",
                      lastTransitionTime=START)]
    g = pg(4, phase="Scheduling", scheduleStartTime=START, conditions=lost)
    waiting = recovery.step(policy, None, below=True, now=NOW)
    st = conditions_after(g, placed(3), lifecycle.Findings(recovery=waiting))
    assert (st.condition("Recovery").status, st.condition("Recovery").reason) == ("True", "WaitingForQuorum")
    evicted = recovery.step(policy, waiting.record, below=True, now=NOW + 10)
    assert evicted.action is recovery.Action.EVICT
    st = conditions_after(g, placed(0), lifecycle.Findings(recovery=evicted), now=NOW + 10)
    assert st.condition("Recovery").reason == "MembersEvicted"
    assert recovery.record_of(st.condition("Recovery")).rounds == 1  # what a restart reads back
    failed = recovery.step(policy, evicted.record, below=True, now=NOW + 30)
    assert failed.action is recovery.Action.FAIL
    st = conditions_after(g, placed(0), lifecycle.Findings(recovery=failed), now=NOW + 30)
    assert st.phase == "Failed"
    assert (st.condition("Recovery").status, st.condition("Recovery").reason) == ("False", "RecoveryFailed")
    assert st.condition("Satisfied").reason == "RecoveryFailed"
    # room comes back and the gang re-forms: the recovery is over, phase as counted
    g = pg(4, phase="Failed", scheduleStartTime=START, conditions=st.conditions)
    back = recovery.step(policy, failed.record, below=lifecycle.below_quorum(g, placed(4)), now=NOW + 60)
    st = conditions_after(g, placed(4), lifecycle.Findings(recovery=back), outcome="Released", now=NOW + 60)
    assert st.phase != "Failed" and st.condition("Satisfied").status == "True"
    assert (st.condition("Recovery").status, st.condition("Recovery").reason) == ("False", "Recovered")


@pytest.mark.parametrize("whole,stands", [(False, True), (True, False)])
def test_whole_ends_the_release_at_the_first_member_lost(whole, stands):
    # minMember 2 of 3: one member lost, 2 still placed, the replacement back gated
    disrupted = Condition(type="Disrupted", status="True", reason="MemberLost", message="k-2 left",
                          lastTransitionTime=START)
    st = PodGroupStatus(phase="Running", scheduleStartTime=START, conditions=[disrupted])
    ms = [member("k-0", node="n1"), member("k-1", node="n1"), member("k-3", gates=(GATE,), created=NOW)]
    assert status_mod.release_stands(st, ms, GATE, min_member=2, whole=whole) is stands
    if whole:
        assert "recovery: whole" in status_mod.release_end(st, ms, 2, GATE, whole=True)


def test_whole_keeps_member_lost_until_the_fresh_release():
    for whole, want in ((False, "False"), (True, "True")):
        conds = cond_mod.ConditionSet([Condition(type="Disrupted", status="True", reason="MemberLost", message="x",
                                                 lastTransitionTime=START)], NOW, 1)
        cond_mod.write_disrupted(conds, quorum_evicted="", lost="", runners="", fresh=False, placed=3, min_member=2,
                                 whole=whole)
        assert conds.get("Disrupted").status == want


PRIOR_DISRUPTED = (None, ("True", "MemberLost"), ("True", "UngatedWithoutRelease"), ("False", "MembersPlaced"),
                   ("False", "Released"))


@pytest.mark.parametrize("prior", PRIOR_DISRUPTED)
@pytest.mark.parametrize("whole", [False, True])
def test_a_departure_disrupts_the_gang_only_below_min_member_or_with_recovery_whole(prior, whole):
    """The kind of the PyTorchJob scale-down failure: an operator lowers minMember and deletes members
    in one pass, or a member beyond minMember is deleted. Every departure is told (the message names
    it and the members placed); ``Disrupted`` is True only when fewer than minMember are placed after
    it, or with ``cogate.dev/recovery: whole``; otherwise False/MembersPlaced, whatever was written before."""
    for min_member in range(1, 5):
        for left in range(0, 5):
            conds = [] if prior is None else [Condition(type="Disrupted", status=prior[0], reason=prior[1],
                                                        message="before", lastTransitionTime=START)]
            g = pg(min_member, annotations={"cogate.dev/recovery": "whole"} if whole else None,
                   phase="Running", scheduleStartTime=START, conditions=conds)
            ms = [member(f"k-{i}", node=f"n{i}") for i in range(left)]
            gone = (lifecycle.Departure(member("k-9", node="n9"), "deleted"),)
            st = conditions_after(g, ms, lifecycle.Findings(lost=gone))
            d = st.condition("Disrupted")
            want = ("True", "MemberLost") if left < min_member or whole else ("False", "MembersPlaced")
            assert (d.status, d.reason) == want, (min_member, left, whole, prior, d)
            assert d.message == f"member k-9 left the released group: deleted; {left} of minMember {min_member} placed"
            # the next pass without a departure: a loss that left minMember placed stays told, not disrupted
            again = conditions_after(pg(min_member, annotations=g.metadata.annotations, phase="Running",
                                        scheduleStartTime=START, conditions=st.conditions), ms)
            d2 = again.condition("Disrupted")
            if want[0] == "False":
                assert (d2.status, d2.reason, d2.message) == ("False", "MembersPlaced", d.message)
            else:
                assert (d2.status, d2.reason) == ("True", "MemberLost"), (min_member, left, whole, d2)
