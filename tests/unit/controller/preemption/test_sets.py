"""Preemption with role minimums and sets of PodGroups (cogate.controller.preemption.sets; issue 33).

Properties on small random groups (two roles and members of no role, some bound):
* victims are asked for at least every role's minimum (minMember raised to their sum);
* a selection is kept exactly when its plan and the bound members hold every role's minimum (a
  brute count), so victims never go for a group its roles keep gated;
* a group of a set that is not released preempts nothing (``InSet``), whatever the selection;
  a released one (new members joining) and a group of no set are asked as before.
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from cogate.api import DEFAULT_GATE_NAME as GATE
from cogate.api import POD_GROUP_LABEL
from cogate.controller.model import groupsets
from cogate.controller.model import roles as roles_mod
from cogate.controller.model.records import PodInfo
from cogate.controller.model.verdicts import GroupRequest
from cogate.controller.preemption.sets import alone, with_roles
from cogate.controller.preemption.victims import NoPreemption, Preemption, Reason

ROLE = "tier"


def member(i: int, role: str, bound: bool) -> PodInfo:
    labels = {POD_GROUP_LABEL: "g", **({ROLE: role} if role else {})}
    if bound:
        return PodInfo("default", f"m{i}", f"u{i}", labels=labels, requests={"cpu": 1000}, node_name="n0",
                       phase="Running", created=float(i))
    return PodInfo("default", f"m{i}", f"u{i}", labels=labels, requests={"cpu": 1000}, gates=(GATE,),
                   created=float(i))


def request(members, min_member: int, minimums: dict[str, int] | None, released: bool = False,
            group_set: groupsets.SetSpec | None = None) -> GroupRequest:
    roles = None if not minimums else roles_mod.Roles(tuple(sorted(minimums.items())), ROLE)
    return GroupRequest("default", "g", min_member, 0.0, released, tuple(members), roles=roles, group_set=group_set)


def preemption(plan: list[str]) -> Preemption:
    return Preemption((), {u: "n0" for u in plan}, 100, ())


groups = st.lists(st.tuples(st.sampled_from(["a", "b", ""]), st.booleans()), min_size=1, max_size=8)


@settings(max_examples=300, deadline=None)
@given(groups, st.integers(1, 8), st.integers(0, 3), st.integers(0, 3), st.data())
def test_kept_exactly_when_every_role_minimum_holds(shape, min_member, min_a, min_b, data):
    members = [member(i, role, bound) for i, (role, bound) in enumerate(shape)]
    minimums = {k: n for k, n in (("a", min_a), ("b", min_b)) if n}
    r = request(members, min_member, minimums)
    gated = [m.uid for m in members if not m.bound]
    plan = data.draw(st.lists(st.sampled_from(gated), unique=True) if gated else st.just([]))
    asked: list[GroupRequest] = []

    def select(q: GroupRequest):
        asked.append(q)
        return preemption(plan)

    answer = with_roles(r, select)
    assert len(asked) == 1
    assert asked[0].min_member == max(min_member, min_a + min_b if minimums else 0)
    placed = [m for m in members if m.bound or m.uid in plan]
    holds = all(sum(1 for m in placed if m.labels.get(ROLE) == role) >= n for role, n in minimums.items())
    if holds:
        assert answer == preemption(plan)
    else:
        assert isinstance(answer, NoPreemption) and answer.reason is Reason.ROLE_MINIMUMS, answer
        short = [role for role, n in sorted(minimums.items())
                 if sum(1 for m in placed if m.labels.get(ROLE) == role) < n]
        assert all(f"role {role} fits" in answer.message for role in short), answer.message


def test_a_no_preemption_answer_and_groups_without_roles_pass_through():
    ms = [member(0, "a", False)]
    no = NoPreemption(Reason.NO_LOWER_PRIORITY_PODS, "none")
    assert with_roles(request(ms, 1, {"a": 1}), lambda q: no) is no
    plain = request(ms, 1, None)
    assert with_roles(plain, lambda q: preemption([]) if q is plain else no) == preemption([])
    released = request(ms, 1, {"a": 3}, released=True)
    assert with_roles(released, lambda q: preemption([]) if q is released else no) == preemption([])


def test_the_message_names_the_short_role():
    ms = [member(0, "a", False), member(1, "b", False), member(2, "b", False)]
    answer = with_roles(request(ms, 1, {"a": 1, "b": 2}), lambda q: preemption(["u0", "u1"]))
    assert answer == NoPreemption(Reason.ROLE_MINIMUMS, "PodGroup default/g preempts nothing: with the victims found, "
                                  "role b fits 1 of 2 (the group is released only with every role's minimum, so they "
                                  "would go in vain)")


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["ps", "workers", "other/x", "w2"]), min_size=1, max_size=3, unique=True),
       st.booleans())
def test_a_group_of_a_set_preempts_nothing_before_its_release(names, released):
    spec = groupsets.parse("default", "g", {groupsets.SET_ANNOTATION: json.dumps(names)})
    r = request([member(0, "", False)], 1, None, released=released, group_set=spec)
    answer = alone(r)
    if released:
        assert answer is None
    else:
        assert isinstance(answer, NoPreemption) and answer.reason is Reason.IN_SET
        assert answer.message.startswith("PodGroup default/g preempts nothing: it is one PodGroup of set [")
    assert alone(request([member(0, "", False)], 1, None, released=released)) is None
