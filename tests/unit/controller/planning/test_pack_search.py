"""The planner's packing against a brute force (issue 29: planner packing false negatives).

Greedy packing (largest member on the tightest node first) can miss a plan that exists: members of
3, 2 and 2 CPUs on nodes with 4 and 3 free put the 3 on the 4 and leave a 2 without room. When the
greedy strategies miss, :func:`cogate.controller.planning.capacity.pack` searches exhaustively
for groups of at most ``SEARCH_MEMBERS`` members. Checked here on small worlds (1 to 3 nodes of 1
to 6 CPUs, some taken by bound pods, 1 to 5 members of 1 to 4 CPUs, minMember 1 to all of them):
the planner releases exactly when some assignment of minMember members to nodes fits, with both
the incremental and the from-scratch planner; and never says a group exceeds the cluster when an
empty cluster would hold it.
"""

from __future__ import annotations

from itertools import product

from hypothesis import given, settings
from hypothesis import strategies as st

from cogate.controller.model.verdicts import GroupRequest, PlannerConfig
from cogate.controller.planning.capacity import SEARCH_MEMBERS
from cogate.controller.planning.planner import Outcome, decide
from cogate.controller.planning.planstate import PlanningState
from tests.builders import node, pod


def _fits(sizes: list[int], free: list[int], needed: int) -> bool:
    """Some ``needed`` of the members (CPUs ``sizes``) fit ``free`` CPUs per node (brute force:
    every member on a node or left out)."""
    for at in product(range(-1, len(free)), repeat=len(sizes)):
        if sum(1 for a in at if a >= 0) < needed:
            continue
        used = [0] * len(free)
        for s, a in zip(sizes, at):
            if a >= 0:
                used[a] += s
        if all(u <= f for u, f in zip(used, free)):
            return True
    return False


@st.composite
def worlds(draw):
    caps = draw(st.lists(st.integers(1, 6), min_size=1, max_size=3))
    taken = [draw(st.integers(0, c)) for c in caps]
    sizes = draw(st.lists(st.integers(1, 4), min_size=1, max_size=5))
    needed = draw(st.integers(1, len(sizes)))
    return caps, taken, sizes, needed


def _plan(caps, taken, sizes, needed):
    nodes = [node(f"n{i}").alloc(cpu=str(c), memory="64Gi", pods="110").info() for i, c in enumerate(caps)]
    bound = [pod(f"b{i}", "other").req(cpu=str(t)).on(f"n{i}").info() for i, t in enumerate(taken) if t]
    members = tuple(pod(f"m{j}", "default").group("g").req(cpu=str(s)).gated()
                    .created(f"2026-01-01T00:00:{j:02d}Z").info() for j, s in enumerate(sizes))
    g = GroupRequest("default", "g", needed, 0.0, False, members)
    verdict = PlanningState.build(nodes, bound).decide([g], [], 1000.0, PlannerConfig()).verdicts[0]
    assert decide(nodes, bound, [g], [], 1000.0, PlannerConfig()).verdicts[0] == verdict
    return verdict


@settings(max_examples=300, deadline=None, derandomize=True)
@given(worlds())
def test_the_planner_releases_exactly_when_a_packing_exists(world):
    caps, taken, sizes, needed = world
    assert len(sizes) <= SEARCH_MEMBERS
    v = _plan(caps, taken, sizes, needed)
    free = [c - t for c, t in zip(caps, taken)]
    assert (v.outcome == Outcome.RELEASED) == _fits(sizes, free, needed), (v.outcome, v.message)
    if v.outcome == Outcome.EXCEEDS_CLUSTER_CAPACITY:
        assert not _fits(sizes, caps, needed), v.message


def test_the_case_greedy_packing_missed():
    """3, 2 and 2 CPUs on nodes of 4 and 3: the 3 goes on the node of 3."""
    v = _plan([4, 3], [0, 0], [3, 2, 2], 3)
    assert v.outcome == Outcome.RELEASED, v.message
