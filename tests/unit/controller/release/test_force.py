"""Force-release: the pure rules (controller/release/force.py) and the room through real passes
(controller/release/forcing.py, the reconciler with the real planner: tests.builders.World)."""

from __future__ import annotations

import pytest

from cogate.controller.model.verdicts import GroupVerdict, Outcome
from cogate.controller.release import force
from cogate.controller.status.inputs import annotation_writer, group_object
from tests.builders import World, group_request, pod, raw_pg, ready_node
from tests.builders.objects import GATE, NS

ANN = "cogate.dev/force-release"


# -- the annotation ---------------------------------------------------------------------------------

@pytest.mark.parametrize("annotations, state", [
    (None, force.State.OFF), ({}, force.State.OFF), ({"other": "true"}, force.State.OFF),
    ({ANN: "true"}, force.State.ON), ({ANN: " TRUE "}, force.State.ON), ({ANN: "True"}, force.State.ON),
    ({ANN: "false"}, force.State.OFF), ({ANN: "False"}, force.State.OFF),
    ({ANN: "yes"}, force.State.INVALID), ({ANN: ""}, force.State.INVALID), ({ANN: "1"}, force.State.INVALID),
])
def test_the_annotation_is_true_false_or_invalid(annotations, state):
    assert force.requested(annotations)[0] is state


def test_the_invalid_message_names_the_value_and_the_allowed_ones():
    text = force.invalid_message("yes")
    assert "'yes'" in text and '"true"' in text and '"false"' in text and ANN in text


# -- the verdict ------------------------------------------------------------------------------------

def _v(outcome, release=None, message="fits 3 of 4: cpu short by 2", waiting=()):
    return GroupVerdict(NS, "g", Outcome(outcome), release or {}, 3, message, waiting)


GATED = [pod(f"p{i}").group("g").gated().info() for i in range(6)]


@pytest.mark.parametrize("outcome", [Outcome.INSUFFICIENT_CAPACITY, Outcome.EXCEEDS_CLUSTER_CAPACITY,
                                     Outcome.WAITING_FOR_MEMBERS, Outcome.UNSCHEDULABLE])
def test_a_held_group_is_released_whole_unpinned_whatever_the_plan_says(outcome):
    req = group_request(GATED, 4)
    new = force.forced(_v(outcome), req, GATE, ("kubectl-annotate", "2026-01-01T00:00:00Z"))
    assert new.outcome is Outcome.RELEASED
    assert new.release == {p.uid: "" for p in GATED}, "every gated member, unpinned"
    assert force.is_forced(new) and not force.is_forced(_v(outcome))
    assert "kubectl-annotate at 2026-01-01T00:00:00Z" in new.message and "6 gated members" in new.message
    assert "minMember 4" in new.message and new.waiting == () and new.min_resources_short == ()


def test_a_planned_release_loses_its_pins():
    req = group_request(GATED[:4], 4)
    new = force.forced(_v(Outcome.RELEASED, {p.uid: "n1" for p in GATED[:4]}, "fits"), req, GATE)
    assert set(new.release.values()) == {""} and force.is_forced(new)


def test_a_released_group_with_members_waiting_for_room_releases_them_and_keeps_the_bound_ones():
    bound = [pod(f"b{i}").group("g").on("n1").info() for i in range(3)]
    waiting = GATED[:2]
    req = group_request(bound + waiting, 3, released=True)
    new = force.forced(_v(Outcome.ALREADY_RELEASED, waiting=tuple(p.name for p in waiting)), req, GATE)
    assert new.outcome is Outcome.ALREADY_RELEASED
    assert new.release == {p.uid: "" for p in waiting}, "bound members carry no gate: not touched"
    assert new.waiting == ()


def test_nothing_gated_leaves_the_verdict_as_it_is():
    bound = [pod(f"b{i}").group("g").on("n1").info() for i in range(3)]
    done = pod("done").group("g").gated().phase("Succeeded").info()
    other = pod("other").group("g").gated("example.com/other").info()
    for members, outcome in ((bound, Outcome.ALREADY_RELEASED), ([], Outcome.WAITING_FOR_MEMBERS),
                             ([done, other], Outcome.WAITING_FOR_MEMBERS)):
        v = _v(outcome)
        assert force.forced(v, group_request(members, 3, released=bool(bound)), GATE) is v


