"""Explanations where users look (pure): what a held group's members and owner are told, and who.

Users look at their MPIJob, RayCluster or Job and at its pods, not at the PodGroup. So when a
held group's reason changes (the ``Released=False`` condition's reason: ``InsufficientCapacity``,
``Unschedulable``, ``ReleaseRefused``, ...), the shell (:mod:`cogate.controller.release.relaying`)
records the same reason and message as an Event on

* the group's **controller owner**: the PodGroup's own controller ``ownerReference`` (an
  operator's PodGroup names its MPIJob, RayCluster, ...), else the controller owner every
  member shares (a Job's pods, a ReplicaSet's), else none (bare pods, or several owners);
* its **gated members** (cogate's gate on, not bound), each once per reason (members that
  appear later, e.g. an operator's pods created after its PodGroup, are told when they do), at
  most :data:`MEMBERS_TOLD` per reason in creation order: a gang of 1,000 costs at most that
  many Events per change of reason, written by the event recorder's background thread, never
  on the reconcile path.

``WaitingForMembers`` is the first moment of every gang while its owner creates the pods, so
it is relayed only when a finding explains it (an owner that cannot complete the group, or
creates it in stages: ``explained``). The type is the PodGroup event's: Normal for
``WaitingForMembers`` (Warning when explained), Warning otherwise
(:func:`cogate.controller.status.notices.verdict_event`). The message names the PodGroup and is cut
to :data:`MESSAGE_CHARS` at a ``"; "`` boundary (the ``Released`` condition has the rest).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from cogate.controller.status.conditions import CONDITION_RELEASED
from cogate.controller.status.notices import NORMAL, WARNING, Notice, ObjectRef, Reason
from cogate.controller.model.records import PodInfo
from cogate.models import PodGroupStatus

__all__ = ["MEMBERS_TOLD", "MESSAGE_CHARS", "Audience", "held", "relayed", "cut", "audience"]

#: How many gated members are told about one change of a group's reason (the first by creation).
MEMBERS_TOLD = 50
#: Longest relayed message (characters; the API server refuses Event notes over 1024).
MESSAGE_CHARS = 1000


def held(status: PodGroupStatus | None, explained: bool = False) -> tuple[str, str] | None:
    """``(reason, message)`` of ``status``'s ``Released=False`` condition, the group's held
    reason, or None (released, no condition yet, or plain ``WaitingForMembers`` while not
    ``explained``: module doc)."""
    for c in (status.conditions or []) if status is not None else ():
        if c.type == CONDITION_RELEASED:
            if c.status != "False" or (c.reason == Reason.WAITING_FOR_MEMBERS and not explained):
                return None
            return c.reason, c.message
    return None


def cut(message: str, limit: int = MESSAGE_CHARS) -> str:
    """``message`` within ``limit`` characters: whole ``"; "``-separated parts, then ``"; ..."``;
    a first part longer than ``limit`` is cut at a space."""
    if len(message) <= limit:
        return message
    tail = "; ..."
    room = limit - len(tail)
    head = message[:room]
    at = head.rfind("; ")
    if at <= 0:
        at = head.rfind(" ")
    return (head[:at] if at > 0 else head) + tail


def relayed(namespace: str, name: str, reason: str, message: str, explained: bool = False) -> Notice:
    """The Event told to PodGroup ``namespace/name``'s members and owner: its ``reason``,
    ``"PodGroup <ns>/<name>: <message>"`` (:func:`cut`), Normal for ``WaitingForMembers`` unless
    ``explained``, else Warning."""
    type_ = NORMAL if reason == Reason.WAITING_FOR_MEMBERS and not explained else WARNING
    return Notice(type_, reason, cut(f"PodGroup {namespace}/{name}: {message}"))  # type: ignore[arg-type]


@dataclass(frozen=True)
class Audience:
    """Who is told: the ``owner`` (None: no single one), the ``members`` told (Pods) and how
    many gated members were left out (``left_out``, beyond :data:`MEMBERS_TOLD`)."""

    owner: ObjectRef | None
    members: tuple[ObjectRef, ...]
    left_out: int = 0

    @property
    def refs(self) -> tuple[ObjectRef, ...]:
        return ((self.owner,) if self.owner is not None else ()) + self.members


def _owner_ref(namespace: str, owner: Sequence[str]) -> ObjectRef | None:
    if len(owner) != 4 or not owner[1] or not owner[2]:
        return None
    api_version, kind, name, uid = owner
    return ObjectRef(namespace, name, uid, kind=kind, api_version=api_version)


def audience(namespace: str, group_owner: Sequence[str], members: Sequence[PodInfo], gate: str,
             cap: int = MEMBERS_TOLD, told: frozenset[str] = frozenset(), owner_told: bool = False) -> Audience:
    """Who is to hear a held group's reason now (module doc): ``group_owner`` (the PodGroup's
    controller owner, ``(apiVersion, kind, name, uid)`` or ``()``), else the one controller
    owner of every member of ``members`` (in creation order), unless ``owner_told``; the members
    gated by ``gate`` not in ``told`` (uids of the members told this reason already), up to
    ``cap`` members told in all."""
    owner = _owner_ref(namespace, group_owner)
    if owner is None and members:
        owners = {m.owner for m in members}
        if len(owners) == 1:
            owner = _owner_ref(namespace, next(iter(owners)))
    gated = [m for m in members if gate in m.gates and not m.bound and m.uid not in told]
    room = max(0, cap - len(told))
    chosen = tuple(ObjectRef(m.namespace, m.name, m.uid, kind="Pod", api_version="v1") for m in gated[:room])
    return Audience(None if owner_told else owner, chosen, len(gated) - len(chosen))
