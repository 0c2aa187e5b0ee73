"""Gangs of gangs (pure): sets of PodGroups admitted together, read from annotations and formed.

A parameter-server job is often two PodGroups (ps and workers) that are useless one without the
other; disaggregated inference is a set of prefill and decode gangs. A PodGroup names the set it
belongs to in one of two annotations, each a JSON list of PodGroups (``name`` for one in its own
namespace, ``namespace/name`` for another):

* ours, :data:`SET_ANNOTATION` (``cogate.dev/gang-set``), with the optional
  :data:`SET_MINIMUM_ANNOTATION` (``cogate.dev/gang-set-minimum``: at least k of the n groups, an
  int; default all of them);
* Koordinator's :data:`KOORDINATOR_GROUPS_ANNOTATION` (``gang.scheduling.koordinator.sh/groups``,
  ``["ns/a", "ns/b"]``: all of them), read as it is written for Koordinator.

The set of a group is the groups listed plus itself (:func:`parse`). A set **forms**
(:func:`form`) only when every group it lists exists and names exactly the same set and the same
minimum: consent of each group's owner, which makes a set across namespaces safe (a PodGroup in one
namespace can never hold or release a PodGroup of another namespace that does not name it back).
A group whose set does not form waits, its status naming the group that does not exist or names
another set; a group that names no set is never held by one. A group names one set, so two sets
never overlap (the ordering rule for sets that compete: docs/semantics.md, "Gangs of gangs").

The planner (:mod:`cogate.controller.planning.groupsets`) plans a formed set as one unit: released
together (at least its minimum of groups) or not at all.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["SET_ANNOTATION", "SET_MINIMUM_ANNOTATION", "KOORDINATOR_GROUPS_ANNOTATION", "MAX_GROUPS", "SetSpec",
           "SetError", "GroupSet", "Formed", "parse", "form", "set_name", "group_label", "not_alone"]

#: PodGroup annotation: JSON list of the PodGroups (``name`` or ``namespace/name``) admitted with this one.
SET_ANNOTATION = "cogate.dev/gang-set"
#: PodGroup annotation: at least this many groups of the set (an int, 1 to the set's size; default all).
SET_MINIMUM_ANNOTATION = "cogate.dev/gang-set-minimum"
#: Koordinator's annotation of a gang group (JSON list of ``namespace/name``), all of them required.
KOORDINATOR_GROUPS_ANNOTATION = "gang.scheduling.koordinator.sh/groups"
#: At most this many PodGroups in one set.
MAX_GROUPS = 64

Key = tuple[str, str]


class SetError(ValueError):
    """A set annotation that cannot be read; the text names the annotation and the fault."""


@dataclass(frozen=True)
class SetSpec:
    """What one PodGroup's annotations say: ``members`` the set's PodGroups (itself included) as
    sorted ``(namespace, name)``; ``minimum`` how many of them must be admitted (``len(members)``
    when not given); ``source`` the annotation read."""

    members: tuple[Key, ...]
    minimum: int
    source: str


def _keys(raw: str, where: str, namespace: str) -> list[Key]:
    try:
        value = json.loads(raw)
    except ValueError as e:
        raise SetError(f"{where}: not JSON ({e.msg} at character {e.pos})") from None
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise SetError(f'{where}: want a JSON list of PodGroup names, e.g. ["ps", "workers"] or ["team/ps"]')
    out = []
    for v in value:
        ns, _, name = v.rpartition("/")
        if "/" in ns or not name:
            raise SetError(f"{where}: {v!r} is not a PodGroup name or namespace/name")
        out.append((ns or namespace, name))
    return out


def parse(namespace: str, name: str, annotations: Mapping[str, str] | None) -> SetSpec | None:
    """The :class:`SetSpec` PodGroup ``namespace/name``'s annotations state, or None when they name
    no set. Raises :class:`SetError` for a list that cannot be read (module doc), more than
    :data:`MAX_GROUPS` groups, a minimum that is not an int from 1 to the set's size (or given
    without :data:`SET_ANNOTATION`), or both annotations naming different sets."""
    annotations = annotations or {}
    ours = annotations.get(SET_ANNOTATION)
    koord = annotations.get(KOORDINATOR_GROUPS_ANNOTATION)
    raw_min = annotations.get(SET_MINIMUM_ANNOTATION)
    if ours is None and koord is None:
        if raw_min is not None:
            raise SetError(f"annotation {SET_MINIMUM_ANNOTATION} without {SET_ANNOTATION}")
        return None
    specs = []
    for key, raw in ((SET_ANNOTATION, ours), (KOORDINATOR_GROUPS_ANNOTATION, koord)):
        if raw is not None:
            members = tuple(sorted(set(_keys(raw, f"annotation {key}", namespace)) | {(namespace, name)}))
            if len(members) > MAX_GROUPS:
                raise SetError(f"annotation {key}: {len(members)} PodGroups, at most {MAX_GROUPS}")
            specs.append((key, members))
    if len(specs) == 2 and specs[0][1] != specs[1][1]:
        raise SetError(f"annotations {SET_ANNOTATION} and {KOORDINATOR_GROUPS_ANNOTATION} name different sets")
    source, members = specs[0]
    minimum = len(members)
    if raw_min is not None:
        try:
            minimum = int(raw_min.strip())
        except ValueError:
            raise SetError(f"annotation {SET_MINIMUM_ANNOTATION}: {raw_min!r} is not an integer") from None
        if not 1 <= minimum <= len(members):
            raise SetError(f"annotation {SET_MINIMUM_ANNOTATION}: {minimum}, want 1 to {len(members)} "
                           "(the PodGroups of the set)")
    return SetSpec(members, minimum, source)


def group_label(key: Key, namespace: str) -> str:
    """How a PodGroup is named in a message about one in ``namespace``: ``name``, else ``ns/name``."""
    return key[1] if key[0] == namespace else f"{key[0]}/{key[1]}"


def set_name(members: Iterable[Key], namespace: str) -> str:
    """How a set is named in messages: its PodGroups (:func:`group_label`) in brackets."""
    return "[" + ", ".join(group_label(k, namespace) for k in members) + "]"


def not_alone(spec: SetSpec | None, namespace: str, what: str) -> str:
    """Why a group of a set is not acted for alone by ``what`` (``"preempts nothing"``, ``"asks
    for no nodes"``), '' for a group of no set. Preemption and ProvisioningRequests judge one group
    at a time; for one group of a set they would take victims or add nodes while its siblings may
    never fit, so the set is not admitted and the room goes in vain (docs/semantics.md, "Gangs of
    gangs"): they act for a whole set or, as now, for none of it."""
    if spec is None:
        return ""
    return (f"{what}: it is one PodGroup of set {set_name(spec.members, namespace)}, admitted whole or not at "
            "all, and victims or nodes for one of its groups would be in vain while the others do not fit (cogate "
            "does not yet preempt or ask for nodes for a whole set)")


@dataclass(frozen=True)
class GroupSet:
    """A formed set: ``members`` (``(namespace, name)``, sorted), ``minimum`` groups to admit."""

    members: tuple[Key, ...]
    minimum: int


@dataclass(frozen=True)
class Formed:
    """:func:`form`'s answer: ``sets`` per group key its formed :class:`GroupSet`; ``waiting`` per
    group key whose set did not form, why (the first group that does not exist or names another
    set)."""

    sets: Mapping[Key, GroupSet]
    waiting: Mapping[Key, str]


def form(specs: Mapping[Key, SetSpec | None], invalid: Iterable[Key] = ()) -> Formed:
    """Form the sets of ``specs`` (every PodGroup's :func:`parse`, None for those naming no set;
    ``invalid``: groups whose set annotations could not be read): a set forms when each of its
    groups is in ``specs`` with an equal :class:`SetSpec` (members and minimum; module doc)."""
    bad = set(invalid)
    sets: dict[Key, GroupSet] = {}
    waiting: dict[Key, str] = {}
    for key, spec in specs.items():
        if spec is None:
            continue
        why = ""
        for other in spec.members:
            if other == key:
                continue
            theirs = specs.get(other, ...)
            label = group_label(other, key[0])
            if other in bad:
                why = f"PodGroup {label} of the set has set annotations that cannot be read"
            elif theirs is ...:
                why = f"PodGroup {label} of the set does not exist"
            elif theirs is None:
                why = f"PodGroup {label} names no set (annotation {SET_ANNOTATION} or {KOORDINATOR_GROUPS_ANNOTATION})"
            elif theirs.members != spec.members:
                why = f"PodGroup {label} names another set, {set_name(theirs.members, key[0])}"
            elif theirs.minimum != spec.minimum:
                why = f"PodGroup {label} names minimum {theirs.minimum} of the set, this one {spec.minimum}"
            if why:
                break
        if why:
            waiting[key] = f"set {set_name(spec.members, key[0])}: {why}"
        else:
            sets[key] = GroupSet(spec.members, spec.minimum)
    # a group whose partner cannot form the set (it names it, but a third group does not) waits too
    changed = True
    while changed:
        changed = False
        for key, s in list(sets.items()):
            stuck = next((m for m in s.members if m in waiting), None)
            if stuck is not None:
                del sets[key]
                waiting[key] = f"set {set_name(s.members, key[0])}: {waiting[stuck].split(': ', 1)[1]}"
                changed = True
    return Formed(sets, waiting)