def test_who_set_the_annotation_comes_from_managed_fields():
    meta = {"managedFields": [
        {"manager": "kubectl-client-side-apply", "time": "2026-01-01T00:00:00Z",
         "fieldsV1": {"f:spec": {"f:minMember": {}}}},
        {"manager": "kubectl-annotate", "time": "2026-01-02T00:00:00Z",
         "fieldsV1": {"f:metadata": {"f:annotations": {f"f:{ANN}": {}}}}}]}
    assert annotation_writer(meta, ANN) == ("kubectl-annotate", "2026-01-02T00:00:00Z")
    assert annotation_writer({}, ANN) == () and annotation_writer({"managedFields": "junk"}, ANN) == ()
    assert annotation_writer({"managedFields": [1, {"fieldsV1": []}, {"fieldsV1": {"f:metadata": 3}}]}, ANN) == ()
    raw = raw_pg("g", 4)
    raw["metadata"].update(meta)
    assert group_object(raw).force_release_by == ("kubectl-annotate", "2026-01-02T00:00:00Z")
    assert force.who(()) == "" and force.who(("m", "")) == "set by m"


# -- through passes of the reconciler with the real planner (the README example, minMember 4) ------

def _readme(min_member=4, annotation=None, bound=0):
    """One node of 10 CPU; six 3-CPU members of PodGroup ``pg`` (``bound`` of them on the node)."""
    pods = [pod(f"nginx-{i}").req(cpu="3").group("pg").gated().raw() for i in range(bound, 6)]
    pods += [pod(f"nginx-{i}").req(cpu="3").group("pg").on("n1").raw() for i in range(bound)]
    pg = raw_pg("pg", min_member)
    if annotation is not None:
        pg["metadata"]["annotations"] = {ANN: annotation}
    w = World(pods, [pg], nodes=(ready_node("n1", "10"),), preemption=False)
    w.condition_type = "Released"
    return w


def test_without_the_annotation_the_readme_example_stays_gated():
    w = _readme()
    w.run()
    assert all(w.gated(f"nginx-{i}") for i in range(6))
    assert w.condition()["reason"] == "InsufficientCapacity"


def test_annotated_the_readme_example_is_released_whole_unpinned_with_an_event_and_a_condition():
    w = _readme()
    w.run()
    w.cluster.pgs["pg"]["metadata"]["annotations"] = {ANN: "true"}
    w.cluster.pgs["pg"]["metadata"]["managedFields"] = [
        {"manager": "kubectl-annotate", "time": "2026-01-02T00:00:00Z",
         "fieldsV1": {"f:metadata": {"f:annotations": {f"f:{ANN}": {}}}}}]
    w.run(1)
    assert not any(w.gated(f"nginx-{i}") for i in range(6)), "all six ungated in the next pass"
    assert not any(w.cluster.pods[f"nginx-{i}"]["spec"].get("affinity") for i in range(6)), "unpinned"
    cond = w.condition()
    assert (cond["status"], cond["reason"]) == ("True", "ForceReleased")
    assert "kubectl-annotate" in cond["message"]
    status = w.cluster.pgs["pg"]["status"]
    assert status["phase"] == "Scheduling" and status["scheduleStartTime"]
    (event,) = w.reasons("ForceReleased")
    assert event[0] == "Normal" and "6 gated members" in event[3] and "nginx-0" in event[3]
    assert "kubectl-annotate at 2026-01-02T00:00:00Z" in event[3]
    for i in range(3):  # kube-scheduler binds what fits; the group is a standing release
        w.bind(f"nginx-{i}", "n1")
    w.run(1)
    assert w.condition()["reason"] == "ForceReleased", "kept while the release stands"
    assert len(w.reasons("ForceReleased")) == 1, "told once"


