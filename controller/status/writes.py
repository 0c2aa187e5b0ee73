"""When and what of a PodGroup's computed status is written (pure).

:func:`status_patch` turns the status :func:`cogate.controller.status.status.compute_status`
computed into the merge-patch body for the status subresource, or ``None`` when nothing
changed, so status is written only on change. :func:`write_due` says when a change is written:
at once, or, for a change that only moves numbers (:func:`progress_only`: in condition messages,
and after the release the ``scheduled``/``running`` counts rising, issue 40),
at most every :data:`PROGRESS_WRITE_SECONDS` per group (issue 19), every
:data:`ARRIVING_WRITE_SECONDS` while the group waits for members (issue 40). Statuses are API JSON
(``Mapping``) or :class:`cogate.models.PodGroupStatus`; times are seconds on one clock.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from cogate.models import PodGroupStatus

__all__ = ["STATUS_FIELDS", "status_patch", "progress_only", "write_due", "PROGRESS_WRITE_SECONDS",
           "ARRIVING_WRITE_SECONDS", "PROGRESS_COUNTS"]

#: Status fields cogate writes (a merge patch nulls only these when they disappear).
STATUS_FIELDS = ("phase", "scheduled", "running", "succeeded", "failed", "scheduleStartTime", "occupiedBy", "conditions")


def _normal(status: Mapping[str, Any] | None) -> dict[str, Any]:
    """Known status fields of an API status dict, ``None``/empty dropped; conditions keyed by type."""
    out: dict[str, Any] = {}
    for key in STATUS_FIELDS:
        value = (status or {}).get(key)
        if value is None or (key == "conditions" and not value):
            continue
        out[key] = value
    return out


def status_patch(old: Mapping[str, Any] | None, new: PodGroupStatus) -> dict[str, Any] | None:
    """Merge-patch body (``{"status": {...}}``) taking status ``old`` (API JSON) to ``new``.

    Only changed fields are in the patch; a field cogate writes that ``new`` drops is
    set to ``null``; ``conditions`` is sent whole (a merge patch replaces lists). A
    condition whose ``status`` is unchanged keeps ``old``'s ``lastTransitionTime``.
    Returns ``None`` when nothing changed. Fields unknown to cogate in ``old`` are left alone.
    """
    before = _normal(old if isinstance(old, Mapping) else None)
    old_conditions = {c.get("type"): c for c in before.get("conditions", []) if isinstance(c, Mapping)}
    after = new.to_api()
    if after.get("conditions"):
        fixed = []
        for cond in after["conditions"]:
            prev = old_conditions.get(cond["type"])
            if prev is not None and prev.get("status") == cond["status"] and prev.get("lastTransitionTime"):
                cond = {**cond, "lastTransitionTime": prev["lastTransitionTime"]}
            fixed.append(cond)
        after["conditions"] = fixed
    after = _normal(after)
    body: dict[str, Any] = {}
    for key in STATUS_FIELDS:
        if key in after and before.get(key) != after[key]:
            body[key] = after[key]
        elif key not in after and key in before:
            body[key] = None
    return {"status": body} if body else None


def progress_only(old: Mapping[str, Any] | None, body: Mapping[str, Any] | None) -> bool:
    """Whether ``body`` (from :func:`status_patch`) only moves numbers of status ``old`` (API JSON):

    - numbers in condition messages: the same condition types, each with the same ``status`` and
      ``reason`` and a message equal but for its numbers ("5 of 8 members present" -> "6 of 8 ...");
    - and, once the group is released (``old`` has ``scheduleStartTime`` and a ``Released``
      condition ``True``), the counts of :data:`PROGRESS_COUNTS` rising (members bound, members
      running: issue 40, most status writes of a small gang came after its release, one per bind
      batch and per kubelet report).

    No other field may change. The controller writes such a change at most every
    :data:`PROGRESS_WRITE_SECONDS` per group (:func:`write_due`). Anything else (a new situation in
    the words of a message, a status, a reason, the phase, ``scheduleStartTime``, ``succeeded`` or
    ``failed``, a count falling, a count rising before the release) is not progress only."""
    status = (body or {}).get("status") or {}
    if not status or not set(status) <= {"conditions", *PROGRESS_COUNTS}:
        return False
    before = _normal(old if isinstance(old, Mapping) else None)
    old_conditions = {c.get("type"): c for c in before.get("conditions", []) if isinstance(c, Mapping)}
    counts = [key for key in PROGRESS_COUNTS if key in status]
    if counts and not (_released(before, old_conditions)
                       and all(_count(status[key]) > _count(before.get(key, 0)) for key in counts)):
        return False
    if "conditions" not in status:
        return True
    new_conditions = status["conditions"] or []
    if {c.get("type") for c in new_conditions} != set(old_conditions) or len(new_conditions) != len(old_conditions):
        return False
    def words(message: Any) -> str:
        return _DIGITS.sub("#", message) if isinstance(message, str) else repr(message)

    return all(old_conditions[c.get("type")].get("status") == c.get("status")
               and old_conditions[c.get("type")].get("reason") == c.get("reason")
               and words(old_conditions[c.get("type")].get("message")) == words(c.get("message"))
               for c in new_conditions)


#: Count fields whose rise after the release is progress (:func:`progress_only`): ``scheduled``
#: (members bound) and ``running``. ``succeeded`` and ``failed`` are not: a member ending is news.
PROGRESS_COUNTS = ("scheduled", "running")


def _count(value: Any) -> float:
    """A count field's value as a number (``None``/absent: 0; not a number: NaN, which compares false)."""
    if value is None:
        return 0
    return value if isinstance(value, int) and not isinstance(value, bool) else math.nan


