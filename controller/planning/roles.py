"""Role minimums in planning (pure): every role's minimum placed before any extra member.

A PodGroup with role minimums (:mod:`cogate.controller.model.roles`: the annotation
``cogate.dev/role-minimums``, the role of a member from its labels) is released only when, besides
minMember, each role has at least its minimum bound or planned. Planning is **non-greedy**
(:func:`pack_roles`): first the missing minimum of every role (the oldest plannable members of
that role) is packed as one batch, and only on the room left are the other plannable members
packed (extras of any role, and members of no role). So surplus members of one role never take
the room another role's minimum needs: KubeRay's global minMember lets surplus CPU workers
"satisfy" a gang whose GPU group is short, Volcano's ``minTaskMember`` lets surplus pods of one
task take another's room, and KEP-6012's CompositePodGroup lets one child take more than its
minimum and starve a sibling. Here those groups wait, their status naming the short role
("role gpu fits 1 of 2").

The packing of each step is :func:`cogate.controller.planning.capacity.pack` (a heuristic that never
returns an invalid placement): a plan this module returns is always valid, and a role's minimum
is never left unplaced because extras were placed first.

:class:`RoleMinimums` holds the rule as methods of the planner's
:class:`~cogate.controller.planning.planner.Pass` (``Pass._judge`` asks :meth:`RoleMinimums._invalid_roles`
and :meth:`RoleMinimums._roles_waiting`; ``Pass._try_release`` and ``Pass.fits_empty`` plan through
:meth:`RoleMinimums._pack_group`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from cogate.controller.model import roles as roles_mod
from cogate.controller.model.records import PodInfo
from cogate.controller.model.verdicts import GroupRequest, GroupVerdict, Outcome
from cogate.controller.planning.capacity import pack
from cogate.controller.planning.explanations import Short, plural, shortfall
from cogate.controller.planning.members import Members
from cogate.controller.planning.room import Room

__all__ = ["RoleShort", "RolePlan", "pack_roles", "role_text", "role_short", "scaled_down_hint", "RoleMinimums",
           "for_role_minimums", "roles_short_of"]


@dataclass(frozen=True)
class RoleShort:
    """A role below its minimum in a plan: ``fits`` = its bound + planned members, ``minimum``."""

    role: str
    fits: int
    minimum: int

    def __str__(self) -> str:
        return f"role {self.role} fits {self.fits} of {self.minimum}"


@dataclass(frozen=True)
class RolePlan:
    """A plan (uid -> node index, applied on the room) and the roles it leaves below their minimum."""

    plan: dict[str, int]
    short: tuple[RoleShort, ...] = ()


def role_text(short: Sequence[RoleShort]) -> str:
    """``"role gpu fits 1 of 2, role cpu fits 0 of 1"`` (every short role, by name)."""
    return ", ".join(str(s) for s in short)


def pack_roles(room: Room, members: Sequence[PodInfo], bound: Sequence[PodInfo], needed: int,
               roles: roles_mod.Roles, greedy: bool = True) -> RolePlan:
    """Plan ``members`` (gated, plannable, oldest first) on ``room`` (left applied), role minimums
    first (module doc). ``bound``: the group's bound members (they count for their role);
    ``needed``: members to plan for minMember (bound ones already counted).

    Step 1 packs, for every role, its missing minimum (``minimum - bound of the role``, the oldest
    members of the role) as one batch; a role with too few of them, or whose batch does not all
    fit, is short (the best attempt stays applied). Step 2 packs the remaining members on the room
    left, as many as fit (``greedy=False``: only the oldest that minMember still needs). The plan returned is every member placed; ``short`` the roles below
    their minimum."""
    have = roles_mod.count_by_role(bound, roles)
    first: list[PodInfo] = []
    wanted: dict[str, int] = {}
    for role, minimum in roles.minimums:
        missing = max(0, minimum - have[role])
        if missing:
            of_role = [m for m in members if roles_mod.role_of(m, roles.label) == role]
            wanted[role] = missing
            first += of_role[:missing]
    plan = pack(room, first, len(first)) if first else {}
    chosen = {m.uid for m in first}
    rest = [m for m in members if m.uid not in chosen]
    if not greedy:
        rest = rest[:max(0, needed - len(plan))]
    if rest:
        plan.update(pack(room, rest, max(0, needed - len(plan))))
    placed = roles_mod.count_by_role([m for m in members if m.uid in plan], roles)
    short = tuple(RoleShort(role, have[role] + placed[role], minimum) for role, minimum in roles.minimums
                  if have[role] + placed[role] < minimum)
    return RolePlan(plan, short)


class RoleMinimums:
    """The role-minimums rule of a :class:`~cogate.controller.planning.planner.Pass` (module doc)."""

    #: > 0 while a set of PodGroups is planned (:class:`cogate.controller.planning.groupsets.SetPlanning`).
    set_depth: int

    def _pack_group(self, room: Room, g: GroupRequest, ms: Members, members: Sequence[PodInfo],
                    needed: int, greedy: bool | None = None) -> RolePlan:
        """Plan ``members`` of ``g`` on ``room``: :func:`pack` without role minimums, else
        :func:`pack_roles` (minimums first). Within a set of PodGroups (``set_depth``) only what the
        group's minimums need is planned (the oldest members first; the whole list only when they do
        not fit), so one group of a set never takes the room a sibling's minimum needs: its other
        members wait gated and join later as new members (docs/semantics.md, "Gangs of gangs").
        ``greedy``: True plans as many as fit whatever ``set_depth`` (the empty-cluster check, whose
        answer the incremental planner keeps by the group alone)."""
        needed = max(needed, 0)
        greedy = not self.set_depth if greedy is None else greedy
        if g.roles is not None:
            return pack_roles(room, members, ms.bound, needed, g.roles, greedy=greedy)
        if not greedy and len(members) > needed:
            mark = room.mark()
            plan = pack(room, members[:needed], needed)
            if len(plan) >= needed:
                return RolePlan(plan)
            room.rollback(mark)
        return RolePlan(pack(room, members, needed))

    def _invalid_roles(self, g: GroupRequest, ms: Members) -> GroupVerdict | None:
        """Role annotations that could not be read (:func:`cogate.controller.model.roles.parse`):
        ``Unschedulable`` naming the annotation and the fault."""
        if not g.roles_error:
            return None
        return GroupVerdict(g.namespace, g.name, Outcome.UNSCHEDULABLE, {}, len(ms.bound), f"invalid {g.roles_error}")

    def _roles_waiting(self, g: GroupRequest, ms: Members) -> GroupVerdict | None:
        """A role with fewer bound + plannable members than its minimum waits for members
        (``WaitingForMembers``, each such role named with the members present of it)."""
        if g.roles is None:
            return None
        usable = roles_mod.count_by_role(list(ms.bound) + list(ms.plannable), g.roles)
        present = roles_mod.count_by_role(ms.present, g.roles)
        lacking = [(role, n) for role, n in g.roles.minimums if usable[role] < n]
        if not lacking:
            return None
        parts = []
        for role, n in lacking:
            text = f"role {role}: {present[role]} of {n} members present"
            if present[role] > usable[role]:
                text += f" ({plural(present[role] - usable[role], 'member')} not plannable)"
            parts.append(text)
        label = g.roles.label or "the operators' role labels"
        return GroupVerdict(g.namespace, g.name, Outcome.WAITING_FOR_MEMBERS, {}, len(ms.bound),
                            "; ".join(parts) + f" (role read from {label})" + scaled_down_hint(g, len(ms.present)))


def scaled_down_hint(g: GroupRequest, present: int) -> str:
    """The words for a group whose members present meet minMember while its role minimums ask for
    more (a job scaled down: its operator lowered minMember and deleted members, the annotation
    still states the old minimums): what to change, and that cogate never lowers them itself
    (docs/semantics.md, "Roles": "Scaled down"). '' otherwise."""
    if g.roles is None or present < g.min_member or g.roles.total <= g.min_member:
        return ""
    return (f"; the {plural(present, 'member')} present meet minMember {g.min_member} but the role minimums ask "
            f"for {g.roles.total}: if the job was scaled down, lower annotation {roles_mod.ROLE_MINIMUMS_ANNOTATION} "
            "(cogate never lowers it)")


def role_short(room: Room, short: Sequence[RoleShort], members: Sequence[PodInfo], plan: dict[str, int],
               roles: roles_mod.Roles) -> Short:
    """What the first short role lacks (:func:`shortfall` of its unplaced members), its text
    prefixed with every short role (``"role gpu fits 1 of 2: ..."``)."""
    first = short[0]
    unplaced = [m for m in members if m.uid not in plan and roles_mod.role_of(m, roles.label) == first.role]
    why = shortfall(room, unplaced, first.minimum - first.fits)
    return replace(why, text=role_text(short) + (f": {why.text}" if why.text else ""))


def for_role_minimums(g: GroupRequest) -> GroupRequest:
    """``g`` as victim selection and ProvisioningRequests should count it: minMember raised to the
    sum of its role minimums when that is larger (a release needs both, module doc), so room is
    asked for every role's minimum, not only for minMember members. ``g`` itself without roles."""
    if g.roles is None or g.roles.total <= g.min_member:
        return g
    return replace(g, min_member=g.roles.total)


def roles_short_of(g: GroupRequest, placed: Sequence[str], bound: Sequence[PodInfo]) -> tuple[RoleShort, ...]:
    """The roles of ``g`` below their minimum when the members of uids ``placed`` (a plan made
    without role minimums, e.g. victim selection's) and ``bound`` are placed: a plan that leaves one
    would free room in vain, since the group is not released. ``()`` without roles."""
    if g.roles is None:
        return ()
    chosen = set(placed)
    have = roles_mod.count_by_role(list(bound) + [m for m in g.members if m.uid in chosen], g.roles)
    return tuple(RoleShort(r, have[r], n) for r, n in g.roles.minimums if have[r] < n)
