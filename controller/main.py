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
the reconcile loop ends after its current pass (up to 10 s) while the lease is still
renewed, then the lease is released and the process exits 0.
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

from cogate import api, cliargs, kube, logs
from cogate.controller.devices import records as devices, room as devicesroom
from cogate.controller.preemption import inflight, victims as preemption
from cogate.controller.provisioning import provreq
from cogate.controller.model import quota, records, verdicts, volumes
from cogate.controller.release import refusers
from cogate.controller.model.config import DEFAULT_WORKERS, ReconcilerConfig
from cogate.controller.kube.events import EventRecorder
from cogate.controller.kube.informer import (
    Caches,
    Informer,
    admission_source,
    budget_source,
    claim_source,
    lease_source,
    name_key,
    namespaced_key,
    node_source,
    pod_source,
    podgroup_source,
    resource_quota_source,
    uid_key,
    volume_source,
    wait_all_synced,
)
from cogate.controller.status.inputs import group_object
from cogate.controller.kube.leader import LEASE_NAME, LeaderElector
from cogate.controller.kube.metrics import Metrics, serve
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

#: Bound, non-terminal pods: what occupies node capacity (kube-scheduler's view).
BOUND_PODS_FIELD_SELECTOR = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
#: Unbound pods, for those kube-scheduler nominated a node for (room promised there).
UNBOUND_PODS_FIELD_SELECTOR = "spec.nodeName=,status.phase!=Succeeded,status.phase!=Failed"
#: ... that are not members: the members informer has those, and a released member's room is its
#: reservation. Without it every member's events came twice (issue 19's benchmark: 2.5 more watch
#: events per member, a slower API server, 1.30x -> 1.43x for a gang of 1,000 on 29 nodes).
NOMINATED_PODS_LABEL_SELECTOR = f"!{api.POD_GROUP_LABEL}"


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
    p.add_argument("--metrics-host", metavar="ADDRESS", default="0.0.0.0",
                   help="address of the metrics server (default: %(default)s)")
    p.add_argument("--leader-elect", action=argparse.BooleanOptionalAction, default=True,
                   help=f"elect a leader through the Lease {LEASE_NAME!r}; only the leader acts (default: on)")
    p.add_argument("--leader-election-namespace", metavar="NAMESPACE", default=None,
                   help="namespace of the Lease (default: $POD_NAMESPACE, else the service account's, "
                        "else 'default')")
    p.add_argument("--placement", choices=PLACEMENTS, default="pinned",
                   help="pinned: narrow each member's required node affinity to its planned node before "
                        "removing the gate; free: only remove the gate (default: %(default)s)")
    p.add_argument("--reservation-ttl", metavar="SECONDS", type=cliargs.positive_seconds, default=60.0,
                   help="how long a released, unbound member's planned room stays reserved when the member "
                        "is not pinned to that node (release patch not applied yet, --placement free); a "
                        "pinned member keeps it until it binds, is deleted or ends; > 0 (default: %(default)s)")
    p.add_argument("--starvation-seconds", metavar="SECONDS", type=cliargs.non_negative_seconds, default=300.0,
                   help="how long a complete group may be passed over by smaller groups; 0 never lets a later "
                        "group pass (default: %(default)s)")
    p.add_argument("--debounce", metavar="SECONDS", type=cliargs.non_negative_seconds, default=0.05,
                   help="how long to coalesce events before a decision pass; 0 does not wait (default: %(default)s)")
    p.add_argument("--resync", metavar="SECONDS", type=cliargs.positive_seconds, default=30.0,
                   help="time between periodic passes; > 0 (default: %(default)s)")
    p.add_argument("--evict-on-timeout", action="store_true",
                   help="after scheduleTimeoutSeconds, evict members that have a controller owner and are bound "
                        "or held on their pinned node, so they come back gated (default: off)")
    p.add_argument("--recreate-stuck-members", action=argparse.BooleanOptionalAction, default=True,
                   help="delete released, unbound members pinned to a node that can no longer take them (tainted, "
                        "cordoned, NotReady, deleted, room taken) when they have a controller owner, so they come "
                        "back gated and are planned again; bare pods are only reported (default: on)")
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
                        "marking them DisruptionTarget) when that lets minMember fit, one preemption at a time, and "
                        "holds the freed room until its members are released (default: on, as kube-scheduler's preemption; "
                        "--no-preemption turns it off)")
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


