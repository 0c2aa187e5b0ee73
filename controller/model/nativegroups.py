"""Kubernetes' own PodGroups (``scheduling.k8s.io``) as victim units of preemption (pure; issue 39).

Kubernetes 1.36 (``v1alpha2``, the ``GenericWorkload`` gate) and 1.37 (``v1beta1``, beta, still off by
default) serve a namespaced ``scheduling.k8s.io`` PodGroup that kube-scheduler gangs the pods naming
it in ``spec.schedulingGroup.podGroupName`` (KEP-4671). Its disruption mode (KEP-5710,
workload-aware preemption) says how its pods may be preempted:

- ``v1beta1``: the PodGroup's ``spec.disruptionMode`` is ``{single: {}}`` or ``{all: {}}``, its
  ``spec.priority`` the priority;
- ``v1alpha2``: the PodGroup has neither; they sit on the PodGroupTemplate of a Workload it names
  (``spec.podGroupTemplateRef.workload``: ``workloadName``, ``podGroupTemplateName``), whose
  ``disruptionMode`` is the string ``Pod`` or ``PodGroup`` and ``priority`` the priority (both
  behind the ``WorkloadAwarePreemption`` gate): :func:`workload_templates` reads the Workloads and
  :func:`resolve` gives each PodGroup its template's;
- absent: ``single`` (k8s.io/api ``scheduling/v1beta1`` ``PodGroupSpec.DisruptionMode``: "Defaults
  to Single if unset").

A group in mode ``all`` is preempted whole or not at all, as one unit at its PodGroup's priority
(``spec.priority``, which the Priority admission plugin fills from ``spec.priorityClassName``); in
mode ``single`` each pod is an ordinary victim at its own priority. cogate discovers which version
is served (:func:`cogate.controller.preemption.feature.native_version`, never assumed) and reads the
objects with :func:`native_group`;
:mod:`cogate.controller.preemption.units` turns them into victim units.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from cogate.controller.model.readers import InvalidObject, integer, mapping, mappings, sections, text

__all__ = ["GROUP", "PLURAL", "WORKLOADS", "VERSIONS", "Mode", "NativeGroup", "native_group", "Templates",
           "workload_templates", "resolve", "pod_group_name", "native_key"]

#: The API group and resource of Kubernetes' own PodGroups.
GROUP = "scheduling.k8s.io"
PLURAL = "podgroups"
#: The Workloads holding ``v1alpha2`` PodGroups' templates.
WORKLOADS = "workloads"
#: The versions cogate reads, preferred first (1.37 beta, 1.36 alpha).
VERSIONS = ("v1beta1", "v1alpha2")


class Mode(StrEnum):
    """A native PodGroup's disruption mode (KEP-5710)."""

    #: Each pod may be preempted on its own (``{single: {}}``; ``v1alpha2``: ``Pod``; the default).
    SINGLE = "single"
    #: The pods are preempted together or not at all (``{all: {}}``; ``v1alpha2``: ``PodGroup``).
    ALL = "all"


@dataclass(frozen=True)
class NativeGroup:
    """A ``scheduling.k8s.io`` PodGroup as victim selection reads it: ``namespace``, ``name``,
    ``mode``, ``priority`` (``spec.priority``; None when not set: the unit then counts at its pods'
    highest priority), ``min_count`` (``spec.schedulingPolicy.gang.minCount``, 0 for a basic
    policy; shown in messages) and ``template`` (``v1alpha2``: ``(workloadName,
    podGroupTemplateName)`` whose mode and priority :func:`resolve` gives it; ``()`` else)."""

    namespace: str
    name: str
    mode: Mode = Mode.SINGLE
    priority: int | None = None
    min_count: int = 0
    template: tuple[str, ...] = ()

    @property
    def key(self) -> tuple[str, str]:
        """Its victim-unit key (:func:`native_key`)."""
        return native_key(self.namespace, self.name)


def native_key(namespace: str, name: str) -> tuple[str, str]:
    """The key of native PodGroup ``namespace/name`` among victim units: ``(namespace,
    "scheduling.k8s.io/" + name)``, so it never equals a cogate PodGroup's ``(namespace, name)``
    (an object name has no ``/``)."""
    return (namespace, f"{GROUP}/{name}")