def _released(status: Mapping[str, Any], conditions: Mapping[Any, Mapping[str, Any]]) -> bool:
    """Whether a written status records a standing release: ``scheduleStartTime`` and ``Released=True``."""
    return bool(status.get("scheduleStartTime")) and (conditions.get("Released") or {}).get("status") == "True"


#: Numbers standing alone ("5 of 8", "short by 2"), not part of a name ("w-1", "node3") or a
#: quantity ("1Gi"): a change of those is a change of words.
_DIGITS = re.compile(r"(?<![\w.-])\d+(?![\w-]|\.\d)")


#: Seconds a status change of one PodGroup that only moves numbers (:func:`progress_only`: members
#: arriving, "5 of 8 members present" -> "6 of 8 ..."; a released group's members binding and
#: starting, ``scheduled``/``running`` rising) waits, after it first appeared and after the group's
#: last write (:func:`write_due`). Issue 19: 100 groups of 8 wrote 551 status patches for 800
#: members; a group's members arrive well after its first write, so a wait counted from the last
#: write alone let the first arrival through at once. Issue 40: after a small gang's release, its
#: members bind and start in a few batches within a second or two, each a write of the counts;
#: the phase ``Scheduled`` and ``Running`` (at once) bring them up to date.
PROGRESS_WRITE_SECONDS = 2.0
#: The same wait for a group whose ``Released`` condition says ``WaitingForMembers`` (its owner is
#: creating the members: "3 of 8 members present" -> "5 of 8 ..."). Issue 40: 100 groups of 8
#: created at once still wrote 4.7 status patches per group, ~2 of them such counts, while the API
#: server was busiest creating the pods; a gang's members arrive within seconds and its release
#: write (at once) brings the numbers up to date. The count fields (``kubectl get pg`` columns) of
#: a group not released yet are written at once: only the condition's message trails, by at most this.
ARRIVING_WRITE_SECONDS = 10.0


def _arriving(body: Mapping[str, Any]) -> bool:
    """Whether a status patch's ``Released`` condition says ``WaitingForMembers``."""
    return any(isinstance(c, Mapping) and c.get("type") == "Released" and c.get("reason") == "WaitingForMembers"
               for c in (body.get("status") or {}).get("conditions") or ())


def write_due(old: Mapping[str, Any] | None, body: Mapping[str, Any] | None, last_write: float | None,
              now: float, *, pending_since: float | None = None, releasing: bool = False,
              period: float = PROGRESS_WRITE_SECONDS, arriving_period: float = ARRIVING_WRITE_SECONDS) -> float | None:
    """When to write the status change ``body`` (from :func:`status_patch`) of a PodGroup whose
    written status is ``old`` (API JSON): ``None`` to write it now, else the time at which it is
    due. Times are seconds on one clock (the controller's monotonic clock).

    A change that only moves numbers (:func:`progress_only`) is due ``period`` seconds after the
    later of the group's last write ``last_write`` and ``pending_since``, when a numbers-only change
    was first held back since that write (``None``: none was, it starts ``now``). So numbers-only
    writes are at least ``period`` apart, the latest numbers are written at most ``period`` after
    they first differed from what is written, and numbers that a release or a new reason overtakes
    within ``period`` (a gang's members arriving, then its release) are never written on their own.
    While the ``Released`` condition says ``WaitingForMembers`` the wait is ``arriving_period``
    instead (:data:`ARRIVING_WRITE_SECONDS`: members being created).
    Anything else is written at once: the first write (nothing written by this process:
    ``last_write`` ``None`` or ``-inf``), a release (``releasing``), a new reason, condition status
    or wording, the phase, ``scheduleStartTime``, ``succeeded``/``failed``, a count falling or rising
    before the release (:func:`progress_only`). The caller keeps ``pending_since``
    (the first ``now`` that returned a time; cleared by a write or when nothing is to be written),
    runs a pass at the time returned (:mod:`cogate.controller.model.wakeups`) and computes the status
    afresh then: the held write is never lost, only merged with the changes after it. ``None``
    too when ``body`` is ``None`` (nothing to write). Raises ``ValueError`` if ``period < 0`` or
    ``arriving_period < 0``.
    """
    if period < 0 or arriving_period < 0:
        raise ValueError(f"periods must be >= 0 seconds, got {period} and {arriving_period}")
    if body is None or releasing or last_write is None or last_write == -math.inf \
            or not progress_only(old, body):
        return None
    wait = arriving_period if _arriving(body) else period
    due = max(last_write, now if pending_since is None else pending_since) + wait
    return due if now < due else None