def admission_informers(api_client: Any, make: Callable[..., Informer]) -> tuple[tuple[Informer, ...], bool]:
    """Informers (records: names of pod UPDATE interceptors, :mod:`cogate.controller.release.refusers`) for
    each of ``refusers.ADMISSION_RESOURCES`` the API server serves in ``admissionregistration.k8s.io/v1``,
    and whether they cover every such resource it serves in any version (discovery: a kind served
    only in a beta or alpha version, or a failed discovery, leaves ``--validate-releases auto``
    dry-running every release)."""
    from kubernetes import client

    #: The client's typed API per version of the group (a version it lacks cannot be read).
    version_apis = {"v1": "AdmissionregistrationV1Api", "v1beta1": "AdmissionregistrationV1beta1Api",
                    "v1alpha1": "AdmissionregistrationV1alpha1Api"}
    served: dict[str, set[str]] = {}
    try:
        group = client.AdmissionregistrationApi(api_client).get_api_group()
        for v in group.versions or ():
            api_class = getattr(client, version_apis.get(v.version, ""), None)
            if api_class is None:
                raise RuntimeError(f"admissionregistration.k8s.io/{v.version} is unknown to this Kubernetes client")
            resources = api_class(api_client).get_api_resources().resources or ()
            served[v.version] = {r.name for r in resources}
        watched, unwatched = refusers.watched_and_unwatched(served)
        adm = client.AdmissionregistrationV1Api(api_client)
        listers = {plural: getattr(adm, "list_" + _snake(refusers.ADMISSION_RESOURCES[plural]), None)
                   for plural in watched}
    except Exception as exc:  # noqa: BLE001
        log.warning("cannot tell which admission webhooks and policies could refuse release patches (discovery "
                    "failed: %s); every release patch is dry-run first", exc)
        return (), False
    unwatched += sorted(p for p, lister in listers.items() if lister is None)  # not in this client
    if unwatched:
        log.info("admission resources cogate cannot watch (%s: served only in a pre-release version, or unknown "
                 "to this client): every release patch is dry-run first", ", ".join(unwatched))
    informers = tuple(make(plural, admission_source(lister), name_key,
                           refusers.interceptors_of(refusers.ADMISSION_RESOURCES[plural]))
                      for plural, lister in listers.items() if lister is not None)
    return informers, not unwatched


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


def devices_api_problem(custom: Any) -> str:
    """Why DRA devices cannot be read ('' when they can): the API server must serve
    ``resource.k8s.io/v1`` (Kubernetes 1.34+) and RBAC must let cogate list its objects (the
    chart's ClusterRole does); a list of one ResourceSlice is the check."""
    try:
        custom.list_cluster_custom_object(devicesroom.API_GROUP, devicesroom.API_VERSION, "resourceslices", limit=1,
                                          _request_timeout=10)
        return ""
    except Exception as exc:  # noqa: BLE001
        from cogate.kube import api_status

        if api_status(exc) == 404:
            return f"the API server does not serve {devicesroom.API_GROUP}/{devicesroom.API_VERSION} (Kubernetes < 1.34)"
        if api_status(exc) == 403:
            return (f"RBAC does not let cogate list {devicesroom.API_GROUP} resourceslices (the chart's ClusterRole "
                    f"grants get/list/watch on {', '.join(devicesroom.RESOURCES)})")
        return f"cannot list {devicesroom.API_GROUP}/{devicesroom.API_VERSION} resourceslices: {exc}"


def _snake(kind: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in kind).lstrip("_")


