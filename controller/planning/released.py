"""Released groups (pure): new members of a group whose release stands, and whole replicas.

Released groups (``GroupRequest.released``: a release that still stands, see
:func:`cogate.controller.status.status.release_stands`) are handled first in a pass
(:func:`cogate.controller.planning.planner.run_pass`): a new gated member (replacement, Job pod,
rollout surge pod) is ungated once the planner finds it room, towards that node (reserved);
until then it stays gated and the verdict names it in ``waiting`` with what it lacks. The shell
stops passing ``released=True`` once the release ended (timed out, failed, fewer than minMember
left of it: ``status.release_end``), so members that come back gated then are planned as a
gang again.

Replicas sharing a PodGroup (:mod:`cogate.controller.model.replicas`: LeaderWorkerSet
groups, JobSet Jobs): new members of a released group that belong to a replica are
released together or not at all: the replica waits gated until it has its expected
number of members (``expected_size``) and all its gated members fit at once. A gang decision
counts whole replicas only (issue 33 item 3): members of replicas it would release in part, or of
replicas not complete yet, are left out (:meth:`ReleasedGroups._incomplete_replicas`,
:meth:`ReleasedGroups._partial_replicas`, used by ``Pass._try_release``); when minMember is not
reached without them the group waits (:meth:`ReleasedGroups._whole_replicas_short`), so no replica
ever runs half-placed, at the first release as later.

:class:`ReleasedGroups` holds these rules as methods of the planner's
:class:`~cogate.controller.planning.planner.Pass`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from cogate.controller.model import replicas as replicas_mod
from cogate.controller.model.records import PodInfo, Promise, Reservation
from cogate.controller.model.verdicts import GroupRequest, GroupVerdict, Outcome
from cogate.controller.planning.basis import Miss
from cogate.controller.planning.capacity import pack
from cogate.controller.planning.explanations import Short, name_list, plural, shortfall, waiting_text
from cogate.controller.planning.members import Members, classify
from cogate.controller.planning.room import Room

__all__ = ["ReleasedGroups"]


def _index_key(index: str) -> tuple[int, str]:
    """Replica indexes in number order ("2" before "10"), odd ones after, by text."""
    return (int(index), "") if index.isdigit() else (1 << 62, index)


class ReleasedGroups:
    """The released-group and replica rules of a :class:`~cogate.controller.planning.planner.Pass`
    (module doc)."""

    room: Room
    gate: str
    #: Pod uid -> its reservation kept from earlier passes.
    reserved: dict[str, Reservation]

    if TYPE_CHECKING:
        def _lend(self, g: GroupRequest) -> list[tuple[Promise, int]]: ...

        def _reserve(self, members: Sequence[PodInfo], plan: Mapping[str, int]) -> dict[str, str]: ...

        def promised_for(self, g: GroupRequest, members: Sequence[PodInfo]) -> tuple[Promise, ...]: ...

    def ungate_new_members(self, g: GroupRequest) -> GroupVerdict:
        """A released group: a new gated member is ungated towards its reservation, else towards
        the node the planner finds it (reserved); one without room (or held by another gate as
        well) stays gated and is named in ``waiting``: releasing it unplanned would send it to
        kube-scheduler with nowhere to go (docs/semantics.md, "New members of a released group").
        Members of a replica (:mod:`cogate.controller.model.replicas`) go together or not at all."""
        lent = self._lend(g)
        try:
            return self._ungate_new_members(g)
        finally:
            if lent:
                self.room.repay(lent)

    def _ungate_new_members(self, g: GroupRequest) -> GroupVerdict:
        ms = classify(g, self.gate)
        plannable = {m.uid for m in ms.plannable}
        release: dict[str, str] = {}
        to_plan = []
        held: list[PodInfo] = []
        for m in ms.gated:
            r = self.reserved.get(m.uid)
            if r is not None:
                release[m.uid] = r.node_name
            elif m.uid in plannable:
                to_plan.append(m)
            else:
                held.append(m)
        plan, replica_parts, replica_waiting, to_plan = self._whole_replicas(ms, to_plan)
        lone_plan = pack(self.room, to_plan, len(to_plan)) if to_plan else {}
        plan.update(lone_plan)
        unplaced = [m for m in to_plan if m.uid not in lone_plan]
        short = shortfall(self.room, unplaced, len(unplaced)) if unplaced else Short("")
        self.room.commit()
        planned_members = [m for m in ms.gated if m.uid in plan]
        release.update(self._reserve(planned_members, plan))
        waiting = tuple(m.name for m in replica_waiting + unplaced + held)
        parts = [f"ungating {plural(len(release), 'new member')}"] if release else []
        parts.extend(replica_parts)
        if unplaced:
            parts.append(waiting_text(unplaced, short))
        if held:
            parts.append(f"{plural(len(held), 'new member')} ({name_list([m.name for m in held])}) also held by other scheduling gates")
        message = "released; " + "; ".join(parts) if parts else "released"
        fits = len(ms.bound) + len(release)
        return GroupVerdict(g.namespace, g.name, Outcome.ALREADY_RELEASED, release, fits, message, waiting)

    def _whole_replicas(self, ms: Members, to_plan: list[PodInfo]
                        ) -> tuple[dict[str, int], list[str], list[PodInfo], list[PodInfo]]:
        """Plan the new members of ``to_plan`` that belong to a replica, one replica at a time
        (lowest index first), each whole or not at all: a replica with fewer present members than
        :func:`~cogate.controller.model.replicas.expected_size` waits for the rest; one whose gated
        members do not all fit now waits for room (its partial plan undone). Returns (the plan of
        the replicas placed, uncommitted; message parts; the members that wait; the members of no
        replica, left to plan one by one)."""
        mine = replicas_mod.by_replica(to_plan)
        if not mine:
            return {}, [], [], to_plan
        present = replicas_mod.by_replica(ms.present)
        plan: dict[str, int] = {}
        parts: list[str] = []
        waiting: list[PodInfo] = []
        for replica in sorted(mine, key=lambda r: (r.kind, r.owner, r.role, _index_key(r.index))):
            new = mine[replica]
            size = replicas_mod.expected_size(replica, present)
            have = len(present.get(replica, ()))
            if size and have < size:
                waiting.extend(new)
                parts.append(f"{replica}: {have} of {size} members present, released whole once all exist")
                continue
            mark = self.room.mark()
            got = pack(self.room, new, len(new))
            if len(got) == len(new):
                plan.update(got)
                continue
            unplaced = [m for m in new if m.uid not in got]
            short = shortfall(self.room, unplaced, len(unplaced)).text
            self.room.rollback(mark)
            waiting.extend(new)
            parts.append(f"{replica}: {len(got)} of {len(new)} new members fit, released whole or not at all "
                         f"({short})")
        if len(present) > 1 and waiting:
            names = name_list([str(r) for r in sorted(present, key=lambda r: (r.kind, r.owner, r.role,
                                                                               _index_key(r.index)))])
            parts.append(f"members of {len(present)} replicas share this PodGroup ({names}): give each replica "
                         "its own PodGroup (its own pod-group label value, minMember = the replica's size) to "
                         "gang-schedule each")
        return plan, parts, waiting, [m for m in to_plan if replicas_mod.replica_of(m) is None]

    def _incomplete_replicas(self, ms: Members) -> set[str]:
        """uids of plannable members whose replica has fewer present members than expected."""
        mine = replicas_mod.by_replica(ms.plannable)
        if not mine:
            return set()
        present = replicas_mod.by_replica(ms.present)
        out: set[str] = set()
        for replica, new in mine.items():
            size = replicas_mod.expected_size(replica, present)
            if size and len(present.get(replica, ())) < size:
                out.update(m.uid for m in new)
        return out

    def _whole_replicas_short(self, g: GroupRequest, ms: Members, held_back: set[str]) -> GroupVerdict | Miss:
        """A group of replicas whose whole replicas do not reach minMember (module doc): waiting for
        members (``WaitingForMembers``) when the members of complete replicas are too few even if all
        fit, else a :class:`Miss` counting the members of whole replicas placed, naming the replicas
        left out. ``held_back``: uids of the members of incomplete or partly placed replicas."""
        incomplete = self._incomplete_replicas(ms)
        present = replicas_mod.by_replica(ms.present)
        waiting = sorted({str(r) for m in ms.plannable if m.uid in incomplete and (r := replicas_mod.replica_of(m))})
        parts = [f"{name_list(waiting)}: not all members present, each replica released whole once all exist"] \
            if waiting else []
        whole = [m for m in ms.plannable if m.uid not in incomplete]
        if len(ms.bound) + len(whole) < g.min_member:
            return GroupVerdict(g.namespace, g.name, Outcome.WAITING_FOR_MEMBERS, {}, len(ms.bound),
                                f"{len(ms.bound) + len(whole)} of {g.min_member} members in complete replicas "
                                f"(replicas of {len(present)} share this PodGroup, each released whole); "
                                + "; ".join(parts))
        mark = self.room.mark()
        plan = pack(self.room, whole, g.min_member - len(ms.bound))
        partial = self._partial_replicas(ms, plan, incomplete)
        placed = [u for u in plan if u not in partial]
        unplaced = [m for m in whole if m.uid not in placed]
        short = shortfall(self.room, unplaced, g.min_member - len(ms.bound) - len(placed))
        self.room.rollback(mark)
        text = "counting whole replicas only (each replica released whole or not at all)"
        if parts:
            text += "; " + "; ".join(parts)
        return Miss(len(ms.bound) + len(placed), unplaced, replace(short, text=f"{text}: {short.text}"),
                    self.promised_for(g, unplaced))

    def _partial_replicas(self, ms: Members, plan: Mapping[str, int], held_back: set[str]) -> set[str]:
        """uids of the plannable members of replicas that ``plan`` places only in part."""
        out: set[str] = set()
        for new in replicas_mod.by_replica(m for m in ms.plannable if m.uid not in held_back).values():
            placed = sum(1 for m in new if m.uid in plan)
            if 0 < placed < len(new):
                out.update(m.uid for m in new)
        return out
