"""The preemption feature's watches (issue 28), with ``--preemption``: PodDisruptionBudgets for
victim selection and kube-scheduler's leader Lease for the nominations in flight
(:mod:`cogate.controller.kube.features`)."""

from __future__ import annotations

from cogate.controller.kube.features import Apis, Feature, InformerSpec, Watches
from cogate.controller.kube.informer import budget_source, lease_source, namespaced_key
from cogate.controller.model.config import ReconcilerConfig
from cogate.controller.preemption import budgets, inflight


def informers(apis: Apis, config: ReconcilerConfig, namespace: str | None) -> Watches:
    """PodDisruptionBudgets (in ``namespace`` if given) into the caches' ``budgets``, and the one
    Lease ``inflight.SCHEDULER_LEASE`` into ``scheduler_lease``."""
    return Watches((
        InformerSpec("budgets", "poddisruptionbudgets", budget_source(apis.policy, namespace), namespaced_key,
                     budgets.budget_info),
        InformerSpec("scheduler_lease", "kube-scheduler-lease",
                     lease_source(apis.coordination, *inflight.SCHEDULER_LEASE), namespaced_key,
                     inflight.scheduler_lease),
    ))


FEATURE = Feature("preemption", informers, enabled=lambda config: config.preemption)
