"""Backfill and starvation (pure): when a waiting group holds back the groups after it.

A group that fits the empty cluster but not the current one does not block
later groups (backfill) until it has waited ``starvation_seconds`` since it
became complete (``max(created, created of its minMember-th oldest
member)``: :func:`~cogate.controller.model.verdicts.complete_since`). From then on it is
*starving* (:func:`starving`) and **no later (unreleased) group is released** while it waits:
the simplest policy that guarantees no later group takes room it needs (holding only the
currently free room would let later groups take fragments the starving group needs as more
room frees). The block is scoped to the room the starving group could use: a later group
none of whose members is eligible (load-independent filters) for a node the
starving group's members are eligible for takes nothing from it and is judged
as usual (:class:`Scope`; when either group has required pod anti-affinity every
node counts, since a pod elsewhere can forbid a whole topology domain). Each
starving group blocks within its scope; released groups' new members are not
blocked, nor is a group whose preemption holds room (its victims' room is its own).

:class:`Starvation` holds these rules as methods of the planner's
:class:`~cogate.controller.planning.planner.Pass` (its ``blockers``: the starving groups so far
in the pass, each with its scope).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from cogate.controller.model import minresources as minres
from cogate.controller.model.verdicts import GroupRequest, GroupVerdict, Outcome, PlannerConfig, complete_since
from cogate.controller.planning.members import Members, eligible_nodes, holder_of
from cogate.controller.planning.room import Room

__all__ = ["Scope", "starving", "Starvation"]


@dataclass(frozen=True)
class Scope:
    """Node indexes a group could use; ``everywhere`` when its placement can affect any node."""

    nodes: frozenset[int]
    everywhere: bool = False

    def overlaps(self, other: "Scope") -> bool:
        return self.everywhere or other.everywhere or not self.nodes.isdisjoint(other.nodes)


def starving(since: float, now: float, config: PlannerConfig) -> bool:
    """A group complete since ``since`` has waited ``starvation_seconds`` at ``now``: it starves."""
    return now - since >= config.starvation_seconds


class Starvation:
    """The starvation rules of a :class:`~cogate.controller.planning.planner.Pass` (module doc)."""

    room: Room
    now: float
    config: PlannerConfig
    #: Starving groups in order, each with the room it could use: later groups in scope wait.
    blockers: list[tuple[GroupRequest, Scope]]

    if TYPE_CHECKING:
        def fits_empty(self, g: GroupRequest, ms: Members) -> tuple[bool, str, tuple[minres.Short, ...]]: ...

        def _never_fits(self, g: GroupRequest, ms: Members, fits: int, empty_msg: str,
                        min_resources_short: tuple[minres.Short, ...] = ()) -> GroupVerdict: ...

    def _holds_room(self, g: GroupRequest) -> bool:
        """Room is held for ``g``'s preemption in flight (``Room.holds``): its victims' room is
        its own, which no starving group may use, so no starving group blocks it."""
        holder = holder_of(g)
        return any(p.holder == holder for p, _ in self.room.holds)

    def _behind_starving_group(self, g: GroupRequest, ms: Members) -> GroupVerdict | None:
        """No later group that could take room a starving group could use is released while it
        waits (the first such starving group is named); it is still told whether it could ever fit."""
        if not self.blockers:
            return None
        scope = self._scope(ms)
        blocker = next((b for b, bs in self.blockers if bs.overlaps(scope)), None)
        if blocker is None:
            return None
        ok, msg, shorts = self.fits_empty(g, ms)
        if not ok:
            return self._never_fits(g, ms, len(ms.bound), msg, shorts)
        return GroupVerdict(
            g.namespace,
            g.name,
            Outcome.INSUFFICIENT_CAPACITY,
            {},
            len(ms.bound),
            f"waiting behind starving PodGroup {blocker.namespace}/{blocker.name}, "
            "which has priority for freed room on the nodes both can use",
        )

    def _scope(self, ms: Members) -> Scope:
        """The nodes the group's plannable members are eligible for (filters independent of load,
        and required pod affinity); every node when a member has required pod anti-affinity."""
        anti = any(m.required_pod_anti_affinity for m in ms.plannable)
        return Scope(frozenset(eligible_nodes(self.room, ms.plannable)), anti)

    def _starving_note(self, g: GroupRequest, ms: Members) -> str:
        """``"; starving for Ns: later groups wait"`` once a waiting group starves (it then blocks
        later groups in its scope: ``blockers``), else ``""``."""
        since = complete_since(g)
        if since is None or not starving(since, self.now, self.config):
            return ""
        self.blockers.append((g, self._scope(ms)))
        return f"; starving for {int(self.now - since)}s: later groups wait"
