"""Property: the incremental planning state (controller/planning/planstate.py) equals a rebuild from scratch.

A hypothesis state machine applies random sequences of events to a ``PlanningState`` and to a
plain model of the same cluster (nodes, bound pods, groups, reservations, clock): nodes added,
changed (resources, taints, cordon, readiness, labels) and deleted; pods added (bound), changed,
marked for deletion, deleted and made terminal; groups created (members with host ports, pod
anti-affinity, hard topology spread over hostname or zone, another scheduler, bound PVs' node
affinity, unchecked constraints, claim problems), deleted, changed (members added, failed, ungated,
bound, pinned to their reserved node, deleted; minMember; released); reservations fed back from
each decision as the shell does, extra ones added, and the clock moved past their expiry and past
the starvation limit; nominations (unbound pods with ``nominated_node``, of priorities below, equal
to and above the members') added, moved and dropped.
After every step the state's free room equals ``planner.room_by_node`` rebuilt from the model,
and at every pass ``PlanningState.decide`` equals ``planner.decide`` over the model: every
verdict (outcome, release, fits, message) and every reservation.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from cogate.api import DEFAULT_GATE_NAME as GATE
from cogate.api import POD_GROUP_LABEL
from cogate.controller.model.records import (
    HostPort,
    LabelSelector,
    NodeInfo,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodAffinityTerm,
    PodInfo,
    Promise,
    Reservation,
    Taint,
    Toleration,
    TopologySpreadConstraint,
)
from cogate.controller.model.roles import Roles
from cogate.controller.planning.planner import GroupRequest, PlannerConfig, decide, room_by_node
from cogate.controller.planning.planstate import PlanningState

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
TAINT = Taint("dedicated", "x", "NoSchedule")
TOL = Toleration("dedicated", "Equal", "x", "NoSchedule")
NODE_NAMES = [f"n{i}" for i in range(5)]
GROUP_NAMES = [f"g{i}" for i in range(4)]
OTHER_SCHEDULER = "other-scheduler"
CONFIGS = [PlannerConfig(starvation_seconds=40.0, reservation_ttl_seconds=25.0),
           PlannerConfig(starvation_seconds=300.0, reservation_ttl_seconds=60.0),
           PlannerConfig(starvation_seconds=40.0, reservation_ttl_seconds=25.0, unchecked="hold",
                         scheduler_names=frozenset({"default-scheduler", OTHER_SCHEDULER}))]

STATS = {"kept": 0, "judged": 0, "min_resources_short": 0}
cpu = st.sampled_from([0, 500, 1000, 1500, 2000, 3000])
mem = st.integers(0, 3)


class PlanStateMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.state = PlanningState()
        self.nodes: dict[str, NodeInfo] = {}
        self.pods: dict[str, PodInfo] = {}  # bound pods, as the bound-pods informer holds them
        self.groups: dict[str, GroupRequest] = {}
        self.reservations: list[Reservation] = []
        #: unbound pods with a nomination, as the nominated-pods informer holds them
        self.nominated: dict[str, PodInfo] = {}
        #: Room held for a preempting group (Promise kind "preempting", controller/preemption/inflight.py).
        self.holds: list[Promise] = []
        self.now = 1000.0
        self.config = CONFIGS[0]
        self.seq = 0
        self.passes = 0

    def _uid(self, prefix: str) -> str:
        self.seq += 1
        return f"{prefix}{self.seq}"

    # -- nodes

    @initialize(count=st.integers(1, 5), cpu_cores=st.integers(1, 4), load=st.lists(cpu, max_size=8),
                waiting=st.integers(0, 3), c=st.sampled_from([1000, 1500, 2000]))
    def start(self, count, cpu_cores, load, waiting, c):
        for name in NODE_NAMES[:count]:
            self.upsert_node(name, cpu_cores, 4, 4, False, 1, 1, "a")
        for k, lc in enumerate(load):
            self.add_pod(NODE_NAMES[k % count], lc, 0, 1, 1, "web")
        for k, name in enumerate(GROUP_NAMES[:waiting]):  # groups that wait for room while events come
            self.add_group(name, 2, 0, c, 0, 0, False, 9, None if k % 2 == 0 else 2 * c + 2000 * k)

    @rule(name=st.sampled_from(NODE_NAMES), cpu_cores=st.integers(0, 4), mem=st.integers(0, 4),
          slots=st.integers(0, 4), tainted=st.booleans(), cordoned=st.integers(0, 6), ready=st.integers(0, 8),
          zone=st.sampled_from(["a", "b"]))
    def upsert_node(self, name, cpu_cores, mem, slots, tainted, cordoned, ready, zone):
        n = NodeInfo(name, labels={HOST: name, ZONE: zone},
                     allocatable={"cpu": cpu_cores * 1000, "memory": mem, "pods": slots},
                     taints=(TAINT,) if tainted else (), unschedulable=cordoned == 0, ready=ready != 0)
        self.nodes[name] = n
        self.state.upsert_node(n)

    @precondition(lambda self: self.nodes)
    @rule(data=st.data())
    def remove_node(self, data):
        name = data.draw(st.sampled_from(sorted(self.nodes)))
        del self.nodes[name]
        self.state.remove_node(name)

    # -- bound pods that are not members

    def _put_pod(self, p: PodInfo) -> None:
        if p.bound:
            self.pods[p.uid] = p
        else:
            self.pods.pop(p.uid, None)
        self.state.upsert_pod(p)

    def _drop_pod(self, uid: str) -> None:
        self.pods.pop(uid, None)
        self.state.remove_pod(uid)

    @rule(node=st.sampled_from(NODE_NAMES + ["gone"]), c=cpu, m=mem, port=st.integers(0, 5),
          anti=st.integers(0, 15), app=st.sampled_from(["web", "db"]))
    def add_pod(self, node, c, m, port, anti, app):
        terms = (PodAffinityTerm(HOST, LabelSelector((("app", app),))),) if anti == 0 else ()
        p = PodInfo("default", self._uid("p"), "", labels={"app": app}, node_name=node, phase="Running",
                    requests={k: v for k, v in {"cpu": c, "memory": m}.items() if v},
                    host_ports=(HostPort(80),) if port == 0 else (), required_pod_anti_affinity=terms)
        self._put_pod(replace(p, uid=p.name))

    def _plain_pods(self) -> list[str]:
        return sorted(u for u, p in self.pods.items() if not p.group)

    @precondition(lambda self: any(not p.group for p in self.pods.values()))
    @rule(data=st.data(), c=cpu, m=mem, how=st.sampled_from(["requests", "terminal", "move", "same", "deleting"]))
    def update_pod(self, data, c, m, how):
        p = self.pods[data.draw(st.sampled_from(self._plain_pods()))]
        if how == "requests":
            p = replace(p, requests={k: v for k, v in {"cpu": c, "memory": m}.items() if v})
        elif how == "terminal":
            p = replace(p, phase=data.draw(st.sampled_from(["Succeeded", "Failed"])))
        elif how == "deleting":  # terminating: still holds room, named in waiting messages
            p = replace(p, deleting=not p.deleting)
        elif how == "move":
            p = replace(p, node_name=data.draw(st.sampled_from(NODE_NAMES)))
        else:
            p = replace(p, resource_version=str(self.seq))
        self._put_pod(p)

    @precondition(lambda self: any(not p.group for p in self.pods.values()))
    @rule(data=st.data())
    def delete_pod(self, data):
        self._drop_pod(data.draw(st.sampled_from(self._plain_pods())))

    # -- groups and members

    def _member(self, group: str, c: int, m: int, prio: int, tol: bool, special: int) -> PodInfo:
        """A gated member; ``special`` picks one constraint: 0 host port, 1 pod anti-affinity,
        2 topology spread over hostname, 3 over zones (minDomains 2, selector app=web: counts plain
        pods too), 4 another scheduler, 5 a bound PV's node affinity (n0 or n1), 6 an unchecked
        constraint, 7 a claim problem; anything else none."""
        name = self._uid(f"{group}-")
        own = LabelSelector(((POD_GROUP_LABEL, group),))
        p = PodInfo("default", name, name, labels={POD_GROUP_LABEL: group, "app": "web"},
                    requests={k: v for k, v in {"cpu": c, "memory": m}.items() if v}, gates=(GATE,),
                    tolerations=(TOL,) if tol else (), priority=prio, created=self.now)
        if special == 0:
            p = replace(p, host_ports=(HostPort(80),))
        elif special == 1:
            p = replace(p, required_pod_anti_affinity=(PodAffinityTerm(HOST, own),))
        elif special == 2:
            p = replace(p, topology_spread=(TopologySpreadConstraint(1, HOST, own),))
        elif special == 3:
            p = replace(p, topology_spread=(TopologySpreadConstraint(
                1, ZONE, LabelSelector((("app", "web"),)), min_domains=2, node_taints_policy="Honor"),))
        elif special == 4:
            p = replace(p, scheduler_name=OTHER_SCHEDULER)
        elif special == 5:
            pv = (NodeSelectorTerm((NodeSelectorRequirement(HOST, "In", ("n0", "n1")),)),)
            p = replace(p, volume_claims=("data",), volume_node_affinity=(pv,))
        elif special == 6:
            p = replace(p, unplanned=("resource claims",))
        elif special == 7:
            p = replace(p, volume_claims=("data",), volume_problems=('persistentvolumeclaim "data" not found',))
        return p

    @rule(name=st.sampled_from(GROUP_NAMES), size=st.integers(1, 4), extra=st.integers(0, 1), c=cpu, m=mem,
          prio=st.integers(0, 1), tol=st.booleans(), special=st.integers(0, 15),
          min_cpu=st.sampled_from([None, None, 0, 2000, 4000, 7000, 12000]), roles=st.integers(0, 3))
    def add_group(self, name, size, extra, c, m, prio, tol, special, min_cpu, roles=0):
        if name in self.groups:
            self._delete_group(name)
        members = tuple(self._member(name, c, m, prio, tol, special) for _ in range(size + extra))
        # spec.minResources: none, nothing beyond pods, or cpu for members still to come
        mr = None if min_cpu is None else ((("cpu", min_cpu),) if min_cpu else ())
        # role minimums (roles 1 to 3): members alternate roles r0 and r1 (label "role"); r0 needs 1,
        # r1 needs ``roles - 1`` (0: none)
        rs = None
        if roles:
            members = tuple(replace(p, labels={**p.labels, "role": f"r{i % 2}"}) for i, p in enumerate(members))
            rs = Roles((("r0", 1),) + ((("r1", roles - 1),) if roles > 1 else ()), "role")
        self.groups[name] = GroupRequest("default", name, size, self.now, False, members, min_resources=mr, roles=rs)

    def _delete_group(self, name: str) -> None:
        g = self.groups.pop(name)
        for mb in g.members:
            if mb.uid in self.pods:
                self._drop_pod(mb.uid)

    @precondition(lambda self: self.groups)
    @rule(data=st.data())
    def delete_group(self, data):
        self._delete_group(data.draw(st.sampled_from(sorted(self.groups))))

    def _set_members(self, name: str, members: tuple[PodInfo, ...], **kw) -> None:
        self.groups[name] = replace(self.groups[name], members=members, **kw)

    @precondition(lambda self: self.groups)
    @rule(data=st.data(), c=cpu, m=mem, special=st.integers(2, 15))
    def add_member(self, data, c, m, special):
        name = data.draw(st.sampled_from(sorted(self.groups)))
        g = self.groups[name]
        new = self._member(name, c, m, 0, False, special)
        if g.roles is not None:
            new = replace(new, labels={**new.labels, "role": f"r{len(g.members) % 2}"})
        self._set_members(name, g.members + (new,))

    @precondition(lambda self: any(g.members for g in self.groups.values()))
    @rule(data=st.data(), what=st.sampled_from(["bind", "ungate", "fail", "delete", "other-gate", "succeed", "pin"]),
          node=st.sampled_from(NODE_NAMES))
    def change_member(self, data, what, node):
        name = data.draw(st.sampled_from(sorted(n for n, g in self.groups.items() if g.members)))
        g = self.groups[name]
        k = data.draw(st.integers(0, len(g.members) - 1))
        mb = g.members[k]
        if what == "delete":
            self._set_members(name, g.members[:k] + g.members[k + 1:])
            self._drop_pod(mb.uid)
            return
        if what == "bind":  # kube-scheduler bound it (our planned node or any other)
            r = next((r for r in self.reservations if r.pod_uid == mb.uid), None)
            mb = replace(mb, gates=(), node_name=r.node_name if r and data.draw(st.booleans()) else node,
                         phase="Running")
        elif what == "ungate":
            mb = replace(mb, gates=())
        elif what == "pin":  # released and pinned (to its reserved node when it has one), unbound
            r = next((r for r in self.reservations if r.pod_uid == mb.uid), None)
            to = r.node_name if r else node
            mb = replace(mb, gates=(), required_node_affinity=(
                NodeSelectorTerm(match_fields=(NodeSelectorRequirement("metadata.name", "In", (to,)),)),))
        elif what == "fail":
            mb = replace(mb, phase="Failed")
        elif what == "succeed":
            mb = replace(mb, phase="Succeeded")
        else:
            mb = replace(mb, gates=mb.gates + ("other",))
        self._set_members(name, g.members[:k] + (mb,) + g.members[k + 1:])
        if mb.bound:
            self._put_pod(mb)

    @precondition(lambda self: self.groups)
    @rule(data=st.data(), released=st.booleans(), min_member=st.integers(0, 4))
    def change_group(self, data, released, min_member):
        name = data.draw(st.sampled_from(sorted(self.groups)))
        if data.draw(st.booleans()):
            self.groups[name] = replace(self.groups[name], released=released)
        else:
            self.groups[name] = replace(self.groups[name], min_member=min_member)

    # -- reservations and the clock

    @precondition(lambda self: any(g.members for g in self.groups.values()))
    @rule(data=st.data(), node=st.sampled_from(NODE_NAMES), ttl=st.sampled_from([1.0, 10.0, 100.0]))
    def add_reservation(self, data, node, ttl):
        mb = data.draw(st.sampled_from([m for g in self.groups.values() for m in g.members]))
        self.reservations.append(Reservation(mb.uid, mb.namespace, mb.name, node, dict(mb.requests),
                                             mb.host_ports, self.now + ttl))

    @rule(node=st.sampled_from(NODE_NAMES + ["gone"]), c=cpu, prio=st.integers(-1, 2))
    def add_nomination(self, node, c, prio):
        p = PodInfo("other", self._uid("nom"), "", requests={"cpu": c} if c else {}, priority=prio,
                    nominated_node=node, created=self.now)
        p = replace(p, uid=p.name)
        self.nominated[p.uid] = p
        self.state.upsert_nominated(p)

    @precondition(lambda self: self.nominated)
    @rule(data=st.data(), how=st.sampled_from(["drop", "clear", "move", "bind"]), node=st.sampled_from(NODE_NAMES))
    def change_nomination(self, data, how, node):
        uid = data.draw(st.sampled_from(sorted(self.nominated)))
        p = self.nominated.pop(uid)
        if how == "drop":
            self.state.remove_nominated(uid)
        elif how == "clear":  # kube-scheduler cleared the nomination
            self.state.upsert_nominated(replace(p, nominated_node=""))
        elif how == "move":
            p = replace(p, nominated_node=node)
            self.nominated[uid] = p
            self.state.upsert_nominated(p)
        else:  # bound: the bound-pods informer has it, the nominated one drops it (either order)
            b = replace(p, node_name=node, phase="Running", nominated_node="")
            if data.draw(st.booleans()):
                self._put_pod(b)
                self.state.remove_nominated(uid)
            else:
                self.state.remove_nominated(uid)
                self._put_pod(b)

    @precondition(lambda self: any(g.members for g in self.groups.values()))
    @rule(data=st.data(), node=st.sampled_from(NODE_NAMES + ["gone"]))
    def hold_room(self, data, node):  # a preemption in flight holds room for a member of its group
        g = data.draw(st.sampled_from([g for g in self.groups.values() if g.members]))
        mb = data.draw(st.sampled_from(g.members))
        self.holds.append(Promise(mb, node, dict(mb.requests), (), "preempting", mb.priority,
                                  f"PodGroup {g.namespace}/{g.name}"))

    @precondition(lambda self: self.holds)
    @rule()
    def drop_holds(self):  # the preemption ended
        self.holds = []

    @rule(dt=st.sampled_from([0.0, 0.5, 5.0, 20.0, 45.0, 400.0]))
    def advance_clock(self, dt):
        self.now += dt

    @rule(k=st.integers(0, len(CONFIGS) - 1))
    def set_config(self, k):
        self.config = CONFIGS[k]

    @rule()
    def plan(self):
        groups = list(self.groups.values())
        got = self.state.decide(groups, self.reservations, self.now, self.config, self.holds)
        want = decide(list(self.nodes.values()), list(self.pods.values()) + list(self.nominated.values()), groups,
                      self.reservations, self.now, self.config, self.holds)
        assert got == want
        STATS["kept"] += self.state.last_kept
        STATS["judged"] += self.state.last_judged
        STATS["min_resources_short"] += sum(1 for v in got.verdicts if v.min_resources_short)
        self.reservations = list(want.reservations)
        self.passes += 1

    @rule()
    def plan_again(self):  # passes as often as events of any other kind
        self.plan()

    @precondition(lambda self: any(not p.group for p in self.pods.values()))
    @rule(data=st.data(), c=cpu)
    def replace_pod(self, data, c):  # churn: one pod goes, another comes (deltas between passes)
        self._drop_pod(data.draw(st.sampled_from(self._plain_pods())))
        self.add_pod(data.draw(st.sampled_from(NODE_NAMES)), c, 0, 1, 1, "web")

    @invariant()
    def same_room(self):
        assert self.state.room_by_node() == room_by_node(list(self.nodes.values()), list(self.pods.values()))
        assert sorted(p.uid for p in self.state.pods) == sorted([*self.pods, *self.nominated])


PlanStateMachine.TestCase.settings = settings(
    max_examples=300, stateful_step_count=60, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestPlanState = PlanStateMachine.TestCase


def test_verdicts_are_kept_when_nothing_they_read_changed():
    """The machine above proves equality; this pins down that the incremental path is taken at
    all: a waiting group keeps its verdict across a change on a node where it fits nothing."""
    nodes = [NodeInfo(f"n{i}", labels={HOST: f"n{i}"}, allocatable={"cpu": 4000, "memory": 8, "pods": 10})
             for i in range(3)]
    load = [PodInfo("default", f"l{i}", f"l{i}", node_name=f"n{i}", phase="Running", requests={"cpu": 2500})
            for i in range(3)]
    members = tuple(PodInfo("default", f"m{k}", f"m{k}", labels={POD_GROUP_LABEL: "big"}, requests={"cpu": 2000},
                            gates=(GATE,)) for k in range(2))
    big = GroupRequest("default", "big", 2, 0.0, False, members)
    state = PlanningState.build(nodes, load)
    first = state.decide([big], [], 10.0)
    assert first.verdicts[0].outcome == "InsufficientCapacity"
    assert (state.last_judged, state.last_kept) == (1, 0)
    extra = PodInfo("default", "x", "x", node_name="n1", phase="Running", requests={"cpu": 500})
    state.upsert_pod(extra)
    again = state.decide([big], [], 11.0)
    assert (state.last_judged, state.last_kept) == (0, 1)
    assert again == decide(nodes, load + [extra], [big], [], 11.0)
    state.remove_pod("l0")  # room for both members on n0: judged again, released
    third = state.decide([big], [], 12.0)
    assert state.last_judged == 1 and third.verdicts[0].outcome == "Released"
    assert third == decide(nodes, load[1:] + [extra], [big], [], 12.0)


def test_topology_spread_verdict_follows_pods_on_nodes_the_group_cannot_use():
    """Topology spread counts pods over every node of a domain, also nodes a member cannot use:
    a pod bound there changes the skew, so such a group is judged again (never kept)."""
    web = LabelSelector((("app", "web"),))
    nodes = [NodeInfo("n0", labels={HOST: "n0"}, allocatable={"cpu": 8000, "pods": 10}),
             NodeInfo("n1", labels={HOST: "n1"}, allocatable={"cpu": 8000, "pods": 10}, taints=(TAINT,))]
    load = [PodInfo("default", f"w{i}", f"w{i}", labels={"app": "web"}, node_name="n0", phase="Running",
                    requests={"cpu": 100}) for i in range(2)]
    member = PodInfo("default", "m0", "m0", labels={POD_GROUP_LABEL: "s", "app": "web"}, requests={"cpu": 100},
                     gates=(GATE,), topology_spread=(TopologySpreadConstraint(1, HOST, web),))
    group = GroupRequest("default", "s", 1, 0.0, False, (member,))
    state = PlanningState.build(nodes, load)
    first = state.decide([group], [], 10.0)
    assert first == decide(nodes, load, [group], [], 10.0)
    assert first.verdicts[0].outcome == "InsufficientCapacity"  # n0 holds 2 web pods, n1 none: skew 3
    far = [PodInfo("default", f"t{i}", f"t{i}", labels={"app": "web"}, node_name="n1", phase="Running",
                   requests={"cpu": 100}) for i in range(2)]
    for p in far:  # on the tainted node the member cannot use, still a domain (nodeTaintsPolicy Ignore)
        state.upsert_pod(p)
    second = state.decide([group], [], 11.0)
    assert state.last_kept == 0
    assert second == decide(nodes, load + far, [group], [], 11.0)
    assert second.verdicts[0].outcome == "Released" and second.verdicts[0].release == {"m0": "n0"}


def test_waiting_message_follows_pods_terminating_on_eligible_nodes():
    """The waiting message names pods being deleted on eligible nodes: a pod marked for deletion
    there re-judges a kept verdict even when the free room did not change."""
    nodes = [NodeInfo(f"n{i}", labels={HOST: f"n{i}"}, allocatable={"cpu": 4000, "pods": 10}) for i in range(3)]
    load = [PodInfo("default", f"l{i}", f"l{i}", node_name=f"n{i}", phase="Running", requests={"cpu": 2500})
            for i in range(3)]  # 1.5 CPU free on each: enough in total, too little on any one node
    members = tuple(PodInfo("default", f"m{k}", f"m{k}", labels={POD_GROUP_LABEL: "big"}, requests={"cpu": 2000},
                            gates=(GATE,)) for k in range(2))
    big = GroupRequest("default", "big", 2, 0.0, False, members)
    state = PlanningState.build(nodes, load)
    assert state.decide([big], [], 10.0).verdicts[0].outcome == "InsufficientCapacity"
    going = replace(load[1], deleting=True)
    state.upsert_pod(going)
    again = state.decide([big], [], 11.0)
    assert again == decide(nodes, [load[0], going, load[2]], [big], [], 11.0)
    assert "terminating on eligible nodes (l1)" in again.verdicts[0].message
    state.upsert_pod(replace(going, resource_version="9"))  # nothing the planner reads changed: kept
    assert state.decide([big], [], 12.0) == again and state.last_kept == 1
