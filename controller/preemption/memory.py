"""What the preemption room remembers about one PodGroup between passes (pure): :class:`PreemptionMemory`.

As kopf's ``DaemonsMemory`` (kopf/_core/engines/daemons.py): the feature defines its own record and
the small interface it reaches the records through (:class:`PreemptionMemories`, by PodGroup uid);
the controller's per-group memory (``cogate.controller.memory``) composes the record and implements
the interface, so this folder never imports the loop.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from cogate.controller.preemption.inflight import InFlight

__all__ = ["PreemptionMemory", "PreemptionMemories"]


@dataclass
class PreemptionMemory:
    """One PodGroup's preemption state (``--preemption``): ``in_flight``, the preemption in flight for
    the group (:class:`~cogate.controller.preemption.inflight.InFlight`, ``None``: none); ``note``,
    ``(reason, message)`` of ``Preempting=False`` (how the last one ended, or why none is made);
    ``checked``, epoch seconds of the last selection that preempted nothing; ``attempts`` and
    ``until``, preemptions in a row that ended without placing the group and the end of the back-off
    (epoch seconds) before the next (:func:`~cogate.controller.preemption.inflight.backoff_seconds`).

    The record lives in the process only. A preemption in flight is rebuilt from the cluster on a
    new process's first pass (and on gaining leadership):
    :meth:`cogate.controller.preemption.room.Preempting.resume` reads, with
    :func:`cogate.controller.preemption.inflight.rebuild`, the plan from the members'
    ``nominatedNodeName`` that cogate's field manager owns and the victims from the pods still there
    marked ``DisruptionTarget`` ``PreemptionByCogate`` naming the group; its room stays held, it
    keeps its start and its deadline (the victims' ``deletionTimestamp``), a victim marked but not
    yet deleted is deleted, and it ends as the earlier process's would have. Lost with the record:
    ``nominated`` beyond the plan (every planned member counts as seen), ``gone_at`` (the 1 s
    re-check after the victims went starts again), the selection's exact message (a rebuilt one
    names the victims still there and says it was resumed) and the back-off of earlier preemptions
    that ended (``attempts``/``until``: the next one may come sooner). Nominations of cogate's on a
    group with no record rebuilt are cleared (``Preempting`` clears them on gated members of groups
    with no preemption in flight)."""

    in_flight: InFlight | None = None
    note: tuple[str, str] | None = None
    checked: float = -math.inf
    attempts: int = 0
    until: float = -math.inf


class PreemptionMemories(Protocol):
    """How the preemption room reaches the groups' records (implemented by the controller's memory)."""

    def recall_preemption(self, uid: str) -> PreemptionMemory:
        """The record of PodGroup ``uid`` (a blank one the first time)."""
        ...

    def iter_preemption(self) -> Iterator[tuple[str, PreemptionMemory]]:
        """``(uid, record)`` of every group remembered (a snapshot: safe while records are added)."""
        ...
