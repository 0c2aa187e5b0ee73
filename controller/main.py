"""``cogate controller``: informers, the reconcile loop, leader election, metrics.

Configuration: ``--kubeconfig`` if given, else the ``KUBECONFIG`` environment variable,
else the in-cluster service account. Every replica runs the informers and serves
``/metrics``, ``/healthz`` and ``/readyz`` (ready once all informers have synced,
whether or not it leads); only the leader (Lease ``cogate-controller``) reconciles.
A replica leads only while its last successful lease renewal started less than 10 s
ago (see :mod:`cogate.controller.kube.leader`). A replica that loses the lease exits at once
with status 1 (``os._exit`` after one log line and a best-effort flush): no in-flight
reconcile pass may keep patching pods while another replica leads, so nothing is joined
or cleaned up; Kubernetes restarts the pod as a follower. SIGTERM/SIGINT stop cleanly:
no gate patch is sent any more (a release is recorded before its gates go, so the next
leader finishes it), the reconcile loop ends after its current pass (up to 10 s) while the
lease is still renewed, then the lease is released and the process exits 0.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import threading
import uuid
from collections.abc import Callable
from typing import Any

from cogate import api, cliargs, kube, listen, logs
from cogate.controller import core, topologies
from cogate.controller.topology import constraints
from cogate.controller.devices import feature as devices
from cogate.controller.preemption import feature as preemption
from cogate.controller.provisioning import feature as provisioning, provreq
from cogate.controller.release import feature as release, refusers
from cogate.controller.model import verdicts
from cogate.controller.model.config import DEFAULT_WORKERS, ReconcilerConfig
from cogate.controller.kube.events import EventRecorder
from cogate.controller.kube.features import Apis, FeatureUnavailable, build_caches
from cogate.controller.kube.informer import Caches, Informer, wait_all_synced
from cogate.controller.kube.leader import LEASE_NAME, LeaderElector
from cogate.controller.kube.metrics import Metrics, serve
from cogate.controller.kube import serverversion
from cogate.controller.planning.patches import PLACEMENTS
from cogate.controller.reconciler import Reconciler

log = logging.getLogger("cogate.controller")

#: Connections besides the gate-removal and status workers: the informers' watches (up to 11,
#: each holds one for its lifetime), the event recorder, the lease; with room to spare.
OTHER_CONNECTIONS = 16


def connection_pool_size(workers: int) -> int:
    """urllib3 pool size for ``--workers``: every request that may be in flight at once (gate
    removals, the status writes of verdicts applied concurrently on ``workers // 2`` threads, the
    long watches, the rest), so that no connection is thrown away and opened again (a TLS
    handshake) under a release (issue 19: the old ``workers + 16`` was smaller than that)."""
    return workers + max(1, workers // 2) + OTHER_CONNECTIONS

#: The features the controller runs, in the order their informers are built (and the API server
#: checked for them): each declares what it watches (:mod:`cogate.controller.kube.features`).
FEATURES = (core.FEATURE, preemption.FEATURE, provisioning.FEATURE, devices.FEATURE, release.FEATURE,
            topologies.FEATURE)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="cogate controller",
        description="Run the gang controller: it watches PodGroups, their pods and the nodes, and removes the "
                    "scheduling gate from a group's pods only once at least minMember of them fit together.",
    )
    p.add_argument("--kubeconfig", metavar="PATH",
                   help="kubeconfig file (default: $KUBECONFIG, then the in-cluster service account)")
    p.add_argument("--gate-name", metavar="NAME", type=cliargs.gate_name, default=api.DEFAULT_GATE_NAME,
                   help="scheduling gate to remove; must match the webhook's --gate-name (default: %(default)s)")
    p.add_argument("--metrics-port", metavar="PORT", type=cliargs.port, default=8080,
                   help="port of /metrics, /healthz, /readyz; 0 picks a free port (default: %(default)s)")
    p.add_argument("--metrics-host", metavar="ADDRESS", default=listen.ANY,
                   help=listen.host_help("the metrics and health server"))
    p.add_argument("--leader-elect", action=argparse.BooleanOptionalAction, default=True,
                   help=f"elect a leader through the Lease {LEASE_NAME!r}; only the leader acts (default: on)")
    p.add_argument("--leader-election-namespace", metavar="NAMESPACE", default=None,
                   help="namespace of the Lease (default: $POD_NAMESPACE, else the service account's, "
                        "else 'default')")
    p.add_argument("--placement", choices=PLACEMENTS, default="pinned",
                   help="pinned: narrow each member's required node affinity to its planned node before "
                        "removing the gate; free: only remove the gate (default: %(default)s)")
    _add_timing_flags(p)
    p.add_argument("--evict-on-timeout", action="store_true",
                   help="when a release times out (scheduleTimeoutSeconds pass with no member binding while fewer "
                        "than minMember are bound), evict members that have a controller owner and are bound or held "
                        "on their pinned node, so they come back gated; once per release (default: off)")
    p.add_argument("--recreate-stuck-members", action=argparse.BooleanOptionalAction, default=True,
                   help="delete released, unbound members pinned to a node that can no longer take them (tainted, "
                        "cordoned, NotReady, deleted, room taken) when they have a controller owner, so they come "
                        "back gated and are planned again; bare pods are only reported. A node that is only not "
                        "Ready keeps them as long as Kubernetes keeps bound pods on it (their tolerationSeconds, "
                        "300 s by default) (default: on)")
    p.add_argument("--validate-releases", choices=refusers.VALIDATION_MODES, nargs="?", const="always",
                   default="auto",
                   help="send every member's release patch as a server-side dry run before removing any gate of "
                        "the group, so a patch the API server refuses releases none: 'auto' while an admission "
                        "webhook or policy intercepts pod updates (or while that is unknown), 'always' (also the "
                        "flag without a value), 'never' (default: %(default)s)")
    p.add_argument("--no-validate-releases", dest="validate_releases", action="store_const", const="never",
                   help="the same as --validate-releases=never (default: off)")
    p.add_argument("--pod-disruption-budgets", action="store_true",
                   help="keep a PodDisruptionBudget (minAvailable = minMember, owned by the PodGroup) for each "
                        "group that reached minMember, until it finishes (default: off)")
    p.add_argument("--evict-below-quorum", action="store_true",
                   help="when a group that reached minMember falls below it, evict its remaining members that have "
                        "a controller owner so the gang frees its room and re-forms whole (default: off)")
    p.add_argument("--preemption", action=argparse.BooleanOptionalAction, default=True,
                   help="gang-aware preemption: a waiting group short of room deletes lower-priority pods (after "
                        "marking them DisruptionTarget) when that lets minMember fit, groups side by side when their "
                        "victims and room do not overlap, and "
                        "holds the freed room until its members are released (default: on, as kube-scheduler's preemption; "
                        "--no-preemption turns it off)")
    p.add_argument("--protected-namespace", metavar="NAMESPACE", action="append", default=[],
                   dest="protected_namespaces", type=cliargs.namespace_name,
                   help="preemption never selects a pod in this namespace as a victim, whatever its priority "
                        "(repeatable; the chart passes its release namespace and controller.protectedNamespaces); "
                        "a group that could only make room by taking such pods says so (Preempting False, reason "
                        "OnlyProtectedPods) (default: none)")
    p.add_argument("--topology-levels", metavar="LABEL,...", default=(), type=_topology_levels,
                   help="topology levels: node labels, coarse to fine (e.g. topology.kubernetes.io/zone,"
                        "example.com/block,example.com/rack; kubernetes.io/hostname implied last), that PodGroups "
                        "annotated topology.cogate.dev/required or /preferred name (docs/topology.md) (default: none: "
                        "a constraint's own labels, a PodGroup's topology.cogate.dev/levels, or a Kueue Topology's)")
    p.add_argument("--provisioning-class", metavar="CLASS", default="",
                   help="ask cluster-autoscaler for the nodes a waiting group lacks with ProvisioningRequests of this "
                        "class (autoscaling.x-k8s.io/v1; e.g. " + provreq.ATOMIC_CLASS + ": all of the group's "
                        "missing nodes or none); needs cluster-autoscaler with --enable-provisioning-requests and its "
                        "CRD; a PodGroup annotated " + provreq.OPT_OUT_ANNOTATION + "=\"false\" never asks "
                        "(default: empty, off)")
    p.add_argument("--workers", metavar="N", type=cliargs.positive_int, default=DEFAULT_WORKERS,
                   help="concurrent gate-removal requests, and a preemption's nominations and victims "
                        "(PodGroups' verdicts are applied on half as many); a release of N members takes about "
                        "N / this many API round trips; >= 1 "
                        "(default: %(default)s)")
    p.add_argument("--scheduler-name", metavar="NAME", action="append", default=[], dest="scheduler_names",
                   help=f"also plan for members with this spec.schedulerName (repeatable); they are released "
                        f"unpinned and unreserved, as their scheduler decides. {verdicts.DEFAULT_SCHEDULER!r} is "
                        "always planned (pinned, reserved); a group with a member naming any other scheduler stays "
                        "gated (default: none)")
    p.add_argument("--unchecked-constraints", choices=verdicts.UNCHECKED_POLICIES, default=verdicts.DEFAULT_UNCHECKED,
                   help="groups whose members have constraints cogate cannot check (unbound volume claims, DRA "
                        "resource claims the device model does not cover): release them unpinned, naming those "
                        "members in the Released condition (risk: kube-scheduler may place part of the group), "
                        "hold them gated when the constraint is a resource claim and release the others "
                        "(hold-devices), or hold them all (default: %(default)s)")
    p.add_argument("--namespace", default=None,
                   help="only PodGroups and members in this namespace, for testing (default: all namespaces)")
    cliargs.add_log_flags(p)
    return p


def _add_timing_flags(p: argparse.ArgumentParser) -> None:
    """The planner's and the loop's durations (seconds)."""
    p.add_argument("--reservation-ttl", metavar="SECONDS", type=cliargs.positive_seconds, default=60.0,
                   help="how long a released, unbound member's planned room stays reserved when the member "
                        "is not pinned to that node (release patch not applied yet, --placement free); a "
                        "pinned member keeps it until it binds, is deleted or ends; > 0 (default: %(default)s)")
    p.add_argument("--starvation-seconds", metavar="SECONDS", type=cliargs.non_negative_seconds, default=300.0,
                   help="how long a complete group may be passed over by smaller groups; 0 never lets a later "
                        "group pass (default: %(default)s)")
    p.add_argument("--min-resources-hold-seconds", metavar="SECONDS", type=cliargs.non_negative_seconds,
                   default=300.0,
                   help="how long after its release the rest of a group's spec.minResources stays held for its "
                        "later members (a Spark application's executors), unless they are placed sooner; 0 holds "
                        "nothing (default: %(default)s)")
    p.add_argument("--debounce", metavar="SECONDS", type=cliargs.non_negative_seconds, default=0.05,
                   help="how long to coalesce events before a decision pass; 0 does not wait, nor does the member "
                        "event that completes a group (default: %(default)s)")
    p.add_argument("--resync", metavar="SECONDS", type=cliargs.positive_seconds, default=30.0,
                   help="time between periodic passes; > 0 (default: %(default)s)")


def _lease_namespace(flag: str | None) -> str:
    return flag or kube.own_namespace("default")


def main(argv: list[str] | None = None) -> int:
    """``cogate controller``: parse, configure, build the enabled features' informers, connect them to
    the reconciler, serve metrics, start the informers, elect a leader, run until a signal (module doc).
    Returns the exit status: 0 after a clean stop, 2 when the controller cannot start."""
    args = build_parser().parse_args(argv)
    logs.configure(args.log_level, args.log_format)
    try:
        api_client = kube.api_client(args.kubeconfig, pool_size=connection_pool_size(args.workers))
    except Exception as exc:  # noqa: BLE001
        log.error("cannot load Kubernetes client configuration: %s", exc)
        return 2
    apis, metrics, config, stop = typed_apis(api_client), Metrics(), configure(args), threading.Event()
    try:
        serverversion.check(api_client, metrics.cluster_features)
    except serverversion.TooOld as exc:
        log.error("%s", exc)
        return 2
    try:
        caches = build_caches(FEATURES, apis, config, args.namespace, informer_factory(metrics))
    except FeatureUnavailable as exc:
        log.error("%s", exc)
        return 2
    identity = f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
    recorder = EventRecorder.for_core_api(apis.core, host=identity,
                                          on_emit=lambda t, r: metrics.events.labels(t, r).inc())
    reconciler = Reconciler(apis.core, apis.custom, caches, config, recorder=recorder, metrics=metrics,
                            policy=apis.policy if config.pod_disruption_budgets else None)
    connect(caches, reconciler, metrics)
    try:
        server = serve(args.metrics_port, metrics, host=args.metrics_host,
                       ready=lambda: all(i.has_synced for i in caches.all()) and not stop.is_set())
    except OSError as exc:
        log.error("cannot listen on port %s: %s", args.metrics_port, exc)
        return 2
    log.info("metrics on port %d; gate %r; placement %s", server.server_port, args.gate_name, args.placement)
    _stop_on_signals(stop)
    for inf in (*caches.all(), *caches.admission, *([caches.scheduler_lease] if caches.scheduler_lease else [])):
        inf.start(stop)
    recorder.start(stop)
    # The elector has its own stop event: on SIGTERM it keeps renewing until the
    # reconcile loop has finished its pass, and only then gives the lease up.
    stop_elector = threading.Event()
    elector = elect(args, apis, identity, metrics, reconciler, stop_elector)
    run(reconciler, caches, stop, elector, stop_elector, metrics)
    server.shutdown()
    log.info("stopped")
    return 0


def typed_apis(api_client: Any) -> Apis:
    """The typed APIs of the official client on ``api_client`` (no request is made)."""
    from kubernetes import client

    return Apis(core=client.CoreV1Api(api_client), custom=client.CustomObjectsApi(api_client),
                policy=client.PolicyV1Api(api_client), coordination=client.CoordinationV1Api(api_client),
                api_client=api_client)


def _topology_levels(text: str) -> tuple[str, ...]:
    """``--topology-levels``: :func:`cogate.controller.topology.constraints.parse_levels`."""
    try:
        return constraints.parse_levels(text, "--topology-levels")
    except constraints.TopologyError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def configure(args: argparse.Namespace) -> ReconcilerConfig:
    """The reconciler's configuration from the parsed flags."""
    return ReconcilerConfig(
        gate_name=args.gate_name, placement=args.placement, debounce=args.debounce, resync=args.resync,
        evict_on_timeout=args.evict_on_timeout, workers=args.workers,
        recreate_stuck_members=args.recreate_stuck_members, validate_releases=args.validate_releases,
        pod_disruption_budgets=args.pod_disruption_budgets, evict_below_quorum=args.evict_below_quorum,
        preemption=args.preemption, protected_namespaces=frozenset(args.protected_namespaces),
        provisioning_class=args.provisioning_class, topology_levels=args.topology_levels,
        starvation_seconds=args.starvation_seconds, reservation_ttl_seconds=args.reservation_ttl,
        min_resources_hold_seconds=args.min_resources_hold_seconds,
        scheduler_names=frozenset({verdicts.DEFAULT_SCHEDULER, *args.scheduler_names}),
        unchecked=args.unchecked_constraints)


