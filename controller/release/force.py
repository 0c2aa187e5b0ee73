"""Force-release (pure): the annotation ``cogate.dev/force-release`` releases a group without the gang rule.

The way out of "my gang is stuck" when the operator knows better than the planner (a group the
cluster can never hold whole that should run partly anyway, members the planner cannot model, an
emergency): ``kubectl annotate pg NAME cogate.dev/force-release=true``.

Rules (docs/troubleshooting.md, "Force-release a group"; docs/semantics.md, "Release"):

- **Level-triggered, honoured while present** (as Kubernetes annotations such as
  ``cluster-autoscaler.kubernetes.io/safe-to-evict`` are read at each decision, not once): in each
  pass of the leading controller while the value is ``"true"``, every gated member of the group
  (:func:`gated_members`: carries the controller's gate, not bound, not terminal) is released
  **unpinned** (kube-scheduler places each one freely, whatever the plan said and whether or not
  minMember fit), members created later too. Nothing is kept in memory, so a restart changes
  nothing. Removing the annotation (or setting ``"false"``) returns the group to the gang rule for
  members gated from then on; members already released stay released.
- The group is then **released** as any other: the verdict is ``Released`` (``AlreadyReleased``
  for a group whose release stands), so its status records the release (``scheduleStartTime``,
  phase ``Scheduling``), ``Released=True`` with reason ``ForceReleased`` (:func:`status_message`),
  and the after-release duties (timeouts, quorum) apply to it like to any release.
- The release goes through the same path as the planner's: status first, then the gates; the
  release guard's dry run and back-off apply (a webhook that refuses pod updates refuses a forced
  release too: ``ReleaseRefused``). A group held by such a back-off is planned again, and
  force-released, when the back-off ends.
- A value other than ``"true"`` or ``"false"`` (case and surrounding blanks ignored) is reported
  (Warning event ``InvalidForceRelease``, :func:`invalid_message`) and ignored: the group is
  planned as if it were absent. The controller never fails on it.
- Who asked: the field manager that last set the annotation and when (``metadata.managedFields``,
  :func:`cogate.controller.status.inputs.annotation_writer`), named in the ``ForceReleased`` event
  and the condition; ``kubectl annotate`` shows as ``kubectl-annotate``.

Times are RFC 3339 text as the API server wrote them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from enum import StrEnum

from cogate.api import FORCE_RELEASE_ANNOTATION
from cogate.controller.model.records import PodInfo
from cogate.controller.model.verdicts import GroupRequest, GroupVerdict, Outcome

__all__ = [
    "ANNOTATION",
    "MESSAGE_PREFIX",
    "State",
    "requested",
    "gated_members",
    "forced",
    "is_forced",
    "who",
    "status_message",
    "event_message",
    "invalid_message",
]

#: The annotation (``cogate.api.FORCE_RELEASE_ANNOTATION``).
ANNOTATION = FORCE_RELEASE_ANNOTATION
#: Start of a forced verdict's message.
MESSAGE_PREFIX = f"force-released by the annotation {ANNOTATION}"


class State(StrEnum):
    """What the annotation asks (:func:`requested`)."""

    #: Absent, or ``"false"``: the gang rule applies.
    OFF = "off"
    #: ``"true"``: release every gated member now, unpinned.
    ON = "on"
    #: Any other value: reported and ignored.
    INVALID = "invalid"


def requested(annotations: Mapping[str, str] | None) -> tuple[State, str]:
    """``(state, value)`` of the annotation in a PodGroup's ``metadata.annotations`` (``None``:
    none). ``"true"``/``"false"`` in any case, blanks around them ignored. Never raises."""
    if not annotations or ANNOTATION not in annotations:
        return State.OFF, ""
    raw = annotations.get(ANNOTATION)
    value = raw if isinstance(raw, str) else str(raw)
    word = value.strip().lower()
    if word == "true":
        return State.ON, value
    if word == "false":
        return State.OFF, value
    return State.INVALID, value


def gated_members(members: Sequence[PodInfo], gate: str) -> list[PodInfo]:
    """The members a force-release ungates: carrying ``gate``, not bound, not terminal (a bound
    pod carries no gate; the checks keep the rule whole against odd objects)."""
    return [m for m in members if m.gated_by(gate) and not m.bound and not m.terminal]


def who(by: Sequence[str]) -> str:
    """``"set by <manager> at <time>"`` from :attr:`GroupObject.force_release_by
    <cogate.controller.status.inputs.GroupObject.force_release_by>` (``(manager, time)``), ``""`` when unknown."""
    if not by or not by[0]:
        return ""
    return f"set by {by[0]}" + (f" at {by[1]}" if len(by) > 1 and by[1] else "")


def status_message(count: int, min_member: int, by: Sequence[str]) -> str:
    """The forced verdict's message (the ``Released=True``/``ForceReleased`` condition's): how many
    members, against minMember, and who asked."""
    setter = who(by)
    noun = "member" if count == 1 else "members"
    return (f"{MESSAGE_PREFIX}{' (' + setter + ')' if setter else ''}: {count} gated {noun} released unpinned "
            f"for minMember {min_member}; the gang rule was not checked and kube-scheduler places each member")


def forced(verdict: GroupVerdict, request: GroupRequest, gate: str, by: Sequence[str] = ()) -> GroupVerdict:
    """``verdict`` turned into a force-release of every gated member of ``request`` (uid -> ``''``:
    unpinned), whatever its outcome; ``verdict`` itself when no member is gated (nothing to do).

    The outcome is ``AlreadyReleased`` when the group's release stands (``request.released``), else
    ``Released``; ``fits`` is the planner's; nothing is left ``waiting``; the message is
    :func:`status_message`. ``by``: ``(manager, time)`` of the annotation's writer, or ``()``."""
    gated = gated_members(request.members, gate)
    if not gated:
        return verdict
    outcome = Outcome.ALREADY_RELEASED if request.released else Outcome.RELEASED
    return replace(verdict, outcome=outcome, release={m.uid: "" for m in gated},
                   message=status_message(len(gated), request.min_member, by), waiting=(), min_resources_short=(),
                   forced=True)


def is_forced(verdict: GroupVerdict) -> bool:
    """``verdict`` is one :func:`forced` made (``GroupVerdict.forced``) and releases members."""
    return verdict.forced and Outcome(verdict.outcome).releases and bool(verdict.release)


def event_message(released: Mapping[str, str], names: Sequence[str], by: Sequence[str]) -> str:
    """The Normal ``ForceReleased`` event's message: how many members lost the gate (``released``:
    uid -> '' of those removed), some of their ``names``, who asked, and how to undo the rule."""
    setter = who(by)
    shown = ", ".join(sorted(names)[:10]) + (", ..." if len(names) > 10 else "")
    noun = "member" if len(released) == 1 else "members"
    return (f"removed the scheduling gate of {len(released)} gated {noun} ({shown}) without the gang rule, "
            f"unpinned, because of the annotation {ANNOTATION}=true{' ' + setter if setter else ''}; members "
            f"created while it stays are released too; remove it to return to gang admission")


def invalid_message(value: str) -> str:
    """The Warning ``InvalidForceRelease`` event's message for an annotation value that is neither
    ``"true"`` nor ``"false"``."""
    return (f"annotation {ANNOTATION}={value[:100]!r} ignored: the value must be \"true\" (release every gated "
            "member now, unpinned) or \"false\"; the group is planned as a gang")
