"""Kubernetes' own gangs as victim units (pure; issue 39), for
:func:`cogate.controller.preemption.victims.select_victims` (its module docstring, rule 9).

A ``scheduling.k8s.io`` PodGroup in disruption mode ``all``
(:class:`~cogate.controller.model.nativegroups.NativeGroup`; KEP-5710, workload-aware preemption)
is one victim unit: every bound pod naming it in ``spec.schedulingGroup`` goes, or none does. The
selection treats it as a gang with no slack (any one of its pods needed takes all of them) whose
priority is its PodGroup's (``spec.priority``; its pods' highest when the PodGroup has none). A
group in mode ``single``, and a pod whose PodGroup is not known (the API not served, the object
gone), is a set of ordinary pods.

:func:`native_units` finds the units, which of them may be touched and at what priority;
:func:`skipped_text` says which were passed over because only part of them would have been needed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from cogate.controller.model.nativegroups import GROUP, Mode, NativeGroup, native_key
from cogate.controller.model.records import PodInfo
from cogate.controller.planning.explanations import plural
from cogate.controller.planning.planstate import BoundView

__all__ = ["NO_SLACK", "NativeUnits", "native_units", "bound_of_namespaces", "unit_name", "skipped_text"]

#: The slack of an ``all`` group: taking any one of its pods takes every one (the gang rule of
#: :mod:`cogate.controller.preemption.selection` with ``alone + n > slack`` always true).
NO_SLACK = -1


@dataclass(frozen=True)
class NativeUnits:
    """The ``all`` groups of one selection: ``pods`` (unit key -> its bound pods not being deleted,
    as ``(pod, node slot)``) of the groups that may be touched, ``priority`` (unit key -> the unit's
    priority), ``untouchable`` (unit keys never touched: a priority, or one pod's, at the
    preemptor's or above, or a protected namespace) and their pods (``held``, which the room with
    every candidate gone keeps), ``groups`` (unit key -> the :class:`NativeGroup`)."""

    pods: dict[tuple[str, str], list[tuple[PodInfo, int]]] = field(default_factory=dict)
    priority: dict[tuple[str, str], int] = field(default_factory=dict)
    untouchable: frozenset[tuple[str, str]] = frozenset()
    held: tuple[PodInfo, ...] = ()
    groups: dict[tuple[str, str], NativeGroup] = field(default_factory=dict)


def bound_of_namespaces(namespaces: Iterable[str], index: Mapping[str, int], *, view: BoundView | None = None,
                        bound: Sequence[tuple[PodInfo, int]] = ()) -> list[tuple[PodInfo, int]]:
    """The bound non-terminal pods of ``namespaces`` as ``(pod, node slot)``: from ``view``
    (:meth:`BoundView.in_namespace <cogate.controller.planning.planstate.BoundView.in_namespace>`, else
    one pass over its pods), or filtered from ``bound`` (a Snapshot's)."""
    wanted = set(namespaces)
    if not wanted:
        return []
    if view is None:
        return [(p, i) for p, i in bound if p.namespace in wanted]
    out: list[tuple[PodInfo, int]] = []
    rest = set()
    for ns in sorted(wanted):
        ps = view.in_namespace(ns)
        if ps is None:
            rest.add(ns)
        else:
            out.extend((p, index[p.node_name]) for p in ps if p.node_name in index)
    if rest:
        out.extend((p, index[p.node_name]) for p in view.pods
                   if p.namespace in rest and p.bound and not p.terminal and p.node_name in index)
    return out


def native_units(natives: Sequence[NativeGroup], bound: Iterable[tuple[PodInfo, int]], priority: int,
                 protected: frozenset[str] = frozenset()) -> NativeUnits:
    """The victim units of the ``all`` groups among ``natives`` for a preemptor of ``priority``:
    their bound pods (``bound``: bound non-terminal pods with their slots; a pod being deleted is
    already going and belongs to no unit), each unit's priority (its PodGroup's ``spec.priority``,
    else its pods' highest), and the units never touched: priority at ``priority`` or above (equal
    priority never preempts, kube-scheduler ``SelectVictimsOnNode``), a pod of such a priority
    (a unit is taken whole, so one pod the preemptor may not take protects it all), or a namespace
    in ``protected``."""
    groups = {(g.namespace, g.name): g for g in natives if g.mode is Mode.ALL}
    if not groups:
        return NativeUnits()
    pods: dict[tuple[str, str], list[tuple[PodInfo, int]]] = {}
    for p, i in bound:
        if p.native_group and not p.deleting and (p.namespace, p.native_group) in groups:
            pods.setdefault(native_key(p.namespace, p.native_group), []).append((p, i))
    prio: dict[tuple[str, str], int] = {}
    untouchable: set[tuple[str, str]] = set()
    by_key = {g.key: g for g in groups.values()}
    for k, ps in pods.items():
        g = by_key[k]
        top = max(p.priority for p, _ in ps)
        prio[k] = g.priority if g.priority is not None else top
        if prio[k] >= priority or top >= priority or g.namespace in protected:
            untouchable.add(k)
    held = tuple(p for k in sorted(untouchable) for p, _ in pods[k])
    return NativeUnits({k: ps for k, ps in pods.items() if k not in untouchable},
                       {k: v for k, v in prio.items() if k not in untouchable}, frozenset(untouchable), held, by_key)


def unit_name(key: tuple[str, str]) -> str:
    """``namespace/name`` of a gang key; a native one reads ``namespace/name (scheduling.k8s.io)``."""
    ns, name = key
    prefix = f"{GROUP}/"
    return f"{ns}/{name[len(prefix):]} ({GROUP})" if name.startswith(prefix) else f"{ns}/{name}"


def skipped_text(half: Mapping[tuple[str, str], int], units: NativeUnits, taken: Iterable[tuple[str, str]]) -> str:
    """The sentence for the ``all`` groups of which only part would have been needed on some node
    (``half``: unit key -> the fewest of its pods needed there), '' for none: those passed over
    (``skipped``) and those taken whole anyway, e.g. ``native gang team/n (scheduling.k8s.io,
    disruptionMode all) skipped: 1 of its 2 pods would have been needed, and it is preempted whole
    or not at all``."""
    taken = set(taken)
    parts = []
    for k in sorted(half):
        n = len(units.pods.get(k, ()))
        if not n:
            continue
        verb = "taken whole" if k in taken else "skipped"
        parts.append(f"native gang {k[0]}/{k[1][len(GROUP) + 1:]} ({GROUP}, disruptionMode all) {verb}: "
                     f"{half[k]} of its {plural(n, 'pod')} would have been needed, "
                     "and it is preempted whole or not at all")
    return "; ".join(parts)