def _mode(v: Any, path: str) -> Mode:
    if v is None:
        return Mode.SINGLE
    if isinstance(v, str):  # v1alpha2
        if v == "Pod":
            return Mode.SINGLE
        if v == "PodGroup":
            return Mode.ALL
        raise InvalidObject(f"{path}: expected Pod or PodGroup, got {v!r}")
    m = mapping(v, path)  # v1beta1: a union of single and all
    if m.get("all") is not None:
        if m.get("single") is not None:
            raise InvalidObject(f"{path}: both single and all set")
        return Mode.ALL
    return Mode.SINGLE


def native_group(raw: Mapping[str, Any]) -> NativeGroup:
    """A :class:`NativeGroup` from a ``scheduling.k8s.io`` PodGroup (API JSON, ``v1beta1`` or
    ``v1alpha2``). Raises :class:`~cogate.controller.model.readers.InvalidObject` naming the field
    when one has the wrong type or an unknown disruption mode."""
    meta, spec, _ = sections(raw, "PodGroup")
    gang = mapping(mapping(spec.get("schedulingPolicy"), "spec.schedulingPolicy").get("gang"),
                   "spec.schedulingPolicy.gang")
    ref = mapping(mapping(spec.get("podGroupTemplateRef"), "spec.podGroupTemplateRef").get("workload"),
                  "spec.podGroupTemplateRef.workload")
    path = "spec.podGroupTemplateRef.workload"
    template = ((text(ref.get("workloadName"), f"{path}.workloadName"),
                 text(ref.get("podGroupTemplateName"), f"{path}.podGroupTemplateName")) if ref else ())
    return NativeGroup(
        namespace=text(meta.get("namespace"), "metadata.namespace"),
        name=text(meta.get("name"), "metadata.name"),
        mode=_mode(spec.get("disruptionMode"), "spec.disruptionMode"),
        priority=integer(spec.get("priority"), "spec.priority", None),
        min_count=integer(gang.get("minCount"), "spec.schedulingPolicy.gang.minCount", 0, minimum=0),
        template=template,
    )


@dataclass(frozen=True)
class Templates:
    """A ``v1alpha2`` Workload's PodGroupTemplates: ``namespace``, ``name``, ``templates``
    (template name -> (mode, priority or None))."""

    namespace: str
    name: str
    templates: Mapping[str, tuple[Mode, int | None]]


def workload_templates(raw: Mapping[str, Any]) -> Templates:
    """:class:`Templates` of a ``scheduling.k8s.io/v1alpha2`` Workload (API JSON). Raises
    :class:`~cogate.controller.model.readers.InvalidObject` naming the field."""
    meta, spec, _ = sections(raw, "Workload")
    out: dict[str, tuple[Mode, int | None]] = {}
    for path, t in mappings(spec.get("podGroupTemplates"), "spec.podGroupTemplates"):
        out[text(t.get("name"), f"{path}.name")] = (_mode(t.get("disruptionMode"), f"{path}.disruptionMode"),
                                                    integer(t.get("priority"), f"{path}.priority", None))
    return Templates(text(meta.get("namespace"), "metadata.namespace"), text(meta.get("name"), "metadata.name"), out)


def resolve(groups: Iterable[NativeGroup], workloads: Iterable[Templates]) -> list[NativeGroup]:
    """``groups`` with each ``v1alpha2`` one (a ``template``) given its Workload template's mode and
    priority; one whose Workload or template is not known stays ``single`` (kube-scheduler cannot
    read it either)."""
    known = {(w.namespace, w.name): w.templates for w in workloads}
    out = []
    for g in groups:
        if g.template:
            mode, priority = known.get((g.namespace, g.template[0]), {}).get(g.template[1], (Mode.SINGLE, None))
            g = replace(g, mode=mode, priority=g.priority if g.priority is not None else priority)
        out.append(g)
    return out


def pod_group_name(spec: Mapping[str, Any]) -> str:
    """``spec.schedulingGroup.podGroupName`` of a pod spec (API JSON), '' when absent; raises
    :class:`~cogate.controller.model.readers.InvalidObject` naming the field when it is not a string."""
    sg = spec.get("schedulingGroup")
    if sg is None:
        return ""
    return text(mapping(sg, "spec.schedulingGroup").get("podGroupName"), "spec.schedulingGroup.podGroupName")
