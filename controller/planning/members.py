"""Membership accounting (pure): how a group's members count for the planner.

For a group (:class:`~cogate.controller.model.verdicts.GroupRequest`), :func:`classify` sorts its
live members, oldest first:

* present = live members not in phase Failed; fewer than ``min_member`` ->
  ``WaitingForMembers``; so is a group whose bound + plannable members are
  fewer than ``min_member`` because others are held by other scheduling gates
  (or pending ungated without a node: the scheduler is already on them).
* bound = members bound to a node (not Failed) or Succeeded. Succeeded members count only for a
  released group (its finished work); a gang decision (an unreleased group) leaves them out:
  they cannot run again (:func:`cogate.controller.status.status.release_stands`).
* gated = unbound members carrying our gate. Only those whose *only* gate is
  ours are planned; members that also carry other gates are ungated on release
  (node ``''``) but do not count, and members gated only by other gates are not
  ours (neither placed nor bound).

What the planner (:mod:`cogate.controller.planning.planner`) does with them, and the other pure
choosers that count members the same way (:mod:`cogate.controller.preemption.victims`,
:mod:`cogate.controller.provisioning.provreq`). Also here: which planned members are pinned
(:func:`pins`), whether any member makes the room track anti-affinity or topology spread
(:func:`members_anti`, :func:`members_spread`), the nodes members are eligible for
(:func:`eligible_nodes`) and the holder name of room held for a group (:func:`holder_of`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from cogate.controller.model.records import PodInfo
from cogate.controller.model.verdicts import DEFAULT_SCHEDULER, GroupRequest, PlannerConfig
from cogate.controller.planning.room import Room

__all__ = ["Members", "classify", "pins", "members_anti", "members_spread", "eligible_nodes", "holder_of"]


@dataclass
class Members:
    """How a group's members count (module doc), each list oldest
    first: ``present`` (not Failed), ``bound`` (bound and not Failed, or Succeeded), ``gated``
    (unbound, not terminal, carrying our gate), ``plannable`` (gated by our gate alone)."""

    present: list[PodInfo] = field(default_factory=list)
    bound: list[PodInfo] = field(default_factory=list)
    gated: list[PodInfo] = field(default_factory=list)  # carry our gate, unbound
    plannable: list[PodInfo] = field(default_factory=list)  # our gate is the only gate


def classify(group: GroupRequest, gate: str) -> Members:
    """``group``'s members as the planner counts them for gate ``gate`` (module doc)."""
    r = Members()
    for m in sorted(group.members, key=lambda p: (p.created, p.name, p.uid)):
        if m.phase == "Succeeded" and not group.released:
            continue  # cannot run again: never part of a new gang (docs/semantics.md "Generations")
        if m.phase != "Failed":
            r.present.append(m)
        if (m.bound and m.phase != "Failed") or m.phase == "Succeeded":
            r.bound.append(m)
        elif m.gated_by(gate) and not m.bound and not m.terminal:
            r.gated.append(m)
            if all(g == gate for g in m.gates):
                r.plannable.append(m)
    return r


def pins(m: PodInfo, config: PlannerConfig) -> bool:
    """A planned member is pinned and reserved only when the planner models everything that
    decides its node: kube-scheduler's default profile, no unchecked constraint and no claim
    kube-scheduler cannot use yet (a new member of a released group is ungated regardless)."""
    return m.scheduler_name == DEFAULT_SCHEDULER and not m.unplanned and not m.volume_problems


def members_anti(groups: Sequence[GroupRequest]) -> bool:
    """Some member has required pod anti-affinity (the room then tracks where pods sit)."""
    return any(m.required_pod_anti_affinity for g in groups for m in g.members)


def members_spread(groups: Sequence[GroupRequest]) -> bool:
    """Some member has hard topology spread constraints (the room then counts pods per domain)."""
    return any(m.topology_spread for g in groups for m in g.members)


def eligible_nodes(room: Room, members: Sequence[PodInfo]) -> set[int]:
    """The node slots at least one of ``members`` is eligible for on ``room`` (load-independent
    filters, and on a live room required pod affinity against bound pods)."""
    out: set[int] = set()
    for spec in {id(s): s for s in (room.spec_for(m) for m in members)}.values():
        out.update(spec.eligible)
    return out


def holder_of(g: GroupRequest) -> str:
    """``Promise.holder`` of room held for ``g`` (``"PodGroup ns/name"``)."""
    return f"PodGroup {g.namespace}/{g.name}"
