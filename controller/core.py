"""The core's watches (issue 28): what every decision pass reads, whatever the flags: PodGroups,
their members, the bound pods and nodes, volumes, quotas and the nominated pods
(:mod:`cogate.controller.kube.features`; the reconciler's ``For(PodGroup).Owns(Pod)``)."""

from __future__ import annotations

from cogate import api
from cogate.controller.kube.features import Apis, Feature, InformerSpec, Watches
from cogate.controller.kube.informer import (
    claim_source,
    name_key,
    namespaced_key,
    node_source,
    pod_source,
    podgroup_source,
    resource_quota_source,
    uid_key,
    volume_source,
)
from cogate.controller.model import quota, records, volumes
from cogate.controller.model.config import ReconcilerConfig
from cogate.controller.status.inputs import group_object

#: Bound, non-terminal pods: what occupies node capacity (kube-scheduler's view).
BOUND_PODS_FIELD_SELECTOR = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
#: Unbound pods, for those kube-scheduler nominated a node for (room promised there).
UNBOUND_PODS_FIELD_SELECTOR = "spec.nodeName=,status.phase!=Succeeded,status.phase!=Failed"
#: ... that are not members: the members informer has those, and a released member's room is its
#: reservation. Without it every member's events came twice (issue 19's benchmark: 2.5 more watch
#: events per member, a slower API server, 1.30x -> 1.43x for a gang of 1,000 on 29 nodes).
NOMINATED_PODS_LABEL_SELECTOR = f"!{api.POD_GROUP_LABEL}"


def informers(apis: Apis, config: ReconcilerConfig, namespace: str | None) -> Watches:
    """The caches' required fields (``podgroups``, ``members``, ``bound``, ``nodes``) and ``claims``,
    ``volumes``, ``quotas``, ``nominated``; PodGroups, members, claims and quotas in ``namespace``
    if given (bound and nominated pods, nodes and volumes are cluster-wide: they take room)."""
    core, ns = apis.core, namespace
    return Watches((
        InformerSpec("podgroups", "podgroups", podgroup_source(apis.custom, api.GROUP, api.VERSION, api.PLURAL, ns),
                     namespaced_key, group_object),
        InformerSpec("members", "members", pod_source(core, label_selector=api.POD_GROUP_LABEL, namespace=ns),
                     uid_key, records.pod_info),
        InformerSpec("bound", "bound-pods", pod_source(core, field_selector=BOUND_PODS_FIELD_SELECTOR), uid_key,
                     records.pod_info),
        InformerSpec("nodes", "nodes", node_source(core), name_key, records.node_info),
        InformerSpec("claims", "persistentvolumeclaims", claim_source(core, ns), namespaced_key, volumes.claim_info),
        InformerSpec("volumes", "persistentvolumes", volume_source(core), name_key, volumes.volume_info),
        InformerSpec("quotas", "resourcequotas", resource_quota_source(core, ns), namespaced_key, quota.quota_info),
        InformerSpec("nominated", "nominated-pods",
                     pod_source(core, field_selector=UNBOUND_PODS_FIELD_SELECTOR,
                                label_selector=NOMINATED_PODS_LABEL_SELECTOR),
                     uid_key, records.nominated_pod_info),
    ))


FEATURE = Feature("core", informers)
