"""Relaying a held group's reason to its owner and gated members (the rules: :mod:`cogate.controller.release.relays`).

One verb, :meth:`Relaying.tell`, called once per verdict after the status is computed, and
:meth:`Relaying.forget` after each pass. Remembered per PodGroup uid: the reason last relayed,
whether the owner heard it and which members did. A new reason (whatever the message) is told
again to the owner and the gated members; under the same reason only members not told yet
(those created since) hear it, up to :data:`~cogate.controller.release.relays.MEMBERS_TOLD` per
reason; a release, or the group no longer held, forgets it, so the next hold is news again.
What it costs: at most ``MEMBERS_TOLD`` + 1 Events per reason, queued to the event recorder's
background thread (its bounded queue and series aggregation), never an API call on the
reconcile path. A new leader (or a restart) remembers nothing and tells each held group's
reason once more. Thread-safe: verdicts are applied in the reconciler's pool.
"""

from __future__ import annotations

import threading
from collections.abc import Collection
from dataclasses import dataclass, field

from cogate.controller.release import relays
from cogate.controller.kube.events import Emitter
from cogate.controller.status.inputs import GroupObject
from cogate.controller.model.verdicts import GroupRequest
from cogate.models import PodGroupStatus


@dataclass
class _Told:
    """What a group's current reason reached: the owner, the members (uids)."""

    reason: str
    owner: bool = False
    members: set[str] = field(default_factory=set)


class Relaying:
    """Tells a held group's owner and gated members why it waits (module doc)."""

    def __init__(self, events: Emitter, gate: str, cap: int = relays.MEMBERS_TOLD) -> None:
        self._events = events
        self._gate = gate
        self._cap = cap
        self._lock = threading.Lock()
        self._told: dict[str, _Told] = {}

    def tell(self, g: GroupObject, request: GroupRequest, status: PodGroupStatus | None, now: float,
             explained: bool = False, heard: str = "") -> int:
        """Relay ``status``'s held reason to whom has not heard it (``explained``: a finding
        explains a ``WaitingForMembers``; ``heard``: the uid of an owner told the finding
        already, which is not told again); how many Events were queued. ``now`` is unused
        (the memory is by reason, not by time) but kept for the room's shape."""
        said = relays.held(status, explained)
        if said is None or self._events.recorder is None:
            with self._lock:
                self._told.pop(g.uid, None)
            return 0
        reason, message = said
        with self._lock:
            told = self._told.get(g.uid)
            if told is None or told.reason != reason:
                told = self._told[g.uid] = _Told(reason)
            who = relays.audience(g.key[0], g.owner, request.members, self._gate, self._cap,
                                  frozenset(told.members), told.owner)
            told.owner = told.owner or who.owner is not None
            told.members.update(r.uid for r in who.members)
        refs = [r for r in who.refs if not (heard and r.kind != "Pod" and r.uid == heard)]
        if refs:
            notice = relays.relayed(*g.key, reason, message, explained)
            for ref in refs:
                self._events.record(ref, notice)
        return len(refs)

    def forget(self, live_uids: Collection[str]) -> None:
        """Forget PodGroups not in ``live_uids``."""
        with self._lock:
            for uid in [u for u in self._told if u not in live_uids]:
                del self._told[uid]