def test_members_created_while_the_annotation_stays_are_released_too_and_not_after_it_is_removed():
    w = _readme(annotation="true")
    w.run()
    assert not any(w.gated(f"nginx-{i}") for i in range(6))
    w.cluster.pods["late"] = pod("late").req(cpu="3").group("pg").gated().raw()
    w.run(1)
    assert not w.gated("late")
    assert len(w.reasons("ForceReleased")) == 2
    del w.cluster.pgs["pg"]["metadata"]["annotations"]
    for i in range(3):  # kube-scheduler fills the node
        w.bind(f"nginx-{i}", "n1")
    w.cluster.pods["later"] = pod("later").req(cpu="3").group("pg").gated().raw()
    w.run(1)
    assert w.gated("later"), "the planner again: no room for it on the full node"
    assert len(w.reasons("ForceReleased")) == 2


def test_a_released_group_whose_new_members_wait_for_room_gets_them_released():
    w = _readme(min_member=3, bound=3)
    pg = w.cluster.pgs["pg"]
    pg["status"] = {"phase": "Running", "scheduleStartTime": "2024-01-01T00:00:00Z"}
    w.run()
    assert all(w.gated(f"nginx-{i}") for i in range(3, 6))
    assert w.condition("pg", "MembersWaiting")["status"] == "True"
    pg["metadata"]["annotations"] = {ANN: "true"}
    w.run(1)
    assert not any(w.gated(f"nginx-{i}") for i in range(3, 6))
    assert w.condition("pg", "MembersWaiting")["status"] == "False"
    assert w.reasons("ForceReleased")


@pytest.mark.parametrize("value", ["yes", "", "please"])
def test_a_bad_value_is_reported_once_and_ignored(value):
    w = _readme(annotation=value)
    w.run()
    w.run(1)
    assert all(w.gated(f"nginx-{i}") for i in range(6))
    (event,) = w.reasons("InvalidForceRelease")
    assert event[0] == "Warning" and repr(value) in event[3]
    assert w.condition()["reason"] == "InsufficientCapacity"


def test_a_podgroup_that_fails_validation_is_not_forced_and_says_why():
    """The controller cannot read it (InvalidObject): `cogate ungate --group` is the way out (docs/troubleshooting.md)."""
    w = _readme(annotation="true")
    w.cluster.pgs["pg"]["spec"]["minResources"] = {"cpu": "lots"}
    w.run()
    assert all(w.gated(f"nginx-{i}") for i in range(6))
    assert not w.reasons("ForceReleased")


def test_a_refused_force_release_is_reported_and_backs_off_like_any_release():
    from tests.builders.fakes import ApiError

    w = _readme(annotation="true")
    for i in range(6):
        w.cluster.pod_errors[f"nginx-{i}"] = [ApiError(403, "denied by policy")] * 3
    w.run()
    w.run(1)
    assert all(w.gated(f"nginx-{i}") for i in range(6))
    assert w.condition("pg", "ReleaseAccepted")["reason"] == "ReleaseRefused"
    assert w.reasons("ReleaseRefused") and not w.reasons("ForceReleased")
    w.run(10)  # after the back-off, the policy lets them through
    assert not any(w.gated(f"nginx-{i}") for i in range(6))
    assert w.reasons("ForceReleased")


@pytest.mark.parametrize("min_member", [4, 5])
def test_a_forced_release_leaves_fits_cluster_as_the_planner_said(min_member):
    """Forcing a gang that can never fit (the README example with minMember 4 or 5: one node of
    10 CPU holds 3 members of 3 CPU) must not turn ``FitsCluster`` True: the forced pass is no
    planner's answer (found by a new user: it said "minMember 5 fits on the eligible nodes when they
    have room")."""
    w = _readme(min_member=min_member)
    w.run()
    before = w.condition(type_="FitsCluster")
    assert (before["status"], before["reason"]) == ("False", "ExceedsClusterCapacity"), before
    w.cluster.pgs["pg"]["metadata"]["annotations"] = {ANN: "true"}
    w.run(1)
    assert not any(w.gated(f"nginx-{i}") for i in range(6)), "forced"
    for i in range(3):
        w.bind(f"nginx-{i}", "n1")
    w.run(1)
    after = w.condition(type_="FitsCluster")
    assert (after["status"], after["reason"], after["message"]) == ("False", "ExceedsClusterCapacity",
                                                                    before["message"]), after
