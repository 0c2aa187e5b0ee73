"""Property: per-domain results kept between passes (controller/planning/domaincache.py) change no decision.

The state machine of ``test_planstate_props.py`` (nodes, bound pods, pods being deleted, groups,
members, reservations fed back, nominations, room held for preemption, the clock, configs) with
nodes labelled with a block and a rack (some without a rack label) and groups asking a topology:
required rack, required block with preferred rack, preferred rack, required hostname, exclusive rack
or block (the exclusive gangs' holds: the incremental pass key), or none. At
every pass, ``PlanningState.decide`` (incremental, with the domain cache) equals
``planner.decide`` (from scratch, no cache): every verdict and reservation; and over the run the
cache was used (trials reused and planned).
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import rule, run_state_machine_as_test

from cogate.controller.model.records import NodeInfo
from cogate.controller.planning.planner import GroupRequest, decide
from cogate.controller.planning.planstate import PlanningState
from cogate.controller.topology.constraints import Constraint
from tests.unit.controller.planning.test_planstate_props import (
    GROUP_NAMES,
    HOST,
    NODE_NAMES,
    TAINT,
    ZONE,
    PlanStateMachine,
    cpu,
    mem,
)

BLOCK, RACK = "example.com/block", "example.com/rack"
LEVELS = (BLOCK, RACK, HOST)
#: topology index -> constraint (0: none)
CONSTRAINTS = [None, Constraint(LEVELS, required=1), Constraint(LEVELS, required=0, preferred=1),
               Constraint(LEVELS, preferred=1), Constraint(LEVELS, required=2),
               Constraint(LEVELS, required=1, exclusive=True), Constraint(LEVELS, required=0, preferred=1, exclusive=True)]
CACHE = {"hits": 0, "misses": 0}


class DomainCacheMachine(PlanStateMachine):
    @rule(name=st.sampled_from(NODE_NAMES), cpu_cores=st.integers(0, 4), mem=st.integers(0, 4),
          slots=st.integers(0, 4), tainted=st.booleans(), cordoned=st.integers(0, 6), ready=st.integers(0, 8),
          zone=st.sampled_from(["a", "b"]), rack=st.sampled_from(["r0", "r1", "r1", ""]))
    def upsert_node(self, name, cpu_cores, mem, slots, tainted, cordoned, ready, zone, rack="r0"):
        labels = {HOST: name, ZONE: zone, BLOCK: zone}
        if rack:
            labels[RACK] = rack
        n = NodeInfo(name, labels=labels, allocatable={"cpu": cpu_cores * 1000, "memory": mem, "pods": slots},
                     taints=(TAINT,) if tainted else (), unschedulable=cordoned == 0, ready=ready != 0)
        self.nodes[name] = n
        self.state.upsert_node(n)

    @rule(name=st.sampled_from(GROUP_NAMES), size=st.integers(1, 4), extra=st.integers(0, 1), c=cpu, m=mem,
          prio=st.integers(0, 1), tol=st.booleans(), special=st.integers(0, 15),
          min_cpu=st.sampled_from([None, None, None, 0, 4000]), roles=st.integers(0, 3),
          topo=st.integers(0, len(CONSTRAINTS) - 1))
    def add_group(self, name, size, extra, c, m, prio, tol, special, min_cpu, roles=0, topo=1):
        super().add_group(name, size, extra, c, m, prio, tol, special, min_cpu, roles)
        g: GroupRequest = self.groups[name]
        self.groups[name] = replace(g, topology=CONSTRAINTS[topo])

    @rule()
    def plan(self):
        groups = list(self.groups.values())
        got = self.state.decide(groups, self.reservations, self.now, self.config, self.holds)
        want = decide(list(self.nodes.values()), list(self.pods.values()) + list(self.nominated.values()), groups,
                      self.reservations, self.now, self.config, self.holds)
        assert got == want
        CACHE["hits"] += self.state._domains.hits
        CACHE["misses"] += self.state._domains.misses
        self.reservations = list(want.reservations)
        self.passes += 1


DomainCacheMachine.TestCase.settings = settings(
    max_examples=200, stateful_step_count=50, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestDomainCache = DomainCacheMachine.TestCase


def test_the_run_used_the_cache():
    """The property above is not vacuous: trials were reused and planned (counted over its run, or
    over a short run of its own when it ran elsewhere)."""
    if not CACHE["hits"]:
        run_state_machine_as_test(DomainCacheMachine, settings=settings(
            max_examples=30, stateful_step_count=50, deadline=None, suppress_health_check=list(HealthCheck)))
    assert CACHE["hits"] > 0 and CACHE["misses"] > 0, CACHE


def test_a_change_in_one_rack_plans_that_rack_again_only():
    """One bound pod added in rack r1: the next pass reuses every trial outside it."""
    nodes = [NodeInfo(f"n{b}{r}{i}", {HOST: f"n{b}{r}{i}", BLOCK: f"b{b}", RACK: f"r{r}"},
                      {"cpu": 4000, "memory": 2**30, "pods": 10}) for b in range(2) for r in range(2) for i in range(2)]
    from tests.unit.controller.planning.test_planstate_props import GATE, POD_GROUP_LABEL, PodInfo
    big = GroupRequest("default", "big", 3, 1.0, False, tuple(
        PodInfo("default", f"m{i}", f"m{i}", labels={POD_GROUP_LABEL: "big"}, requests={"cpu": 3000},
                gates=(GATE,)) for i in range(3)), topology=CONSTRAINTS[1])
    state = PlanningState.build(nodes, [])
    first = state.decide([big], [], 10.0)
    assert first == decide(nodes, [], [big], [], 10.0) and first.verdicts[0].outcome == "ExceedsClusterCapacity"
    planned = state._domains.misses
    assert planned > 0 and state._domains.hits == 0
    again = state.decide([big], [], 11.0)
    assert again == first and state._domains.misses == 0 and state._domains.hits == planned
    pod = PodInfo("default", "busy", "busy", node_name="n010", phase="Running", requests={"cpu": 1000})
    state.upsert_pod(pod)
    third = state.decide([big], [], 12.0)
    assert third == decide(nodes, [pod], [big], [], 12.0)
    assert 0 < state._domains.misses < planned


def test_a_trial_on_a_rack_written_earlier_in_the_pass_follows_those_writes():
    """Group a is released into rack r0 in the pass, so b's trial there reads a's room: kept with it, so
    once a is gone b fits r0 (the base room of r0 never changed)."""
    from tests.unit.controller.planning.test_planstate_props import GATE, POD_GROUP_LABEL, PodInfo
    nodes = [NodeInfo("n0", {HOST: "n0", BLOCK: "b", RACK: "r0"}, {"cpu": 3000, "pods": 10}),
             NodeInfo("n1", {HOST: "n1", BLOCK: "b", RACK: "r1"}, {"cpu": 2000, "pods": 10})]

    def group(name: str, created: float) -> GroupRequest:
        return GroupRequest("default", name, 2, created, False, tuple(
            PodInfo("default", f"{name}{i}", f"{name}{i}", labels={POD_GROUP_LABEL: name}, requests={"cpu": 1500},
                    gates=(GATE,), created=created) for i in range(2)), topology=CONSTRAINTS[1])

    a, b = group("a", 1.0), group("b", 2.0)
    state = PlanningState.build(nodes, [])
    first = state.decide([a, b], [], 10.0)
    assert first == decide(nodes, [], [a, b], [], 10.0)
    assert [v.outcome for v in first.verdicts] == ["Released", "InsufficientCapacity"]
    second = state.decide([b], [], 11.0)
    assert second == decide(nodes, [], [b], [], 11.0) and second.verdicts[0].outcome == "Released"
