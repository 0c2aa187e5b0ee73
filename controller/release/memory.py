"""What the release guard and the after-release duties remember about one PodGroup between passes
(pure): :class:`ReleaseMemory`, with :class:`Refusal` and :class:`Budget`.

As kopf's ``DaemonsMemory`` (kopf/_core/engines/daemons.py): the feature defines its own record and
the small interface it reaches the records through (:class:`ReleaseMemories`); the controller's
per-group memory (``cogate.controller.memory``) composes the record and implements the interface,
so this folder never imports the loop.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from cogate.controller.model.recovery import Record

__all__ = ["Refusal", "BudgetState", "Budget", "BUDGET_DELETED", "BUDGET_FOREIGN", "ReleaseMemory",
           "ReleaseMemories"]


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
class ReleaseMemory:
    """One PodGroup's release state: ``refusal``, its last refused release (:class:`Refusal`: when to
    retry, how often in a row, the text for ``ReleaseAccepted=False``; back-off
    :func:`cogate.controller.model.wakeups.refusal_backoff`; kept by
    :class:`cogate.controller.release.guard.ReleaseGuard`); ``budget``, the opt-in
    PodDisruptionBudget as last written (:class:`Budget`); ``timeout_evicted``/``quorum_evicted``,
    the releases (``scheduleStartTime``) whose members ``--evict-on-timeout``/``--evict-below-quorum``
    already evicted, once per release; ``recovery``, the recovery deadline's record as this process
    last acted on it (:mod:`cogate.controller.model.recovery`: a status written but not yet in the
    informer's cache never reads as an older record); ``recovery_evicted``, the members (uids) the
    recovery's rounds evicted and that still exist (a later round says how many the watch still
    shows; they are no members any more: ``Aftercare.mark_going``); ``recovery_retry``, the members whose eviction in the current round
    failed, tried again from ``recovery_retry_at`` (epoch seconds) until it goes through or the
    round's next step is due; the last seven kept by :class:`cogate.controller.release.aftercare.Aftercare`.

    The record lives in the process only: after a restart (or a new leader) a refused release is
    tried again at once (and, refused again, backs off from 5 s; ``ReleaseAccepted=False`` stays
    written until a release goes through); the budget is written once more (create or update, same
    object) or deleted once more, and a foreign one is reported again; the eviction policies act once
    more on what is then a victim (the members evicted before came back gated and are not). The
    recovery's record is in the PodGroup's status (the ``Recovery`` condition), so a restart goes on
    from it."""

    refusal: Refusal | None = None
    budget: Budget | None = None
    timeout_evicted: set[str] = field(default_factory=set)
    quorum_evicted: set[str] = field(default_factory=set)
    recovery: Record | None = None
    recovery_evicted: set[str] = field(default_factory=set)
    recovery_retry: set[str] = field(default_factory=set)
    recovery_retry_at: float = 0.0


class ReleaseMemories(Protocol):
    """How the release guard reaches every group's record (implemented by the controller's memory)."""

    def iter_release(self) -> Iterator[tuple[str, ReleaseMemory]]:
        """``(uid, record)`` of every group remembered (a snapshot: safe while records are added)."""
        ...
