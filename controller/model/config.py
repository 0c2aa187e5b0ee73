"""The reconciler's knobs (pure): :class:`ReconcilerConfig`, one source for what the planner,
the release guard and the after-release duties are told (controller/main.py builds it from flags).

Times are seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

from cogate import api
from cogate.controller.model import verdicts


#: ``--workers``: gate-removal requests in flight (also a preemption's nominations, then its
#: victims: controller/preemption/room.py). A release of N members is N JSON Patches of one API round
#: trip each, sent from the pass that decides it. With 8 in flight and round trips of 140-360 ms
#: (kube-apiserver's own time 80-250 ms on a loaded 2-core machine) 1,000 gates took 17-45 s, at
#: or below kube-scheduler's binding rate (its client's 50 QPS), so the scheduler bound behind the
#: gates (issue 19). 32 in flight removed them in 9 s where the API server had room; more only
#: queues in the server and slows kube-scheduler's bindings there (64: 480-900 ms each).
DEFAULT_WORKERS = 32


@dataclass
class ReconcilerConfig:
    """The controller's knobs (flags of ``cogate controller``): durations in seconds, ``workers``
    threads, ``max_patch_attempts`` per API write; the planner's part is :attr:`planner_config`."""

    gate_name: str = api.DEFAULT_GATE_NAME
    placement: str = "pinned"
    debounce: float = 0.05
    resync: float = 30.0
    evict_on_timeout: bool = False
    #: Gate-removal requests in flight (``--workers``); verdicts are applied on half as many threads.
    workers: int = DEFAULT_WORKERS
    max_patch_attempts: int = 6
    starvation_seconds: float = 300.0
    reservation_ttl_seconds: float = 60.0
    #: ``--min-resources-hold-seconds``: how long after its release the rest of a group's
    #: ``spec.minResources`` stays held for its later members (controller/planning/minimum.py); 0: not held.
    min_resources_hold_seconds: float = 300.0
    scheduler_names: frozenset[str] = frozenset({verdicts.DEFAULT_SCHEDULER})
    unchecked: str = verdicts.DEFAULT_UNCHECKED
    #: Delete released members stuck on a pinned node that can no longer take them when they
    #: have a controller owner (it recreates them gated); bare pods are only reported.
    recreate_stuck_members: bool = True
    #: Dry-run every release patch before removing any gate of the group: ``auto`` while a
    #: webhook or admission policy intercepts pod UPDATEs (or while that is unknown), ``always``,
    #: ``never`` (:data:`cogate.controller.release.refusers.VALIDATION_MODES`).
    validate_releases: str = "auto"
    #: Opt-in: a PodDisruptionBudget (minAvailable = minMember) per running group.
    pod_disruption_budgets: bool = False
    #: Opt-in: evict the remaining owned members of a group that fell below minMember after reaching it.
    evict_below_quorum: bool = False
    #: Gang-aware preemption (``--preemption``, issue 15): a waiting group short of room deletes
    #: lower-priority pods to make it (controller/preemption/room.py). On by default, as kube-scheduler's preemption is.
    preemption: bool = True
    #: Namespaces whose pods preemption never selects as victims, whatever their priority
    #: (``--protected-namespace``; the chart: its release namespace and ``controller.protectedNamespaces``):
    #: :func:`cogate.controller.preemption.candidates.candidate_rule`.
    protected_namespaces: frozenset[str] = frozenset()
    #: ProvisioningRequest class cogate asks cluster-autoscaler for a waiting group's missing nodes
    #: with (``--provisioning-class``, issue 16: e.g. ``best-effort-atomic-scale-up.autoscaling.x-k8s.io``);
    #: '' (the default): never asks (controller/provisioning/room.py).
    provisioning_class: str = ""
    #: Topology levels, node labels coarse to fine, the hostname label implied last
    #: (``--topology-levels``, the chart's ``topology.levels``; issue 32): what a PodGroup's
    #: ``topology.cogate.dev/required`` and ``/preferred`` name (docs/topology.md). Empty: a constraint
    #: names its labels alone, or a PodGroup its own levels.
    topology_levels: tuple[str, ...] = ()

    @property
    def planner_config(self) -> verdicts.PlannerConfig:
        """The planner's knobs, derived: one source for the gate name and the TTL."""
        return verdicts.PlannerConfig(gate_name=self.gate_name, starvation_seconds=self.starvation_seconds,
                                     reservation_ttl_seconds=self.reservation_ttl_seconds,
                                     scheduler_names=self.scheduler_names, unchecked=self.unchecked,
                                     min_resources_hold_seconds=self.min_resources_hold_seconds)
