"""Victim selection against an independent brute-force oracle (issue 29 item 4).

Run with ``ORACLE_EXAMPLES=5000 ... --hypothesis-show-statistics`` for the measured rates.

The property tests beside this file judge "fits after the victims go" with the planner itself.
Here the judge shares no code with cogate: on small clusters (at most 3 nodes, 8 bound pods, 4
members; CPU and pod-count only, zone node selectors), :func:`fits` places members by exhaustive
search, and :func:`fewest_victims` tries every subset of the candidates, smallest first, keeping
only those that leave no gang partly preempted below its minMember. Checked:

- **never preempts in vain**: when no admissible set of victims lets minMember members fit, cogate
  preempts nothing; when one does, cogate either preempts or says ``DoesNotFitEvenWithPreemption``
  — the second is a false negative of its packing heuristic, counted (hypothesis events), not
  hidden: the figures are in the note of issue 29. The packing's other false negative is counted
  too: an exhaustive placement fits the free room, the planner's does not, and cogate preempts
  (its victims must still suffice and be of lower priority);
- the examples are the same on every run (``derandomize``): CI judges one fixed set; set
  ``ORACLE_EXAMPLES`` (and drop ``derandomize`` locally) to search further;
- **sufficient**: minMember members fit, by exhaustive search, once cogate's victims are gone;
- **no gang left below minMember**, and no victim of the group's priority or more, checked on
  the pods themselves;
- **how many** is measured, not asserted (hypothesis events): cogate's victims against the fewest
  the oracle finds, and whether one could be put back with another placement of the members.
  cogate promises minimality with respect to its plan only (the victims.py module doc), as
  kube-scheduler's ``SelectVictimsOnNode`` reprieves per node for one pod.
"""

from __future__ import annotations

import dataclasses
import itertools
import os

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from cogate.api import POD_GROUP_LABEL
from cogate.controller.model.nativegroups import Mode, NativeGroup
from cogate.controller.model.records import member_key
from cogate.controller.planning.capacity import Snapshot, pack
from cogate.controller.planning.planner import classify, members_anti, members_spread
from cogate.controller.preemption.candidates import lent_room
from cogate.controller.preemption.victims import NoPreemption, Preemption, Reason, select_victims

from .test_preemption_props import CFG, scenarios


def eligible(member, node) -> bool:
    """NodeAffinity for the scenarios' node selectors (labels equal)."""
    return all(node.labels.get(k) == v for k, v in (member.node_selector or {}).items())


def fits(nodes, pods, group, gone: set[str]) -> bool:
    """Exhaustive: can minMember of the group's members be placed (cpu and pod count per node,
    node selector) on the nodes with the bound pods except ``gone`` (their uids)? A pod being
    deleted still holds its room, as on the node until it is gone."""
    cpu = {n.name: n.allocatable.get("cpu", 0) for n in nodes}
    slots = {n.name: n.allocatable.get("pods", 110) for n in nodes}
    for p in pods:
        if p.node_name in cpu and p.uid not in gone and not p.terminal:
            cpu[p.node_name] -= p.requests.get("cpu", 0)
            slots[p.node_name] -= 1
    members = list(group.members)
    need = group.min_member

    def place(i: int, placed: int) -> bool:
        if placed >= need:
            return True
        if placed + len(members) - i < need:
            return False
        m = members[i]
        c = m.requests.get("cpu", 0)
        for n in nodes:
            if eligible(m, n) and cpu[n.name] >= c and slots[n.name] >= 1:
                cpu[n.name] -= c
                slots[n.name] -= 1
                ok = place(i + 1, placed + 1)
                cpu[n.name] += c
                slots[n.name] += 1
                if ok:
                    return True
        return place(i + 1, placed)

    return place(0, 0)


def candidates(pods, gangs, priority: int) -> list:
    """Bound pods of strictly lower priority, not being deleted, not members of the group, and not
    of a gang that has a member of the group's priority or more (rules 1 and 6, read off the pods)."""
    keys = {(g.namespace, g.name) for g in gangs}
    top: dict = {}
    for p in pods:
        if member_key(p) in keys and p.bound and not p.terminal:
            top[member_key(p)] = max(top.get(member_key(p), p.priority), p.priority)
    return [p for p in pods if p.bound and not p.terminal and not p.deleting and p.priority < priority
            and member_key(p) != ("team", "g") and top.get(member_key(p), -1) < priority]


def leaves_no_gang_below_min(pods, gangs, gone: set[str]) -> bool:
    for g in gangs:
        bound = [p for p in pods if member_key(p) == (g.namespace, g.name) and p.bound and not p.terminal]
        taken = sum(p.uid in gone for p in bound)
        left = len(bound) - taken
        if taken and left and left < g.min_member:
            return False
    return True


