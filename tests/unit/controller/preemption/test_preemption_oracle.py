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

import itertools
import os

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from cogate.controller.model.records import member_key
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