def _lease_namespace(flag: str | None) -> str:
    return flag or kube.own_namespace("default")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logs.configure(args.log_level, args.log_format)
    from kubernetes import client

    try:
        api_client = kube.api_client(args.kubeconfig, pool_size=connection_pool_size(args.workers))
    except Exception as exc:  # noqa: BLE001
        log.error("cannot load Kubernetes client configuration: %s", exc)
        return 2
    core = client.CoreV1Api(api_client)
    custom = client.CustomObjectsApi(api_client)
    identity = f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
    stop = threading.Event()
    metrics = Metrics()

    def restarted(name: str):
        return lambda reason: metrics.watch_restarts.labels(name, reason).inc()

    def counted(name: str):
        return lambda type_: metrics.informer_events.labels(name, type_).inc()

    def make(name, source, key, convert) -> Informer:
        list_fn, watch_fn = source
        return Informer(name, list_fn, watch_fn, key, convert, on_watch_restart=restarted(name),
                        on_event=counted(name))

    ns = args.namespace
    caches = Caches(
        podgroups=make("podgroups", podgroup_source(custom, api.GROUP, api.VERSION, api.PLURAL, ns),
                       namespaced_key, group_object),
        members=make("members", pod_source(core, label_selector=api.POD_GROUP_LABEL, namespace=ns),
                     uid_key, records.pod_info),
        bound=make("bound-pods", pod_source(core, field_selector=BOUND_PODS_FIELD_SELECTOR), uid_key, records.pod_info),
        nodes=make("nodes", node_source(core), name_key, records.node_info),
        claims=make("persistentvolumeclaims", claim_source(core, ns), namespaced_key, volumes.claim_info),
        volumes=make("persistentvolumes", volume_source(core), name_key, volumes.volume_info),
        quotas=make("resourcequotas", resource_quota_source(core, ns), namespaced_key, quota.quota_info),
        nominated=make("nominated-pods", pod_source(core, field_selector=UNBOUND_PODS_FIELD_SELECTOR,
                                                        label_selector=NOMINATED_PODS_LABEL_SELECTOR), uid_key,
                       records.nominated_pod_info),
    )
    if args.preemption:
        caches.budgets = make("poddisruptionbudgets", budget_source(client.PolicyV1Api(api_client), ns),
                              namespaced_key, preemption.budget_info)
        caches.scheduler_lease = make("kube-scheduler-lease",
                                      lease_source(client.CoordinationV1Api(api_client), *inflight.SCHEDULER_LEASE),
                                      namespaced_key, inflight.scheduler_lease)
    if args.provisioning_class:
        problem = provisioning_api_problem(custom)
        if problem:
            log.error("--provisioning-class %s: %s", args.provisioning_class, problem)
            return 2
        if args.provisioning_class not in provreq.KNOWN_CLASSES:
            log.warning("--provisioning-class %s is not one cluster-autoscaler 1.36 knows (%s); cogate asks with it "
                        "anyway", args.provisioning_class, ", ".join(provreq.KNOWN_CLASSES))
        caches.provreqs = make("provisioningrequests",
                               podgroup_source(custom, provreq.GROUP, provreq.VERSION, provreq.PLURAL, ns,
                                               label_selector=provreq.GROUP_LABEL),
                               namespaced_key, provreq.request_info)
    problem = devices_api_problem(custom)
    if problem:
        log.warning("DRA devices are not modelled (%s): members with resource claims are unchecked "
                    "(--unchecked-constraints %s)", problem, args.unchecked_constraints)
    else:
        def dra(plural, key, convert):
            return make(plural, podgroup_source(custom, devicesroom.API_GROUP, devicesroom.API_VERSION, plural,
                                                ns if devicesroom.RESOURCES[plural] == "Namespaced" else None),
                        key, convert)

        caches.resource_slices = dra("resourceslices", name_key, devices.slice_devices)
        caches.device_classes = dra("deviceclasses", name_key, devices.device_class_info)
        caches.resource_claims = dra("resourceclaims", namespaced_key, devices.device_claim_info)
        caches.claim_templates = dra("resourceclaimtemplates", namespaced_key, devices.claim_template_info)
    if args.validate_releases == "auto":
        caches.admission, caches.admission_known = admission_informers(api_client, make)
    recorder = EventRecorder.for_core_api(core, host=identity,
                                          on_emit=lambda t, r: metrics.events.labels(t, r).inc())
    config = ReconcilerConfig(
        gate_name=args.gate_name, placement=args.placement, debounce=args.debounce, resync=args.resync,
        evict_on_timeout=args.evict_on_timeout, workers=args.workers,
        recreate_stuck_members=args.recreate_stuck_members, validate_releases=args.validate_releases,
        pod_disruption_budgets=args.pod_disruption_budgets, evict_below_quorum=args.evict_below_quorum,
        preemption=args.preemption, provisioning_class=args.provisioning_class,
        starvation_seconds=args.starvation_seconds, reservation_ttl_seconds=args.reservation_ttl,
        scheduler_names=frozenset({verdicts.DEFAULT_SCHEDULER, *args.scheduler_names}),
        unchecked=args.unchecked_constraints)
    reconciler = Reconciler(core, custom, caches, config, recorder=recorder, metrics=metrics,
                            policy=client.PolicyV1Api(api_client) if args.pod_disruption_budgets else None)

    def invalid(name: str, then=None):
        def on_invalid(raw, exc):
            metrics.invalid_objects.labels(name).inc()
            if then is not None:
                then(raw, exc)
        return on_invalid

    caches.podgroups.on_invalid = invalid("podgroups", reconciler.strays.invalid_podgroup)
    caches.members.on_invalid = invalid("members", reconciler.strays.invalid_member)
    caches.bound.on_invalid = invalid("bound-pods")
    caches.nodes.on_invalid = invalid("nodes")
    caches.claims.on_invalid = invalid("persistentvolumeclaims")  # type: ignore[union-attr]
    caches.volumes.on_invalid = invalid("persistentvolumes")  # type: ignore[union-attr]
    caches.quotas.on_invalid = invalid("resourcequotas")  # type: ignore[union-attr]
    caches.nominated.on_invalid = invalid("nominated-pods")  # type: ignore[union-attr]
    for name in devicesroom.RESOURCES:
        inf = {"resourceslices": caches.resource_slices, "deviceclasses": caches.device_classes,
               "resourceclaims": caches.resource_claims, "resourceclaimtemplates": caches.claim_templates}[name]
        if inf is not None:
            inf.on_invalid = invalid(name)
    if caches.budgets is not None:
        caches.budgets.on_invalid = invalid("poddisruptionbudgets")
    if caches.provreqs is not None:
        caches.provreqs.on_invalid = invalid("provisioningrequests")
    for inf in caches.all():
        inf.add_handler(reconciler.on_member_event if inf is caches.members else reconciler.enqueue)
    for inf in caches.admission:
        inf.add_handler(reconciler.enqueue)  # a pass logs what could refuse a release now
    if caches.scheduler_lease is not None:  # a new kube-scheduler leader: refresh the nominations in flight
        caches.scheduler_lease.add_handler(
            lambda kind, old, new: reconciler.preempting.on_scheduler_lease(kind, old, new) and reconciler.enqueue())

    def ready() -> bool:
        return all(i.has_synced for i in caches.all()) and not stop.is_set()

    try:
        server = serve(args.metrics_port, metrics, ready, host=args.metrics_host)
    except OSError as exc:
        log.error("cannot listen on port %s: %s", args.metrics_port, exc)
        return 2
    log.info("metrics on port %d; gate %r; placement %s", server.server_port, args.gate_name, args.placement)

    def on_signal(signum, _frame):
        log.info("signal %d: shutting down", signum)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    for inf in (*caches.all(), *caches.admission, *([caches.scheduler_lease] if caches.scheduler_lease else [])):
        inf.start(stop)
    recorder.start(stop)

    elector: LeaderElector | None = None
    # The elector has its own stop event: on SIGTERM it keeps renewing until the
    # reconcile loop has finished its pass, and only then gives the lease up.
    stop_elector = threading.Event()
    leading: Callable[[], bool]
    if args.leader_elect:
        from kubernetes.client import CoordinationV1Api

        def on_started() -> None:
            metrics.is_leader.set(1)
            reconciler.enqueue()

        elector = LeaderElector(CoordinationV1Api(api_client), _lease_namespace(args.leader_election_namespace),
                                identity, on_started=on_started, on_lost=exit_on_lost)
        elector.start(stop_elector)
        leading = elector.is_leader
    else:
        metrics.is_leader.set(1)
        leading = lambda: True  # noqa: E731

    loop = threading.Thread(target=_reconcile_when_synced, args=(reconciler, caches, stop, leading),
                            name="reconciler", daemon=True)
    loop.start()
    while not stop.is_set():
        stop.wait(1.0)
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
    server.shutdown()
    log.info("stopped")
    return 0


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
