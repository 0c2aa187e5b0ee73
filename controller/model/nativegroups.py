"""Kubernetes' own PodGroups (``scheduling.k8s.io``) as victim units of preemption (pure; issue 39).

Kubernetes 1.36 (``v1alpha2``, the ``GenericWorkload`` gate) and 1.37 (``v1beta1``, beta, still off by
default) serve a namespaced ``scheduling.k8s.io`` PodGroup that kube-scheduler gangs the pods naming
it in ``spec.schedulingGroup.podGroupName`` (KEP-4671). Its disruption mode (KEP-5710,
workload-aware preemption) says how its pods may be preempted:

- ``v1beta1``: ``spec.disruptionMode`` is ``{single: {}}`` or ``{all: {}}``;
- ``v1alpha2``: ``spec.disruptionMode`` is the string ``Pod`` or ``PodGroup`` (with
  ``priorityClassName``/``priority``, behind the ``WorkloadAwarePreemption`` gate; kube-scheduler
  1.36 reads the PodGroup's own fields: ``pkg/scheduler/framework/preemption/types.go``
  ``isPodGroupPreemptiblePod``);
- absent: ``single`` (k8s.io/api ``scheduling/v1beta1`` ``PodGroupSpec.DisruptionMode``: "Defaults
  to Single if unset").

A group in mode ``all`` is preempted whole or not at all, as one unit at its PodGroup's priority
(``spec.priority``, which the Priority admission plugin fills from ``spec.priorityClassName``; when
it is unset kube-scheduler's ``util.PodGroupPriority`` counts 0, cogate its pods' highest, so a unit
never looks cheaper than its pods); in
mode ``single`` each pod is an ordinary victim at its own priority. cogate discovers which version
is served (:func:`cogate.controller.preemption.feature.native_version`, never assumed) and reads the
objects with :func:`native_group`;
:mod:`cogate.controller.preemption.units` turns them into victim units.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from cogate.controller.model.readers import InvalidObject, integer, mapping, sections, text

__all__ = ["GROUP", "PLURAL", "VERSIONS", "Mode", "NativeGroup", "native_group", "pod_group_name", "native_key"]

#: The API group and resource of Kubernetes' own PodGroups.
GROUP = "scheduling.k8s.io"
PLURAL = "podgroups"
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
    highest priority) and ``min_count`` (``spec.schedulingPolicy.gang.minCount``, 0 for a basic
    policy; shown in messages)."""

    namespace: str
    name: str
    mode: Mode = Mode.SINGLE
    priority: int | None = None
    min_count: int = 0

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
    return NativeGroup(
        namespace=text(meta.get("namespace"), "metadata.namespace"),
        name=text(meta.get("name"), "metadata.name"),
        mode=_mode(spec.get("disruptionMode"), "spec.disruptionMode"),
        priority=integer(spec.get("priority"), "spec.priority", None),
        min_count=integer(gang.get("minCount"), "spec.schedulingPolicy.gang.minCount", 0, minimum=0),
    )


def pod_group_name(spec: Mapping[str, Any]) -> str:
    """``spec.schedulingGroup.podGroupName`` of a pod spec (API JSON), '' when absent; raises
    :class:`~cogate.controller.model.readers.InvalidObject` naming the field when it is not a string."""
    sg = spec.get("schedulingGroup")
    if sg is None:
        return ""
    return text(mapping(sg, "spec.schedulingGroup").get("podGroupName"), "spec.schedulingGroup.podGroupName")
