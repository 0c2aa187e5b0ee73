"""Labelled pods in Kubernetes' own gang scheduling: ignored, and said so (pure; issue 18 item 3).

kube-scheduler gangs a pod that sets ``spec.schedulingGroup`` (1.36+; GenericWorkload, beta and off
by default in 1.37) or ``spec.workloadRef`` (the 1.35 alpha) with its ``scheduling.k8s.io``
PodGroup's ``gang.minCount``. The same pod counted as a cogate member too would be ganged twice,
with two sizes. The webhook cannot tell whether the field survives admission (GenericWorkload off
drops it, and the pod is an ordinary member), so it gates such a pod like any other
(:mod:`cogate.webhook.admission`); the stored pod tells. One that still sets the field is left out
by the membership rule (:func:`cogate.controller.model.records.member_key`), its cogate gate is removed
by the leader (:meth:`cogate.controller.release.strays.Strays.native`), and this module says so in the
PodGroup's status: the planner's message gets ``N labelled pods ignored ...`` appended
(:func:`explain`), in the ``Released`` condition while the group waits.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from cogate.controller.model.records import PodInfo
from cogate.controller.model.verdicts import with_note

__all__ = ["ignored_by_group", "ignored_text", "explain"]

#: Pods named in the message; the rest are counted ("and N more").
NAMED = 3


def ignored_by_group(pods: Iterable[PodInfo]) -> dict[tuple[str, str], tuple[PodInfo, ...]]:
    """``(namespace, label value) -> pods`` for the labelled pods the membership rule leaves out
    only because they are native's (a non-empty pod-group label, not being deleted, ``native`` set),
    each tuple sorted by name."""
    out: dict[tuple[str, str], list[PodInfo]] = {}
    for p in pods:
        if p.native and p.group and not p.deleting:
            out.setdefault((p.namespace, p.group), []).append(p)
    return {k: tuple(sorted(v, key=lambda p: p.name)) for k, v in out.items()}


def ignored_text(pods: Sequence[PodInfo]) -> str:
    """The sentence for ``pods`` (ignored native pods of one group), '' for none, e.g. ``2 labelled
    pods ignored, Kubernetes gang scheduling places them (spec.schedulingGroup set): w-0, w-1``
    (the first :data:`NAMED` names, then "and N more"; the fields as the pods set them)."""
    if not pods:
        return ""
    fields = ", ".join(sorted({p.native for p in pods}))
    names = ", ".join(p.name for p in pods[:NAMED]) + (f" and {len(pods) - NAMED} more" if len(pods) > NAMED else "")
    one = len(pods) == 1
    return (f"{len(pods)} labelled pod{'' if one else 's'} ignored, Kubernetes gang scheduling places "
            f"{'it' if one else 'them'} ({fields} set): {names}")


def explain(verdict: Any, pods: Sequence[PodInfo]) -> Any:
    """``verdict`` (a frozen ``verdicts.GroupVerdict``) with :func:`ignored_text` of ``pods``
    appended to its message (``"; "`` between); ``verdict`` itself when ``pods`` is empty."""
    return with_note(verdict, ignored_text(pods))
