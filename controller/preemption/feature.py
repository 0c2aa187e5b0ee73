"""The preemption feature's watches (issue 28), with ``--preemption``: PodDisruptionBudgets for
victim selection, kube-scheduler's leader Lease for the nominations in flight, and Kubernetes' own
PodGroups (``scheduling.k8s.io``) where the API server serves them (issue 39: victim units)
(:mod:`cogate.controller.kube.features`)."""

from __future__ import annotations

import logging
from typing import Any

from cogate.controller.kube.features import Apis, Feature, InformerSpec, Watches
from cogate.controller.kube.informer import budget_source, lease_source, namespaced_key, podgroup_source
from cogate.controller.model import nativegroups
from cogate.controller.model.config import ReconcilerConfig
from cogate.controller.preemption import budgets, inflight

#: The controller's start-up lines keep the controller's logger.
log = logging.getLogger("cogate.controller")


def native_version(custom: Any) -> tuple[str, str]:
    """The ``scheduling.k8s.io`` version serving PodGroups, discovered (never assumed): a list of
    one PodGroup per version of :data:`nativegroups.VERSIONS`, preferred first (``v1beta1`` on 1.37,
    ``v1alpha2`` on 1.36, each with the ``GenericWorkload`` gate). Returns ``(version, problem)``:
    ``("", "")`` where no version is served (404: 1.30, or the gate off), ``("", why)`` when one
    cannot be read (RBAC refuses it: 403, or another error)."""
    from cogate.kube import api_status

    for version in nativegroups.VERSIONS:
        try:
            custom.list_cluster_custom_object(nativegroups.GROUP, version, nativegroups.PLURAL, limit=1,
                                              _request_timeout=10)
            return version, ""
        except Exception as exc:  # noqa: BLE001
            status = api_status(exc)
            if status == 404:
                continue
            if status == 403:
                return "", (f"RBAC does not let cogate list {nativegroups.GROUP}/{version} podgroups (the chart's "
                            "ClusterRole grants get/list/watch)")
            return "", f"cannot list {nativegroups.GROUP}/{version} podgroups: {' '.join(str(exc).split())[:200]}"
    return "", ""


def native_watch(apis: Apis, namespace: str | None) -> tuple[InformerSpec, ...]:
    """The informer of Kubernetes' own PodGroups (in ``namespace`` if given) where
    :func:`native_version` finds them served; none otherwise (said in the log: victim selection
    then sees their pods as ordinary pods, as before issue 39)."""
    version, problem = native_version(apis.custom)
    if problem:
        log.warning("Kubernetes' own PodGroups are not read (%s): preemption takes their pods as ordinary pods",
                    problem)
        return ()
    if not version:
        log.info("the API server serves no %s PodGroups (Kubernetes < 1.36, or GenericWorkload off)",
                 nativegroups.GROUP)
        return ()
    log.info("reading %s/%s PodGroups: a PodGroup in disruption mode all is one victim unit", nativegroups.GROUP,
             version)
    source = podgroup_source(apis.custom, nativegroups.GROUP, version, nativegroups.PLURAL, namespace)
    return (InformerSpec("native_groups", "native-podgroups", source, namespaced_key, nativegroups.native_group),)


def informers(apis: Apis, config: ReconcilerConfig, namespace: str | None) -> Watches:
    """PodDisruptionBudgets (in ``namespace`` if given) into the caches' ``budgets``, the one
    Lease ``inflight.SCHEDULER_LEASE`` into ``scheduler_lease``, and Kubernetes' own PodGroups into
    ``native_groups`` where they are served (:func:`native_watch`)."""
    return Watches((
        InformerSpec("budgets", "poddisruptionbudgets", budget_source(apis.policy, namespace), namespaced_key,
                     budgets.budget_info),
        InformerSpec("scheduler_lease", "kube-scheduler-lease",
                     lease_source(apis.coordination, *inflight.SCHEDULER_LEASE), namespaced_key,
                     inflight.scheduler_lease),
        *native_watch(apis, namespace),
    ))


FEATURE = Feature("preemption", informers, enabled=lambda config: config.preemption)