def informer_factory(metrics: Metrics) -> Callable[..., Informer]:
    """``make(name, (list_fn, watch_fn), key, convert) -> Informer`` counting its watch restarts and
    events in ``metrics`` under its name."""
    def make(name, source, key, convert) -> Informer:
        list_fn, watch_fn = source
        return Informer(name, list_fn, watch_fn, key, convert,
                        on_watch_restart=lambda reason: metrics.watch_restarts.labels(name, reason).inc(),
                        on_event=lambda type_: metrics.informer_events.labels(name, type_).inc())
    return make


def connect(caches: Caches, reconciler: Reconciler, metrics: Metrics) -> None:
    """The informers' callbacks (after the reconciler's own, registered when it was built): an invalid
    object is counted, and reported on its group for PodGroups and members (``Strays``); every change
    requests a pass (a member's through ``on_member_event``), an admission object's too (a pass logs
    what could refuse a release now); a new kube-scheduler leader refreshes the nominations in flight."""
    reports = {"podgroups": reconciler.strays.invalid_podgroup, "members": reconciler.strays.invalid_member}
    for inf in caches.all():
        inf.on_invalid = _invalid(metrics, inf.name, reports.get(inf.name))
    for inf in caches.all():
        inf.add_handler(reconciler.on_member_event if inf is caches.members else reconciler.enqueue)
    for inf in caches.admission:
        inf.add_handler(reconciler.enqueue)
    if caches.scheduler_lease is not None:
        caches.scheduler_lease.add_handler(
            lambda kind, old, new: reconciler.preempting.on_scheduler_lease(kind, old, new) and reconciler.enqueue())