def fewest_victims(nodes, pods, gangs, group, cands) -> int | None:
    """The size of the smallest admissible set of candidates after whose removal minMember fit;
    None when none does."""
    for k in range(len(cands) + 1):
        for combo in itertools.combinations(cands, k):
            gone = {p.uid for p in combo}
            if leaves_no_gang_below_min(pods, gangs, gone) and fits(nodes, pods, group, gone):
                return k
    return None


@settings(max_examples=int(os.environ.get("ORACLE_EXAMPLES", 1000)), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(scenario=scenarios(max_nodes=3, max_pods=8))
def test_victim_selection_against_brute_force(scenario):
    nodes, pods, budgets, gangs, group = scenario
    result = select_victims(group, nodes, pods, [], budgets, gangs, CFG)
    priority = min(m.priority for m in group.members)
    if fits(nodes, pods, group, set()):
        if isinstance(result, Preemption):
            # the other false negative of the planner's packing: an exhaustive placement fits the free
            # room, the planner's first fit does not, so cogate preempts (found by this oracle in a CI
            # run; counted, and the victims must still be lower-priority pods that suffice)
            event("false negative: preempts where an exhaustive placement needs no victim")
            gone = {v.pod.uid for v in result.victims}
            assert fits(nodes, pods, group, gone) and all(v.pod.priority < priority for v in result.victims)
            return
        event("fits without preemption")
        assert result.reason == Reason.FITS_WITHOUT_PREEMPTION, result
        return
    cands = candidates(pods, gangs, priority)
    best = fewest_victims(nodes, pods, gangs, group, cands)
    if best is None:
        event("no admissible victims")
        assert isinstance(result, NoPreemption), result
        return
    if not isinstance(result, Preemption):
        # a false negative of the planner's packing (first fit by member shape over CPU and pod
        # slots is a heuristic, as kube-scheduler's one pod at a time is): measured, and the answer
        # must then be that the group does not fit even with preemption, in those words
        event("false negative: the oracle finds victims, cogate's packing does not")
        assert result.reason == Reason.DOES_NOT_FIT_EVEN_WITH_PREEMPTION, result
        assert "even with all" in result.message, result
        return
    gone = {v.pod.uid for v in result.victims}
    assert fits(nodes, pods, group, gone), "cogate's victims do not suffice"
    assert leaves_no_gang_below_min(pods, gangs, gone)
    assert all(v.pod.priority < priority for v in result.victims)
    assert gone <= {p.uid for p in cands}
    # How far from the fewest, and whether some victim could be put back with another placement of
    # the members: measured, not asserted. cogate promises minimality with respect to its plan, as
    # kube-scheduler's SelectVictimsOnNode reprieves per node for one pod (checked with the planner in
    # test_preemption_props.py); over placements the fewest is a bin-packing search. Shown with
    # --hypothesis-show-statistics; figures in the note of issue 29.
    event(f"cogate takes {min(len(gone) - best, 3)}{'+' if len(gone) - best >= 3 else ''} more than the fewest")
    units = [{v.pod.uid} for v in result.victims if v.whole_gang is None]
    units += [{v.pod.uid for v in result.victims if v.whole_gang == k} for k in result.gangs_taken]
    event("a victim could be put back with another placement" if any(fits(nodes, pods, group, gone - u) for u in units)
          else "inclusion-minimal over every placement")


# -- Kubernetes' own gangs as victim units (issue 39) -----------------------------------------------
@st.composite
def native_scenarios(draw):
    """The small scenarios above, with some pods outside cogate's gangs moved into up to two
    ``scheduling.k8s.io`` PodGroups (one at least; ``spec.schedulingGroup``), each in mode ``all`` or ``single``,
    with a PodGroup priority or none."""
    nodes, pods, budgets, gangs, group = draw(scenarios(max_nodes=3, max_pods=8))
    natives = [NativeGroup("batch", f"nat{k}", draw(st.sampled_from([Mode.ALL, Mode.ALL, Mode.SINGLE])),
                           draw(st.sampled_from([None, 0, 10, 50, 100, 200])), 2)
               for k in range(draw(st.integers(1, 2)))]
    if natives:
        pods = [dataclasses.replace(p, labels={"app": p.labels.get("app", "a")}, native="spec.schedulingGroup",
                                    native_group=draw(st.sampled_from(natives)).name)
                if POD_GROUP_LABEL not in p.labels and draw(st.booleans()) else p for p in pods]
    return nodes, pods, budgets, gangs, group, natives


def native_unit_of(natives, pods, priority):
    """Native ``all`` groups read off the pods: key -> (bound pods not being deleted, unit priority),
    and the keys never touched (unit or pod priority at ``priority`` or more)."""
    modes = {g.name: g for g in natives if g.mode is Mode.ALL}
    units: dict = {}
    for p in pods:
        if p.native_group in modes and p.bound and not p.terminal and not p.deleting:
            units.setdefault(p.native_group, []).append(p)
    out, never = {}, set()
    for name, ps in units.items():
        top = max(p.priority for p in ps)
        prio = modes[name].priority if modes[name].priority is not None else top
        if prio >= priority or top >= priority:
            never.add(name)
        else:
            out[name] = (ps, prio)
    return out, never


def cost(victims, pods, gangs, units, budgets):
    """The documented cost (controller/preemption/cheapest.py), computed here from the pods: PDB
    violations (most important first), the highest unit priority, the victims, the sum of unit
    priorities (a cogate gang taken whole, or an all group, counts once)."""
    gone = {p.uid for p in victims}
    prios = []
    whole_gangs = set()
    for g in gangs:
        bound_members = [p for p in pods if member_key(p) == (g.namespace, g.name) and p.bound and not p.terminal]
        taken = [p for p in bound_members if p.uid in gone]
        if taken and len(taken) == len(bound_members) and len(taken) > len(bound_members) - g.min_member:
            whole_gangs.update(p.uid for p in taken)
            prios.append(max(p.priority for p in taken))
    for ps, prio in units.values():
        if any(p.uid in gone for p in ps):
            whole_gangs.update(p.uid for p in ps)
            prios.append(prio)
    prios += [p.priority for p in victims if p.uid not in whole_gangs]
    left = [b.disruptions_allowed for b in budgets]
    violations = 0
    for p in sorted(victims, key=lambda p: (-p.priority, p.started or float("inf"), p.namespace, p.name, p.uid)):
        ks = [k for k, b in enumerate(budgets) if b.matches(p) and p.name not in b.disrupted]
        if any(left[k] <= 0 for k in ks):
            violations += 1
        else:
            for k in ks:
                left[k] -= 1
    return (violations, max(prios, default=0), len(victims), sum(prios))


def planner_places(nodes, pods, group, gone) -> bool:
    """The planner's own packing places minMember on the room without ``gone`` (what cogate judges by)."""
    snap = Snapshot(nodes, pods, members_anti([group]), members_spread([group]))
    plannable = classify(group, CFG.gate_name).plannable
    return len(pack(lent_room(snap, [], group, gone), plannable, group.min_member)) >= group.min_member


@settings(max_examples=int(os.environ.get("ORACLE_EXAMPLES", 400)), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(scenario=native_scenarios())
def test_native_units_against_brute_force(scenario):
    """Issue 39: the chosen victims never hold a strict subset of an ``all`` group, and never cost
    more than the cheapest admissible set on which the planner places minMember (the oracle tries
    every subset of the candidates; its exhaustive placement finding a cheaper set the planner's
    packing cannot use is counted, not failed, as above)."""
    nodes, pods, budgets, gangs, group, natives = scenario
    result = select_victims(group, nodes, pods, [], budgets, gangs, CFG, natives=natives)
    priority = min(m.priority for m in group.members)
    units, never = native_unit_of(natives, pods, priority)
    cands = [p for p in candidates(pods, gangs, priority) if not (p.native and p.native_group in never)]
    if not isinstance(result, Preemption):
        return
    gone = {v.pod.uid for v in result.victims}
    for name, (ps, _) in units.items():
        taken = sum(p.uid in gone for p in ps)
        assert taken in (0, len(ps)), f"a strict subset of all group {name} taken"
    assert not any(v.pod.native and v.pod.native_group in never for v in result.victims)
    assert gone <= {p.uid for p in cands}
    assert planner_places(nodes, pods, group, gone)
    mine = cost([v.pod for v in result.victims], pods, gangs, units, budgets)
    best = None
    exhaustive_best = None
    for k in range(1, len(cands) + 1):
        for combo in itertools.combinations(cands, k):
            ids = {p.uid for p in combo}
            if not leaves_no_gang_below_min(pods, gangs, ids):
                continue
            if any(0 < sum(p.uid in ids for p in ps) < len(ps) for ps, _ in units.values()):
                continue
            c = cost(list(combo), pods, gangs, units, budgets)
            if (exhaustive_best is None or c < exhaustive_best) and fits(nodes, pods, group, ids):
                exhaustive_best = c
            if (best is None or c < best) and planner_places(nodes, pods, group, ids):
                best = c
    assert best is not None and mine <= best, (mine, best, result.message)
    if exhaustive_best is not None and exhaustive_best < mine:
        event("the exhaustive placement finds a cheaper set the planner's packing cannot use")
    else:
        event("the cheapest admissible set")
    if units:
        event("with native all groups")
