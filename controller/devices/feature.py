"""The devices feature's watches (issue 28): the four DRA kinds (``resource.k8s.io/v1``) the devices
room reads, when the API server serves them (:mod:`cogate.controller.kube.features`)."""

from __future__ import annotations

import logging
from typing import Any

from cogate.controller.devices import records as devices
from cogate.controller.devices.room import API_GROUP, API_VERSION, RESOURCES
from cogate.controller.kube.features import Apis, Feature, InformerSpec, Watches
from cogate.controller.kube.informer import name_key, namespaced_key, podgroup_source
from cogate.controller.model.config import ReconcilerConfig

#: The controller's start-up lines keep the controller's logger.
log = logging.getLogger("cogate.controller")


def devices_api_problem(custom: Any) -> str:
    """Why DRA devices cannot be read ('' when they can): the API server must serve
    ``resource.k8s.io/v1`` (Kubernetes 1.34+) and RBAC must let cogate list its objects (the
    chart's ClusterRole does); a list of one ResourceSlice is the check."""
    try:
        custom.list_cluster_custom_object(API_GROUP, API_VERSION, "resourceslices", limit=1, _request_timeout=10)
        return ""
    except Exception as exc:  # noqa: BLE001
        from cogate.kube import api_status

        if api_status(exc) == 404:
            return f"the API server does not serve {API_GROUP}/{API_VERSION} (Kubernetes < 1.34)"
        if api_status(exc) == 403:
            return (f"RBAC does not let cogate list {API_GROUP} resourceslices (the chart's ClusterRole "
                    f"grants get/list/watch on {', '.join(RESOURCES)})")
        return f"cannot list {API_GROUP}/{API_VERSION} resourceslices: {exc}"


def informers(apis: Apis, config: ReconcilerConfig, namespace: str | None) -> Watches:
    """ResourceSlices, DeviceClasses (cluster-scoped), ResourceClaims and ResourceClaimTemplates (in
    ``namespace`` if given) into the caches' ``resource_slices``, ``device_classes``,
    ``resource_claims``, ``claim_templates``; none, with a warning, when :func:`devices_api_problem`
    finds one (members' resource claims are then unchecked)."""
    problem = devices_api_problem(apis.custom)
    if problem:
        log.warning("DRA devices are not modelled (%s): members with resource claims are unchecked "
                    "(--unchecked-constraints %s)", problem, config.unchecked)
        return Watches()

    def dra(cache, plural, key, convert):
        scoped = namespace if RESOURCES[plural] == "Namespaced" else None
        return InformerSpec(cache, plural, podgroup_source(apis.custom, API_GROUP, API_VERSION, plural, scoped),
                            key, convert)

    return Watches((dra("resource_slices", "resourceslices", name_key, devices.slice_info),
                    dra("device_classes", "deviceclasses", name_key, devices.device_class_info),
                    dra("resource_claims", "resourceclaims", namespaced_key, devices.device_claim_info),
                    dra("claim_templates", "resourceclaimtemplates", namespaced_key, devices.claim_template_info)))


FEATURE = Feature("devices", informers)
