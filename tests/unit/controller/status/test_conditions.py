"""controller.conditions: one module owns every PodGroup condition type (issue 14).

The rules themselves are proved through their callers (tests/unit/controller/status/test_status.py,
tests/unit/controller/status/test_lifecycle.py); here: the types, the names kept public elsewhere, and the
metav1.Condition building rule.
"""

from __future__ import annotations

from cogate.controller.status import conditions, lifecycle, status
from cogate.models import Condition, format_time

T0 = 1_714_557_600.0


def test_every_condition_type_is_named_here():
    types = {v for k, v in vars(conditions).items() if k.startswith("CONDITION_")}
    assert types == {"Released", "FitsCluster", "TimedOut", "PlannedNodesUsable", "ReleaseAccepted", "Disrupted",
                     "MembersWaiting", "Preempting", "Provisioning", "Satisfied", "Recovery", "OwnerCanComplete"}


def test_the_old_names_are_the_same_objects():
    assert status.CONDITION_RELEASED is conditions.CONDITION_RELEASED
    assert status.CONDITION_TIMED_OUT is conditions.CONDITION_TIMED_OUT
    assert status.CONDITION_FITS_CLUSTER is conditions.CONDITION_FITS_CLUSTER
    assert status.REASON_MEMBERS_BOUND is conditions.REASON_MEMBERS_BOUND
    assert status.condition is conditions.condition
    assert status.released_reason is conditions.released_reason
    assert lifecycle.CONDITION_PLANNED_NODES_USABLE is conditions.CONDITION_PLANNED_NODES_USABLE
    assert lifecycle.CONDITION_RELEASE_ACCEPTED is conditions.CONDITION_RELEASE_ACCEPTED
    assert lifecycle.CONDITION_DISRUPTED is conditions.CONDITION_DISRUPTED
    assert lifecycle.CONDITION_MEMBERS_WAITING is conditions.CONDITION_MEMBERS_WAITING
    assert lifecycle.REASON_QUORUM_LOST is conditions.REASON_QUORUM_LOST


def test_last_transition_time_moves_only_with_status():
    old = Condition(type="Released", status="False", reason="WaitingForMembers", message="1 of 2",
                    lastTransitionTime=format_time(T0))
    conds = conditions.ConditionSet([old], T0 + 60, 2)
    conds.put("Released", "False", "InsufficientCapacity", "fits 1 of 2")
    assert conds.get("Released").lastTransitionTime == format_time(T0)
    conds.put("Released", "True", "Released", "x" * 40000)
    got = conds.get("Released")
    assert got.lastTransitionTime == format_time(T0 + 60) and len(got.message) == 32768
    assert got.observedGeneration == 2


def test_flip_back_never_creates_a_fine_condition():
    conds = conditions.ConditionSet([], T0, None)
    conds.flip_back("ReleaseAccepted", "False", "True", "ReleaseAccepted", "ok")
    assert conds.to_list() == []


def test_release_refused_keeps_a_true_released():
    true = Condition(type="Released", status="True", reason="Released", message="m",
                     lastTransitionTime=format_time(T0))
    conds = conditions.ConditionSet([true], T0 + 1, None)
    conditions.write_release_accepted(conds, refused="denied", releases=False)
    assert conds.get("Released") == true
    assert conds.get("ReleaseAccepted").reason == "ReleaseRefused"
    conds = conditions.ConditionSet([], T0 + 1, None)
    conditions.write_release_accepted(conds, refused="denied", releases=False)
    assert [(c.type, c.status, c.reason) for c in conds.to_list()] == [
        ("ReleaseAccepted", "False", "ReleaseRefused"), ("Released", "False", "ReleaseRefused")]


def test_preempting_true_while_in_flight_then_false_with_the_reason():
    conds = conditions.ConditionSet([], T0, 3)
    conditions.write_preempting(conds, active="preempting 1 pod (ns/a) of priority <= 100", reason="", message="")
    c = conds.get("Preempting")
    assert (c.status, c.reason, c.observedGeneration) == ("True", "Preempting", 3)
    assert c.message.startswith("preempting 1 pod (ns/a)")
    later = conditions.ConditionSet(conds.to_list(), T0 + 5, 3)
    conditions.write_preempting(later, active="", reason="Placed", message="placed on the room freed")
    c2 = later.get("Preempting")
    assert (c2.status, c2.reason, c2.message) == ("False", "Placed", "placed on the room freed")
    assert c2.lastTransitionTime == format_time(T0 + 5)


def test_preempting_is_not_created_without_something_to_say():
    conds = conditions.ConditionSet([], T0, 1)
    conditions.write_preempting(conds, active="", reason="", message="")
    assert conds.get("Preempting") is None


def test_a_true_preempting_left_by_an_earlier_process_turns_false_interrupted():
    conds = conditions.ConditionSet([], T0, 1)
    conditions.write_preempting(conds, active="preempting 1 pod (ns/a)", reason="", message="")
    after = conditions.ConditionSet(conds.to_list(), T0 + 9, 1)
    conditions.write_preempting(after, active="", reason="", message="")
    c = after.get("Preempting")
    assert (c.status, c.reason) == ("False", "Interrupted") and "restarted" in c.message
    again = conditions.ConditionSet(after.to_list(), T0 + 20, 1)
    conditions.write_preempting(again, active="", reason="", message="")
    assert again.get("Preempting") == c  # a False one is left as it is
