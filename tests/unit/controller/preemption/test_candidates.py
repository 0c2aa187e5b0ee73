"""Who may be a victim (controller/preemption/candidates.py; issue 28 item 3): the candidate test
(rules 1 and 6) and the other gangs' bound members, read from a Snapshot or from the planning
state's view alike. select_victims' own tests (test_preemption*.py) cover them end to end."""

from __future__ import annotations

from cogate.api import POD_GROUP_LABEL
from cogate.controller.planning.capacity import Snapshot
from cogate.controller.planning.planstate import PlanningState
from cogate.controller.preemption.candidates import candidate_rule, gang_members

from tests.builders import node
from tests.unit.controller.preemption.test_preemption import gang_pod, pod


def test_a_candidate_is_below_the_priority_not_deleting_not_the_groups_nor_an_untouchable_gangs():
    is_candidate = candidate_rule(100, {"u-mine"}, ("team", "g"), {("batch", "keep")})
    assert is_candidate(pod("low", "n1", 1, 99))
    assert not is_candidate(pod("equal", "n1", 1, 100))  # strictly lower: equal priority never preempts
    assert not is_candidate(pod("going", "n1", 1, 0, deleting=True))
    assert not is_candidate(pod("mine", "n1", 1, 0, ns="team"))  # by uid
    assert not is_candidate(pod("labelled", "n1", 1, 0, ns="team", labels={POD_GROUP_LABEL: "g"}))  # by label
    assert is_candidate(pod("namesake", "n1", 1, 0, ns="other", labels={POD_GROUP_LABEL: "g"}))  # label per namespace
    assert not is_candidate(gang_pod("keep", 0, "n1", 1))
    assert is_candidate(gang_pod("job", 0, "n1", 1))


def test_the_gangs_bound_members_are_the_same_from_a_snapshot_and_from_the_view():
    nodes = [node("n1").cpu(4).info(), node("n2").cpu(4).info()]
    pods = [gang_pod("job", 0, "n1", 1), gang_pod("job", 1, "n2", 1), gang_pod("job", 2, "n2", 1, deleting=True),
            gang_pod("other", 0, "n1", 1), pod("alone", "n1", 1, 0)]
    gang_min = {("batch", "job"): 2, ("batch", "none"): 1}
    snapshot = Snapshot(nodes, pods, False)
    view = PlanningState.build(nodes, pods).bound_view()
    from_snapshot = gang_members(gang_min, snapshot.table.index, snapshot=snapshot)
    from_view = gang_members(gang_min, view.table.index, view=view)
    names = {gk: sorted((p.name, i) for p, i in ps) for gk, ps in from_snapshot.items()}
    assert names == {("batch", "job"): [("job-0", 0), ("job-1", 1)]}  # not the deleting one, only listed gangs
    assert {gk: sorted((p.name, i) for p, i in ps) for gk, ps in from_view.items()} == names
    assert gang_members({}, snapshot.table.index, snapshot=snapshot) == {}
