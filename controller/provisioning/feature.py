"""The provisioning feature's watches (issue 28), with ``--provisioning-class``: the
ProvisioningRequests cogate made, once the API server is known to serve them
(:mod:`cogate.controller.kube.features`)."""

from __future__ import annotations

import logging
from typing import Any

from cogate.controller.kube.features import Apis, Feature, FeatureUnavailable, InformerSpec, Watches
from cogate.controller.kube.informer import namespaced_key, podgroup_source
from cogate.controller.model.config import ReconcilerConfig
from cogate.controller.provisioning import provreq

#: The controller's start-up lines keep the controller's logger.
log = logging.getLogger("cogate.controller")


def provisioning_api_problem(custom: Any) -> str:
    """Why ``--provisioning-class`` cannot work here ('' when it can): the API server must serve
    ``autoscaling.x-k8s.io/v1`` ``provisioningrequests`` (cluster-autoscaler's CRD,
    ``apis/config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml``); a list of one object is the check."""
    try:
        custom.list_cluster_custom_object(provreq.GROUP, provreq.VERSION, provreq.PLURAL, limit=1,
                                          _request_timeout=10)
        return ""
    except Exception as exc:  # noqa: BLE001
        from cogate.kube import api_status

        if api_status(exc) == 404:
            return (f"the API server does not serve {provreq.API_VERSION} {provreq.PLURAL}: install "
                    f"cluster-autoscaler's ProvisioningRequest CRD first")
        return f"cannot list {provreq.API_VERSION} {provreq.PLURAL}: {exc}"


def informers(apis: Apis, config: ReconcilerConfig, namespace: str | None) -> Watches:
    """The ProvisioningRequests labelled ``provreq.GROUP_LABEL`` (in ``namespace`` if given) into the
    caches' ``provreqs``. Raises :class:`~cogate.controller.kube.features.FeatureUnavailable` when
    :func:`provisioning_api_problem` finds one; warns about a class cluster-autoscaler does not know."""
    problem = provisioning_api_problem(apis.custom)
    if problem:
        raise FeatureUnavailable(f"--provisioning-class {config.provisioning_class}: {problem}")
    if config.provisioning_class not in provreq.KNOWN_CLASSES:
        log.warning("--provisioning-class %s is not one cluster-autoscaler 1.36 knows (%s); cogate asks with it "
                    "anyway", config.provisioning_class, ", ".join(provreq.KNOWN_CLASSES))
    source = podgroup_source(apis.custom, provreq.GROUP, provreq.VERSION, provreq.PLURAL, namespace,
                             label_selector=provreq.GROUP_LABEL)
    return Watches((InformerSpec("provreqs", "provisioningrequests", source, namespaced_key, provreq.request_info),))


FEATURE = Feature("provisioning", informers, enabled=lambda config: bool(config.provisioning_class))