def _invalid(metrics: Metrics, name: str, then: Callable[[dict[str, Any], Exception], None] | None = None):
    def on_invalid(raw, exc):
        metrics.invalid_objects.labels(name).inc()
        if then is not None:
            then(raw, exc)
    return on_invalid


def _stop_on_signals(stop: threading.Event) -> None:
    def on_signal(signum, _frame):
        log.info("signal %d: shutting down", signum)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)


def elect(args: argparse.Namespace, apis: Apis, identity: str, metrics: Metrics, reconciler: Reconciler,
          stop: threading.Event) -> LeaderElector | None:
    """With ``--leader-elect``, a started elector of the Lease (a pass as soon as this process leads;
    the process exits when it loses the lease); else None, and this process leads."""
    if not args.leader_elect:
        metrics.is_leader.set(1)
        return None

    def on_started() -> None:
        metrics.is_leader.set(1)
        reconciler.enqueue()

    elector = LeaderElector(apis.coordination, _lease_namespace(args.leader_election_namespace),
                            identity, on_started=on_started, on_lost=exit_on_lost)
    elector.start(stop)
    return elector


def run(reconciler: Reconciler, caches: Caches, stop: threading.Event, elector: LeaderElector | None,
        stop_elector: threading.Event, metrics: Metrics) -> None:
    """Reconcile (once every informer synced, while leading) until ``stop``; then stop sending gate
    patches (a release is recorded before its gates go: the next leader finishes it), wait up to 10 s
    for the pass in flight, stop the elector and give the lease up if that pass ended (else let it expire)."""
    loop = threading.Thread(target=_reconcile_when_synced, name="reconciler", daemon=True,
                            args=(reconciler, caches, stop, elector.is_leader if elector else lambda: True))
    loop.start()
    while not stop.is_set():
        stop.wait(1.0)
    reconciler.stop_releasing()
    loop.join(10.0)
    pass_done = not loop.is_alive()
    reconciler.close()
    stop_elector.set()
    if elector is not None:
        elector.join(elector.renew_deadline + 1.0)
        if pass_done and not elector.alive():
            elector.release()
            metrics.is_leader.set(0)
        else:  # a write may still be in flight: let the lease expire instead
            log.warning("reconcile pass still running at shutdown; not releasing the lease (it expires in %.0fs)",
                        elector.lease_duration)


def exit_on_lost(_exit: Callable[[int], Any] = os._exit) -> None:
    """``on_lost`` of the controller's elector: log, flush, and end the process with status 1 at once.

    ``os._exit`` rather than ``sys.exit``: it ends every thread immediately, so no
    in-flight reconcile write (status or gate removal) reaches the API server while
    another replica may already lead. Nothing is cleaned up: the Lease is not released
    (it is no longer ours), Kubernetes restarts the pod as a follower.
    """
    log.critical("leadership lost; exiting now so no write continues (the pod restarts as a follower)")
    for handler in logging.getLogger().handlers + log.handlers:
        try:
            handler.flush()
        except Exception:  # noqa: BLE001 - best effort
            pass
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - best effort
            pass
    _exit(1)


def _reconcile_when_synced(reconciler: Reconciler, caches: Caches, stop: threading.Event, leading) -> None:
    if not wait_all_synced(caches.all(), stop):
        return
    log.info("informers synced")
    reconciler.enqueue()
    reconciler.run(stop, leading)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
