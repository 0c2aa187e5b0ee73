"""``Forcing``: the force-release room (the annotation ``cogate.dev/force-release``; rules in
:mod:`cogate.controller.release.force`).

Three verbs, called by the reconciler for each verdict it applies:

- :meth:`Forcing.apply` (first, before the release guard): the verdict turned into a forced one
  while the annotation says ``"true"``; a bad value is reported (Warning ``InvalidForceRelease``,
  once per value) and ignored; the planner's reservations of a forced group are dropped (its members
  go unpinned, so the room held for them on planned nodes is not theirs any more);
- :meth:`Forcing.conditions` (with the status): ``Released=True``/``ForceReleased`` on the release
  it made (:func:`cogate.controller.status.conditions.write_force_released`);
- :meth:`Forcing.announce` (after the gates went): the Normal ``ForceReleased`` event naming the
  members whose gate was removed and who set the annotation.

It keeps nothing between passes (the annotation is the state), so a restart changes nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

from cogate.controller.kube.events import Emitter
from cogate.controller.model.records import PodInfo
from cogate.controller.model.verdicts import GroupRequest, GroupVerdict
from cogate.controller.release import force
from cogate.controller.status import conditions, notices
from cogate.controller.status.inputs import GroupObject
from cogate.controller.status.notices import log_extra
from cogate.models import PodGroupStatus

__all__ = ["Forcing"]

log = logging.getLogger(__name__)

#: The Emitter slot of the annotation's Events (one standing situation per PodGroup).
SLOT = "force-release"


class Forcing:
    """Force-release of annotated PodGroups (see the module doc).

    ``events``: the reconciler's :class:`Emitter`; ``gate``: the controller's gate name; ``drop``:
    called with the uids whose reservations go after the pass (the reconciler's ``_drop``);
    ``member``: a member's cached record by uid (the members informer's ``get``), for the names
    in the event."""

    def __init__(self, events: Emitter, gate: str, drop: Callable[[Iterable[str]], None],
                 member: Callable[[str], PodInfo | None]) -> None:
        self._events = events
        self._gate = gate
        self._drop = drop
        self._member = member

    def apply(self, g: GroupObject, request: GroupRequest, verdict: GroupVerdict, now: float) -> GroupVerdict:
        """``verdict``, forced (:func:`force.forced`) while ``g`` carries the annotation ``"true"``
        and has gated members; a bad value is reported and ``verdict`` returned as it is."""
        state, value = force.requested(g.pg.metadata.annotations)
        if state is force.State.INVALID:
            message = force.invalid_message(value)
            self._events.emit(g.ref, SLOT, notices.invalid_force_release(message), now, key=value)
            return verdict
        if state is force.State.OFF:
            self._events.clear(g.uid, SLOT)
            return verdict
        new = force.forced(verdict, request, self._gate, g.force_release_by)
        if new is not verdict:
            if verdict.release:
                self._drop(verdict.release)  # the planner's pins are not used: their room is free
            log.info("PodGroup %s/%s: %s", *g.key, new.message, extra=log_extra(*g.key))
        return new

    def conditions(self, status: PodGroupStatus, g: GroupObject, verdict: GroupVerdict | None,
                   now: float) -> PodGroupStatus:
        """``status`` with ``Released=True``/``ForceReleased`` when ``verdict`` is a forced release
        of a group whose written status was not released; else ``status`` unchanged."""
        if verdict is None or not force.is_forced(verdict) or status.scheduleStartTime is None:
            return status
        old = g.pg.status.condition(conditions.CONDITION_RELEASED)
        conds = conditions.ConditionSet(status.conditions, now, g.pg.metadata.generation)
        conditions.write_force_released(conds, verdict.message, was_released=old is not None and old.status == "True")
        return status.model_copy(update={"conditions": conds.to_list()})

    def announce(self, g: GroupObject, verdict: GroupVerdict, removed: Mapping[str, str], now: float) -> None:
        """The Normal ``ForceReleased`` event when a forced ``verdict`` removed gates (``removed``:
        uid -> '' of the members whose gate went)."""
        if not removed or not force.is_forced(verdict):
            return
        names = [p.name if p is not None else uid for uid, p in ((u, self._member(u)) for u in removed)]
        self._events.record(g.ref, notices.force_released(force.event_message(removed, names, g.force_release_by)))
