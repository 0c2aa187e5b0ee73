"""Volume constraints of a member (pure): PVCs and bound PVs -> node-selector terms.

Source: kubernetes v1.36 kube-scheduler VolumeBinding plugin
(``pkg/scheduler/framework/plugins/volumebinding``: ``podHasPVCs``, ``GetPodVolumeClaims``,
``isPVCFullyBound``, ``checkBoundClaims``) and component-helpers
``storage/volume.CheckNodeAffinity``:

* a claim that does not exist, is being deleted, or is ``Lost`` makes the pod
  unschedulable ("persistentvolumeclaim "x" not found"); a generic ephemeral volume's claim
  (``<pod>-<volume>``) is created by the ephemeral volume controller shortly after the pod
  (kube-scheduler also requires the pod to own it; cogate does not check ownership);
* a claim is *fully bound* when ``spec.volumeName`` is set and it carries the annotation
  ``pv.kubernetes.io/bind-completed``. A claim naming a volume that is not bound yet
  (pre-bound) is "unbound immediate" and also keeps the pod unschedulable until the PV
  controller finishes the binding;
* a fully bound claim whose PV does not exist makes the pod unschedulable; otherwise the
  PV's ``nodeAffinity.required`` terms (ORed) must match the node. ``CheckNodeAffinity``
  builds a node with the **labels only**, so ``matchFields`` (``metadata.name``) in a PV's
  terms never match: cogate evaluates them the same way;
* a claim without a volume (``WaitForFirstConsumer``, or ``Immediate`` still waiting for the
  PV controller) is decided by kube-scheduler (it picks or provisions a volume for the chosen
  node): cogate does not check it and names it (``PodInfo.unplanned``).

VolumeZone (zone labels on PVs, the pre-nodeAffinity mechanism), CSI volume limits and
storage capacity are not modelled. Inputs are plain records built from API JSON by
:func:`claim_info` / :func:`volume_info`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cogate.controller.model.constraints import node_selector_terms
from cogate.controller.model.readers import mapping, sections, text
from cogate.controller.model.records import (
    VOLUME_CLAIMS,
    NodeInfo,
    NodeSelectorTerm,
    PodInfo,
)

__all__ = ["ClaimInfo", "VolumeInfo", "claim_info", "volume_info", "resolve", "node_reason", "BIND_COMPLETED",
           "REASON"]

#: Annotation the PV controller sets once a claim's binding is complete.
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
#: Reason the planner gives for nodes a member's bound volumes exclude.
REASON = "volume node affinity"


@dataclass(frozen=True)
class ClaimInfo:
    """A PersistentVolumeClaim as the planner needs it."""

    namespace: str
    name: str
    volume_name: str = ""
    bind_completed: bool = False
    phase: str = ""
    deleting: bool = False


@dataclass(frozen=True)
class VolumeInfo:
    """A PersistentVolume: its required node affinity (ORed terms; ``None`` = any node)."""

    name: str
    node_affinity: tuple[NodeSelectorTerm, ...] | None = None


def claim_info(obj: Mapping[str, Any]) -> ClaimInfo:
    """A v1 PersistentVolumeClaim (API JSON) -> :class:`ClaimInfo`; raises InvalidObject naming the field."""
    meta, spec, status = sections(obj, "persistentvolumeclaim")
    ann = mapping(meta.get("annotations"), "metadata.annotations")
    return ClaimInfo(
        namespace=text(meta.get("namespace"), "metadata.namespace"),
        name=text(meta.get("name"), "metadata.name"),
        volume_name=text(spec.get("volumeName"), "spec.volumeName"),
        bind_completed=BIND_COMPLETED in ann,
        phase=text(status.get("phase"), "status.phase"),
        deleting=meta.get("deletionTimestamp") is not None,
    )


def volume_info(obj: Mapping[str, Any]) -> VolumeInfo:
    """A v1 PersistentVolume (API JSON) -> :class:`VolumeInfo`; raises InvalidObject naming the field."""
    meta, spec, _ = sections(obj, "persistentvolume")
    name = text(meta.get("name"), "metadata.name")
    required = mapping(spec.get("nodeAffinity"), "spec.nodeAffinity").get("required")
    if required is None:
        return VolumeInfo(name)
    path = "spec.nodeAffinity.required.nodeSelectorTerms"
    terms = node_selector_terms(mapping(required, "spec.nodeAffinity.required").get("nodeSelectorTerms"), path)
    return VolumeInfo(name, terms or (NodeSelectorTerm(),))


def resolve(pod: PodInfo, claims: Mapping[tuple[str, str], ClaimInfo],
            volumes: Mapping[str, VolumeInfo]) -> PodInfo:
    """``pod`` with its volume constraints filled in from the claims and volumes known now.

    ``claims``: by (namespace, name); ``volumes``: by name. Sets ``volume_problems`` (why the
    pod is unschedulable now: missing, deleting, lost or not fully bound claims, missing PVs),
    ``volume_node_affinity`` (the required node affinity of each bound PV that has one) and
    replaces the ``"volume claims"`` entry of ``unplanned`` by one ``"unbound volume claim x"``
    per claim kube-scheduler binds itself. A pod without claims is returned unchanged.
    """
    if not pod.volume_claims:
        return pod
    problems: list[str] = []
    affinity: list[tuple[NodeSelectorTerm, ...]] = []
    unchecked: list[str] = []
    ephemeral_prefix = pod.name + "-"
    for name in dict.fromkeys(pod.volume_claims):
        c = claims.get((pod.namespace, name))
        if c is None:
            if name.startswith(ephemeral_prefix):
                problems.append(f"persistentvolumeclaim {name!r} not found (an ephemeral volume's claim is "
                                "created by the ephemeral volume controller)")
            else:
                problems.append(f"persistentvolumeclaim {name!r} not found")
            continue
        if c.phase == "Lost":
            problems.append(f"persistentvolumeclaim {name!r} bound to non-existent persistentvolume "
                            f"{c.volume_name!r}")
            continue
        if c.deleting:
            problems.append(f"persistentvolumeclaim {name!r} is being deleted")
            continue
        if not c.volume_name:
            unchecked.append(f"unbound volume claim {name}")
            continue
        if not c.bind_completed:
            problems.append(f"persistentvolumeclaim {name!r} is not bound yet (volume {c.volume_name!r})")
            continue
        v = volumes.get(c.volume_name)
        if v is None:
            problems.append(f"persistentvolume {c.volume_name!r} of claim {name!r} not found")
            continue
        if v.node_affinity is not None:
            affinity.append(v.node_affinity)
    unplanned = tuple(u for u in pod.unplanned if u != VOLUME_CLAIMS) + tuple(unchecked)
    return dataclasses.replace(pod, unplanned=unplanned, volume_node_affinity=tuple(dict.fromkeys(affinity)),
                               volume_problems=tuple(problems))


def node_reason(node: NodeInfo, pod: PodInfo) -> str | None:
    """:data:`REASON` when a bound PV of ``pod`` does not allow ``node`` (``CheckNodeAffinity``:
    the PV's terms against the node's labels only), else None."""
    if not pod.volume_node_affinity:
        return None
    labels_only = NodeInfo("", labels=node.labels)
    for terms in pod.volume_node_affinity:
        if not any(t.matches(labels_only) for t in terms):
            return REASON
    return None
