"""What the status writes remember about one PodGroup between passes (pure): :class:`StatusMemory`.

The controller's per-group memory (``cogate.controller.memory``) composes it; the reconciler keeps it
with :func:`cogate.controller.status.status.compute_all` and
:func:`cogate.controller.status.writes.write_due`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from cogate.controller.status.status import BindProgress, EndedMembers

__all__ = ["StatusMemory"]


@dataclass
class StatusMemory:
    """One PodGroup's status-write state: ``progress_written``, monotonic seconds of the last status
    write, and ``progress_pending``, when a change of numbers only was first held back since
    (``None``: none is); such a change waits :data:`~cogate.controller.status.writes.PROGRESS_WRITE_SECONDS`
    after the later of the two (:func:`~cogate.controller.status.writes.write_due`); ``ended``, the
    members seen ended during the release (:class:`~cogate.controller.status.status.EndedMembers`);
    ``binding``, how far the standing release got binding its members and when a member last bound
    (:class:`~cogate.controller.status.status.BindProgress`: the timeout clock runs from then).

    The record lives in the process only: after a restart (or a new leader) the first numbers-only
    status change is written at once; the ended members are rebuilt from the written
    ``status.succeeded``/``failed`` (:func:`~cogate.controller.status.status.track_ended` takes them
    as the base); the bind progress starts again: a release with members placed already gets a full
    timeout window from the first pass (:func:`~cogate.controller.status.status.track_progress`),
    never a shorter one."""

    progress_written: float = -math.inf
    progress_pending: float | None = None
    ended: EndedMembers | None = None
    binding: BindProgress | None = None
