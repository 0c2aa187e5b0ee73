"""What the provisioning room remembers about one PodGroup between passes (pure): :class:`ProvisioningMemory`.

As kopf's ``DaemonsMemory`` (kopf/_core/engines/daemons.py): the feature defines its own record and
the small interface it reaches the records through (:class:`ProvisioningMemories`, by PodGroup uid);
the controller's per-group memory (``cogate.controller.memory``) composes the record and implements
the interface, so this folder never imports the loop.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

from cogate.controller.preemption.memory import PreemptionMemory

__all__ = ["ProvisioningMemory", "ProvisioningMemories"]


@dataclass
class ProvisioningMemory:
    """One PodGroup's ProvisioningRequest back-off (``--provisioning-class``,
    :class:`cogate.controller.provisioning.room.Provisioning`): ``note``, ``(reason, message)`` of
    ``Provisioning=False`` (how the last request ended); ``failures``, failed requests in a row;
    ``until``, the epoch seconds before which the group does not ask again
    (:func:`~cogate.controller.provisioning.provreq.backoff_seconds`); ``seen``, the name of the
    request whose ``Provisioned=True`` this process has announced (one event, one observation of the
    time to provisioned); ``ended``, the name of the request whose end (consumed, not needed, failed,
    expired) this process has counted: while its delete fails it is deleted again in later passes,
    not counted again. ``asked_nodes``: the node names when the standing request was made (the
    nodes it brought are the others); ``taken``: requests in a row whose new nodes others took
    before the release (asked again at once the first time, then with back-off).

    The record lives in the process only. The request itself is an object in the cluster (found
    again after a restart, through the informer). Lost with the process: the back-off (a failed
    request's group may ask again sooner), ``seen`` (a request already provisioned is announced
    once more: one more ``Provisioned`` event and metric observation) and ``ended`` (a request whose
    delete had failed is counted once more when it is deleted), ``asked_nodes`` (capacity taken from a
    request made before the restart is not told: its booking's expiry ends it) and ``taken``."""

    note: tuple[str, str] | None = None
    failures: int = 0
    until: float = -math.inf
    seen: str = ""
    ended: str = ""
    #: Node names when the standing request was made (which nodes it brought: :func:`~cogate.controller.provisioning.provreq.booking_taken`).
    asked_nodes: frozenset[str] | None = None
    #: Requests in a row whose capacity others took before the release (:func:`~cogate.controller.provisioning.provreq.retake_seconds`).
    taken: int = 0


class ProvisioningMemories(Protocol):
    """How the provisioning room reaches the groups' records (implemented by the controller's memory):
    its own, and the preemption room's (its note says whether victims can make room)."""

    def recall_provisioning(self, uid: str) -> ProvisioningMemory:
        """The record of PodGroup ``uid`` (a blank one the first time)."""
        ...

    def recall_preemption(self, uid: str) -> PreemptionMemory:
        """The preemption record of PodGroup ``uid`` (a blank one the first time)."""
        ...
