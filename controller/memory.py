"""What the controller remembers about each PodGroup between passes (pure): one record per group.

As kopf's ``ResourceMemory`` (kopf/_core/reactor/inventory.py): one :class:`GroupMemory` per
PodGroup, recalled by the PodGroup's uid (:meth:`Memories.recall`) and forgotten in one place when
the group is gone (:meth:`Memories.forget`). A PodGroup deleted and made again under the same name
has a new uid, so it starts with a blank record. The record composes one record per concern, each
defined (with what a restart loses of it) next to the code that keeps it, as kopf's
``DaemonsMemory`` is:

- ``status``: the status writes' (:class:`cogate.controller.status.memory.StatusMemory`: the
  last write, a held-back progress change, the members seen ended, the bind progress);
- ``release``: the release guard's and the after-release duties'
  (:class:`cogate.controller.release.memory.ReleaseMemory`: the last refusal, the opt-in
  PodDisruptionBudget, the eviction tokens);
- ``preemption``: the preemption room's (:class:`cogate.controller.preemption.memory.PreemptionMemory`:
  the preemption in flight, its note, its back-off);
- ``provisioning``: the provisioning room's
  (:class:`cogate.controller.provisioning.memory.ProvisioningMemory`: the last request's note and
  end, the back-off).

A feature is handed its own record, or reaches the records through the small interface it defines
(:class:`~cogate.controller.preemption.memory.PreemptionMemories`,
:class:`~cogate.controller.provisioning.memory.ProvisioningMemories`,
:class:`~cogate.controller.release.memory.ReleaseMemories`), which :class:`Memories` implements:
no feature imports this module.

The records live in the process only: a restart (or a new leader) loses them, and the next process
starts from what the cluster holds (each record's docstring says what that means for it).

Thread safety: verdicts are applied in a thread pool, one task per group per pass, so a record
is only touched by one task at a time; :meth:`Memories.recall` adds a record with one
``dict.setdefault`` (atomic under the GIL), and :meth:`Memories.forget` runs between passes.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass, field

from cogate.controller.preemption.memory import PreemptionMemory
from cogate.controller.provisioning.memory import ProvisioningMemory
from cogate.controller.release.memory import ReleaseMemory
from cogate.controller.status.memory import StatusMemory


@dataclass
class GroupMemory:
    """Everything remembered about one PodGroup between passes, one record per concern (module doc)."""

    status: StatusMemory = field(default_factory=StatusMemory)
    release: ReleaseMemory = field(default_factory=ReleaseMemory)
    preemption: PreemptionMemory = field(default_factory=PreemptionMemory)
    provisioning: ProvisioningMemory = field(default_factory=ProvisioningMemory)


class Memories:
    """The :class:`GroupMemory` of each PodGroup, by PodGroup uid; implements the features' interfaces
    (``recall_<feature>``, ``iter_<feature>``)."""

    def __init__(self) -> None:
        self._by_uid: dict[str, GroupMemory] = {}

    def recall(self, uid: str) -> GroupMemory:
        """The record of PodGroup ``uid`` (a blank one the first time)."""
        memory = self._by_uid.get(uid)
        return memory if memory is not None else self._by_uid.setdefault(uid, GroupMemory())

    def forget(self, live_uids: Collection[str]) -> None:
        """Forget every group whose uid is not in ``live_uids`` (deleted since)."""
        self._by_uid = {uid: m for uid, m in self._by_uid.items() if uid in live_uids}

    def items(self) -> Iterator[tuple[str, GroupMemory]]:
        """``(uid, record)`` pairs (a snapshot: safe while records are added)."""
        return iter(list(self._by_uid.items()))

    def __len__(self) -> int:
        return len(self._by_uid)

    # -- the features' interfaces (preemption.memory, provisioning.memory, release.memory) ---------
    def recall_preemption(self, uid: str) -> PreemptionMemory:
        """The preemption record of PodGroup ``uid`` (``PreemptionMemories``)."""
        return self.recall(uid).preemption

    def iter_preemption(self) -> Iterator[tuple[str, PreemptionMemory]]:
        """``(uid, preemption record)`` pairs, a snapshot (``PreemptionMemories``)."""
        return iter([(uid, m.preemption) for uid, m in self.items()])

    def recall_provisioning(self, uid: str) -> ProvisioningMemory:
        """The provisioning record of PodGroup ``uid`` (``ProvisioningMemories``)."""
        return self.recall(uid).provisioning

    def iter_release(self) -> Iterator[tuple[str, ReleaseMemory]]:
        """``(uid, release record)`` pairs, a snapshot (``ReleaseMemories``)."""
        return iter([(uid, m.release) for uid, m in self.items()])
