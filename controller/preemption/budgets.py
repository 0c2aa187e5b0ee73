"""PodDisruptionBudgets as victim selection reads them (pure): :class:`Budget` and its converter
:func:`budget_info` (kube-scheduler DefaultPreemption ``filterPodsWithPDBViolation``; the rule that
counts them over the victims, most important first, is the selection's ``split_by_budget``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cogate.controller.model.readers import integer, mapping, sections
from cogate.controller.model.records import InvalidObject, LabelSelector, PodInfo, label_selector

__all__ = ["Budget", "budget_info"]


@dataclass(frozen=True)
class Budget:
    """A PodDisruptionBudget as preemption sees it: ``disruptions_allowed`` is
    ``status.disruptionsAllowed``; ``disrupted``: names in ``status.disruptedPods`` (already
    counted by the API server: taking them violates nothing)."""

    namespace: str
    name: str
    selector: LabelSelector | None
    disruptions_allowed: int
    disrupted: frozenset[str] = frozenset()

    def matches(self, pod: PodInfo) -> bool:
        """The budget covers ``pod`` (kube-scheduler ``filterPodsWithPDBViolation``: same
        namespace; a pod without labels, and a nil or empty selector, match nothing)."""
        sel = self.selector
        if pod.namespace != self.namespace or not pod.labels or sel is None:
            return False
        if not sel.match_labels and not sel.match_expressions:
            return False
        return sel.matches(pod.labels)


def budget_info(obj: Mapping[str, Any]) -> Budget:
    """A policy/v1 PodDisruptionBudget (API JSON) as a :class:`Budget`. Raises
    :class:`~cogate.controller.model.records.InvalidObject` naming the field on garbage."""
    meta, spec, status = sections(obj, "poddisruptionbudget")
    ns, name = meta.get("namespace") or "", meta.get("name") or ""
    if not isinstance(ns, str) or not isinstance(name, str):
        raise InvalidObject("metadata.namespace/name: expected strings")
    where = f"poddisruptionbudget {ns}/{name}"
    try:
        selector = label_selector(spec.get("selector"), "spec.selector")
        allowed = integer(status.get("disruptionsAllowed"), "status.disruptionsAllowed")
        disrupted = mapping(status.get("disruptedPods"), "status.disruptedPods")
    except InvalidObject as e:
        raise InvalidObject(f"{where}: {e}") from None
    return Budget(ns, name, selector, allowed, frozenset(str(k) for k in disrupted))
