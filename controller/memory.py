"""What the controller remembers about each PodGroup between passes (pure): one record per group.

As kopf's ``ResourceMemory``: one :class:`GroupMemory` per PodGroup, recalled by the
PodGroup's uid (:meth:`Memories.recall`) and forgotten in one place when the group is gone
(:meth:`Memories.forget`). A PodGroup deleted and made again under the same name has a new
uid, so it starts with a blank record. The record holds:

- ``refusal``: the group's last refused release (:class:`Refusal`: when to retry, how often in
  a row, the text for ``ReleaseAccepted=False``; back-off :func:`cogate.controller.model.wakeups.refusal_backoff`);
- ``progress_written``: monotonic seconds of the last status write, ``progress_pending``: when a
  change of numbers only was first held back since (``None``: none is); such a change waits
  ``status.PROGRESS_WRITE_SECONDS`` after the later of the two (``status.write_due``);
- ``budget``: the opt-in PodDisruptionBudget as last written (:class:`Budget`);
- ``timeout_evicted``/``quorum_evicted``: the releases (``scheduleStartTime``) whose members
  ``--evict-on-timeout``/``--evict-below-quorum`` already evicted (once per release);
- ``ended``: members seen ended during the release (:class:`cogate.controller.status.status.EndedMembers`);
- ``binding``: how far the standing release got binding its members and when a member last bound
  (:class:`cogate.controller.status.status.BindProgress`: the timeout clock runs from then);
- ``preemption``: the preemption in flight for the group (:class:`cogate.controller.preemption.inflight.InFlight`),
  ``preemption_note``: ``(reason, message)`` of ``Preempting=False`` (how the last one ended, or why
  none is made), ``preemption_checked``: epoch seconds of the last selection that preempted nothing,
  ``preemption_attempts``/``preemption_until``: preemptions in a row that ended without placing the
  group and the end of the back-off (epoch seconds) before the next.

The record lives in the process only: a restart (or a new leader) loses it, and the next
process starts from what the cluster holds. Then a refused release is tried again at once
(and, refused again, backs off from 5 s; ``ReleaseAccepted=False`` stays written until a
release goes through); the first numbers-only status change is written at once; the budget is
written once more (create or update, same object) or deleted once more, and a foreign one is
reported again; the eviction policies act once more on what is then a victim (the members
evicted before came back gated and are not); the ended members are rebuilt from the written
``status.succeeded``/``failed`` (``status.track_ended`` takes them as the base); the bind
progress starts again: a release with members placed already gets a full timeout window from the
first pass (``status.track_progress``), never a shorter one. A preemption in flight is rebuilt
from the cluster on the new process's first pass (and on gaining leadership):
:meth:`cogate.controller.preemption.room.Preempting.resume` reads, with
:func:`cogate.controller.preemption.inflight.rebuild`, the plan from the members' ``nominatedNodeName`` that
cogate's field manager owns and the victims from the pods still there marked ``DisruptionTarget``
``PreemptionByCogate`` naming the group; its room stays held, it keeps its start and its deadline
(the victims' ``deletionTimestamp``), a victim marked but not yet deleted is deleted, and it ends as
the earlier process's would have. Lost with the record: ``nominated`` beyond the plan (every planned
member counts as seen), ``gone_at`` (the 1 s re-check after the victims went starts again), the
selection's exact message (a rebuilt one names the victims still there and says it was resumed) and
the back-off of earlier preemptions that ended (``preemption_attempts``/``preemption_until``: the
next one may come sooner). Nominations of cogate's on a group with no record rebuilt are cleared
(``Preempting`` clears them on gated members of groups with no preemption in flight).

Thread safety: verdicts are applied in a thread pool, one task per group per pass, so a record
is only touched by one task at a time; :meth:`Memories.recall` adds a record with one
``dict.setdefault`` (atomic under the GIL), and :meth:`Memories.forget` runs between passes.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from enum import StrEnum

from cogate.controller.preemption.inflight import InFlight
from cogate.controller.status.status import BindProgress, EndedMembers


@dataclass(frozen=True)
class Refusal:
    """A refused release of one group: ``until`` (epoch seconds) no retry, ``attempts`` refusals
    in a row, ``message`` (the ``ReleaseRefused`` text), the refused members' ``uids``, and
    whether the whole group waits (a fresh release) or only those members (a released group)."""

    until: float
    attempts: int
    message: str
    uids: frozenset[str] = frozenset()
    whole_group: bool = True


class BudgetState(StrEnum):
    """What cogate last did to the group's opt-in PodDisruptionBudget."""

    #: Created or updated with ``minAvailable`` = :attr:`Budget.min_member`.
    ENSURED = "ensured"
    #: Deleted (or found absent).
    DELETED = "deleted"
    #: One of that name exists that cogate did not make: left alone for good.
    FOREIGN = "foreign"


@dataclass(frozen=True)
class Budget:
    """The group's PodDisruptionBudget as last written: ``state`` and, when ensured, its
    ``minAvailable`` (the group's ``minMember`` then; 0 otherwise)."""

    state: BudgetState
    min_member: int = 0

    @classmethod
    def ensured(cls, min_member: int) -> Budget:
        return cls(BudgetState.ENSURED, min_member)


BUDGET_DELETED = Budget(BudgetState.DELETED)
BUDGET_FOREIGN = Budget(BudgetState.FOREIGN)


@dataclass
class GroupMemory:
    """Everything remembered about one PodGroup between passes (see the module doc)."""

    refusal: Refusal | None = None
    progress_written: float = -math.inf
    progress_pending: float | None = None
    budget: Budget | None = None
    timeout_evicted: set[str] = field(default_factory=set)
    quorum_evicted: set[str] = field(default_factory=set)
    ended: EndedMembers | None = None
    binding: BindProgress | None = None
    preemption: InFlight | None = None
    preemption_note: tuple[str, str] | None = None
    preemption_checked: float = -math.inf
    preemption_attempts: int = 0
    preemption_until: float = -math.inf
    #: ``--provisioning-class`` (controller/provisioning/room.py): ``(reason, message)`` of
    #: ``Provisioning=False`` (how the last request ended), failed requests in a row, and the epoch
    #: seconds before which the group does not ask again. The request itself is an object in the
    #: cluster (found again after a restart); only the back-off is lost with the process.
    provisioning_note: tuple[str, str] | None = None
    provisioning_failures: int = 0
    provisioning_until: float = -math.inf
    #: Name of the request whose ``Provisioned=True`` this process has announced (one event, one
    #: observation of the time to provisioned).
    provisioning_seen: str = ""
    #: Name of the request whose end (consumed, not needed, failed, expired) this process has
    #: counted: while its delete fails it is deleted again in later passes, not counted again.
    provisioning_ended: str = ""


class Memories:
    """The :class:`GroupMemory` of each PodGroup, by PodGroup uid."""

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
