"""Gangs of gangs in planning (pure): a set of PodGroups released together or not at all.

The sets are formed from the PodGroups' annotations (:mod:`cogate.controller.model.groupsets`).
:func:`judge_unreleased` gives the verdicts of a pass's unreleased groups in the planner's order
(priority descending, then oldest, then namespace/name: ``planner.order_key``):

* a group naming no set is judged alone (``Pass.judge``), as before;
* a group whose set annotations cannot be read is ``Unschedulable``; a group whose set does not
  form (a group of it does not exist or names another set) waits (``WaitingForMembers``), naming
  that group; neither takes room;
* a formed set is planned as **one unit at the turn of its first group**: each of its unreleased
  groups is judged in order on the room left by the ones before it, with nothing committed; when
  at least the set's minimum of groups (those whose release still stands included) would be
  released, every group that fits is released and the room stays taken; otherwise every plan is
  rolled back (room, reservations, promises), so the set holds no room, and each of its groups
  waits: the groups that fit say they wait for the set and which group is short and why, the
  short ones say what they lack and that the set waits for them. Once the minimum stands, the
  set's other groups are each judged alone (they join as whole gangs).

Deadlock-free: a group names one set and a set forms only when all its groups name it, so sets
never overlap; sets and groups are planned one at a time in one total order, each set all or
nothing within the pass, so two sets competing for one room never each hold part of it: the first
in order that fits takes it, the other waits (docs/semantics.md, "Gangs of gangs").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from cogate.controller.model import groupsets
from cogate.controller.model.words import fits_of
from cogate.controller.model.verdicts import GroupRequest, GroupVerdict, Outcome
from cogate.controller.planning.members import classify

if TYPE_CHECKING:
    from cogate.controller.planning.room import Room

__all__ = ["judge_unreleased", "SetPlanning"]

Key = tuple[str, str]


def _key(g: GroupRequest) -> Key:
    return (g.namespace, g.name)


class SetPlanning:
    """The set rule's state on a :class:`~cogate.controller.planning.planner.Pass`: while
    ``set_depth`` > 0 a set is being planned, so releases are not committed (``Pass._commit``) and
    verdicts are not kept between passes (the incremental planner judges them again)."""

    set_depth: int = 0
    room: Room
    new_reservations: list[Any]
    gate: str

    if TYPE_CHECKING:
        def judge(self, g: GroupRequest) -> GroupVerdict: ...

    def _commit(self) -> None:
        """Keep what a release placed (``Room.commit``), unless a set is being planned (its plans are
        committed or rolled back together: :func:`judge_unreleased`)."""
        if not self.set_depth:
            self.room.commit()

    def judge_set(self, todo: Sequence[GroupRequest], minimum: int, released: int) -> dict[Key, GroupVerdict]:
        """Judge ``todo`` (the set's unreleased groups, in order) as one unit (module doc):
        ``minimum`` groups needed, ``released`` of them already released."""
        mark = self.room.mark()
        reservations, promised = len(self.new_reservations), len(self.room.promised)
        self.set_depth += 1
        try:
            verdicts = {_key(g): self.judge(g) for g in todo}
        finally:
            self.set_depth -= 1
        fit = [k for k, v in verdicts.items() if v.outcome == Outcome.RELEASED]
        if released + len(fit) >= minimum:
            self.room.commit()
            return verdicts
        self.room.rollback(mark)
        del self.new_reservations[reservations:]
        del self.room.promised[promised:]
        return _held(todo, verdicts, minimum, released + len(fit))


def _held(todo: Sequence[GroupRequest], verdicts: dict[Key, GroupVerdict], minimum: int,
          fitting: int) -> dict[Key, GroupVerdict]:
    """The verdicts of a set that does not reach its minimum: nothing released (module doc)."""
    spec = todo[0].group_set
    members = groupsets.set_name(spec.members if spec else [_key(g) for g in todo], todo[0].namespace)
    count = f"{fitting} of {minimum} groups needed fit"
    short = [(g, verdicts[_key(g)]) for g in todo if verdicts[_key(g)].outcome != Outcome.RELEASED]
    first_g, first_v = short[0]
    out = {}
    for g in todo:
        v = verdicts[_key(g)]
        if v.outcome == Outcome.RELEASED:
            text = (f"{fits_of(v.fits, g.min_member)}, but waits for set {members} ({count}): PodGroup "
                    f"{groupsets.group_label(_key(first_g), g.namespace)} is short: {first_v.message}")
            out[_key(g)] = GroupVerdict(g.namespace, g.name, first_v.outcome, {}, v.fits, text)
        else:
            out[_key(g)] = GroupVerdict(g.namespace, g.name, v.outcome, {}, v.fits,
                                        f"{v.message}; set {members} waits for it ({count})",
                                        min_resources_short=v.min_resources_short)
    return out


def _waiting(g: GroupRequest, gate: str, outcome: Outcome, message: str) -> GroupVerdict:
    return GroupVerdict(g.namespace, g.name, outcome, {}, len(classify(g, gate).bound), message)


def judge_unreleased(run: SetPlanning, ordered: Sequence[tuple[int, GroupRequest]]) -> dict[int, GroupVerdict]:
    """The verdicts of the unreleased groups of ``ordered`` (``(index, group)`` in the planner's
    order, released groups included: they count for their set), by index (module doc)."""
    judge = run.judge
    groups = [g for _, g in ordered]
    if not any(g.group_set or g.group_set_error for g in groups):
        return {i: judge(g) for i, g in ordered if not g.released}
    formed = groupsets.form({_key(g): g.group_set for g in groups if not g.group_set_error},
                            invalid=[_key(g) for g in groups if g.group_set_error])
    index = {_key(g): (i, g) for i, g in ordered}
    position = {_key(g): n for n, (_, g) in enumerate(ordered)}
    out: dict[int, GroupVerdict] = {}
    for i, g in ordered:
        if g.released or i in out:
            continue
        key = _key(g)
        if g.group_set_error:
            out[i] = _waiting(g, run.gate, Outcome.UNSCHEDULABLE, f"invalid {g.group_set_error}")
        elif key in formed.waiting:
            out[i] = _waiting(g, run.gate, Outcome.WAITING_FOR_MEMBERS, formed.waiting[key])
        elif key not in formed.sets:
            out[i] = judge(g)
        else:
            s = formed.sets[key]
            members = sorted((index[m] for m in s.members), key=lambda pair: position[_key(pair[1])])
            released = sum(1 for _, m in members if m.released)
            todo = [m for _, m in members if not m.released]
            if released >= s.minimum:
                verdicts = {_key(m): judge(m) for m in todo}
            else:
                verdicts = run.judge_set(todo, s.minimum, released)
            for m in todo:
                out[index[_key(m)][0]] = verdicts[_key(m)]
    return out
