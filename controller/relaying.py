"""Relaying a held group's reason to its owner and gated members (the rules: :mod:`cogate.controller.relays`).

One verb, :meth:`Relaying.tell`, called once per verdict after the status is computed. A
group's reason is relayed when it changes (per PodGroup uid and reason, whatever the message:
:meth:`cogate.controller.events.Emitter.changed`), and forgotten once the group is released
or no longer held, so the next hold is news again. What it costs: at most
:data:`~cogate.controller.relays.MEMBERS_TOLD` + 1 Events per change of reason, queued to the
event recorder's background thread (its bounded queue and series aggregation), never an API
call on the reconcile path. A new leader (or a restart) remembers nothing and tells each held
group's reason once more. Members that appear after a change are told at the next change.
"""

from __future__ import annotations

from cogate.controller import relays
from cogate.controller.events import Emitter
from cogate.controller.inputs import GroupObject
from cogate.controller.verdicts import GroupRequest
from cogate.models import PodGroupStatus

#: The de-duplication slot of relayed reasons (per PodGroup uid).
SLOT = "relay"


class Relaying:
    """Tells a held group's owner and gated members why it waits (module doc)."""

    def __init__(self, events: Emitter, gate: str, cap: int = relays.MEMBERS_TOLD) -> None:
        self._events = events
        self._gate = gate
        self._cap = cap

    def tell(self, g: GroupObject, request: GroupRequest, status: PodGroupStatus | None, now: float,
             explained: bool = False, heard: str = "") -> int:
        """Relay ``status``'s held reason when it changed (``explained``: a finding explains a
        ``WaitingForMembers``; ``heard``: the uid of an owner told the finding already, which is
        not told again); how many Events were queued."""
        said = relays.held(status, explained)
        if said is None:
            self._events.clear(g.uid, SLOT)
            return 0
        reason, message = said
        if not self._events.changed(g.uid, SLOT, reason, now):
            return 0
        notice = relays.relayed(*g.key, reason, message, explained)
        refs = [r for r in relays.audience(g.key[0], g.owner, request.members, self._gate, self._cap).refs
                if not (heard and r.kind != "Pod" and r.uid == heard)]
        for ref in refs:
            self._events.record(ref, notice)
        return len(refs)
