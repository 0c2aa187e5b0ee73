"""Prometheus metrics of the controller and its HTTP endpoint (``/metrics``, ``/healthz``, ``/readyz``).

Every metric lives in the :class:`Metrics` instance's own ``CollectorRegistry`` (tests
create several controllers in one process). Names are prefixed ``cogate_controller_``;
durations are seconds. A fresh registry also gets ``cogate_build_info`` and the process metrics
(:func:`cogate.metrics.register_common`, as the webhook's). The list of every metric is
docs/reference/metrics.md (generated: ``make docs``).

Waiting gangs (:class:`WaitingCollector`): ``cogate_controller_groups_waiting{reason}`` and
``cogate_controller_group_oldest_wait_seconds{reason}``, from the statuses each pass computes
(:mod:`cogate.controller.status.waiting`); the age is taken at scrape time, so it grows between
passes. Only the leader runs passes: a follower exports zeros (it exits when it loses the lease).
No label names a group (bounded cardinality); ``kubectl get pg -A`` lists them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from cogate.controller.status.waiting import ReasonSummary, ages, summarize
from cogate.metrics import register_common

from cogate import listen

log = logging.getLogger(__name__)

_P = "cogate_controller_"
#: Buckets for the group-complete -> release latency (seconds).
RELEASE_LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 3600)
#: Buckets for the path from a group's last member to its release inside the controller (seconds).
ARRIVAL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16)


class WaitingCollector(Collector):
    """``cogate_controller_groups_waiting{reason}`` and ``cogate_controller_group_oldest_wait_seconds{reason}``
    from the last pass's summary (:meth:`update`); every reason of
    :data:`cogate.controller.status.waiting.REASONS` is exported (0 when none waits so). ``clock``:
    epoch seconds, read at each scrape. Thread-safe: a pass replaces the summary as a whole."""

    labelnames = ("reason",)
    WAITING = _P + "groups_waiting"
    OLDEST = _P + "group_oldest_wait_seconds"

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._summary: dict[str, ReasonSummary] = summarize(())

    def update(self, summary: dict[str, ReasonSummary]) -> None:
        self._summary = summary

    def describe(self):
        return [GaugeMetricFamily(self.WAITING, _WAITING_HELP, labels=self.labelnames),
                GaugeMetricFamily(self.OLDEST, _OLDEST_HELP, labels=self.labelnames)]

    def collect(self):
        summary = self._summary
        waiting, oldest = self.describe()
        for reason, age in ages(summary, self._clock()).items():
            waiting.add_metric([reason], summary[reason].count)
            oldest.add_metric([reason], age)
        return [waiting, oldest]


_WAITING_HELP = ("PodGroups whose gang is held gated (Released=False), by the condition's reason "
                 "(WaitingForMembers, InsufficientCapacity, Unschedulable, ReleaseRefused); as of the last pass.")
_OLDEST_HELP = ("How long the longest-waiting PodGroup of each reason has waited (seconds since its "
                "Released=False lastTransitionTime, at scrape time; 0 when none waits).")


class Metrics:
    """The controller's metrics (see each attribute's help text). A ``registry`` passed in gets
    only the controller's own metrics; a fresh one also the build info and process metrics."""

    def __init__(self, registry: CollectorRegistry | None = None, clock: Callable[[], float] = time.time) -> None:
        fresh = registry is None
        r = self.registry = registry or CollectorRegistry()
        if fresh:
            self.build_info = register_common(r)
        self.waiting = WaitingCollector(clock)
        r.register(self.waiting)
        self.decisions = Counter(_P + "decisions", "Reconcile passes (planner decisions) run.", registry=r)
        self.decision_errors = Counter(_P + "decision_errors", "Reconcile passes that failed.", registry=r)
        self.decision_seconds = Histogram(_P + "decision_duration_seconds",
                                          "Time spent in planner.decide per pass (seconds).", registry=r)
        self.pass_seconds = Histogram(_P + "reconcile_duration_seconds",
                                      "Time of a whole reconcile pass incl. writes (seconds).", registry=r)
        self.releases = Counter(_P + "releases", "PodGroups released.", registry=r)
        self.gate_removals = Counter(_P + "gate_removals", "Scheduling gate removals by result "
                                     "(removed, absent, not_found, skipped, refused, failed, stopped: not sent on "
                                     "shutdown; native: a pod native gang scheduling takes).", ["result"], registry=r)
        self.complete_to_release = Histogram(
            _P + "group_complete_to_release_seconds",
            "From the moment minMember members were present (as seen by this process) to the release (seconds).",
            buckets=RELEASE_LATENCY_BUCKETS, registry=r)
        self.arrival_to_release = Histogram(
            _P + "arrival_to_release_seconds",
            "From the members-informer event that completed a group (its gated members reached minMember) to "
            "each step of the pass that released it, by step: pass_started, planned (the verdict known), "
            "released (status written and gates sent) (seconds).",
            ["step"], buckets=ARRIVAL_BUCKETS, registry=r)
        self.informer_events = Counter(_P + "informer_events", "Watch events received, by informer and type.",
                                       ["informer", "type"], registry=r)
        self.watch_restarts = Counter(_P + "watch_restarts", "Watch reconnects, by informer and reason (gone, error).",
                                      ["informer", "reason"], registry=r)
        self.invalid_objects = Counter(_P + "invalid_objects", "Objects that failed conversion, by informer.",
                                       ["informer"], registry=r)
        self.groups = Gauge(_P + "podgroups", "PodGroups by status phase.", ["phase"], registry=r)
        self.reservations = Gauge(_P + "reservations", "Capacity reservations held for released, unbound members.",
                                  registry=r)
        self.nominated_pods = Gauge(_P + "nominated_pods", "Unbound pods kube-scheduler nominated a node for, whose "
                                    "room the planner holds (room promised).", registry=r)
        self.events = Counter(_P + "events", "Kubernetes Events recorded, by type and reason.", ["type", "reason"],
                              registry=r)
        self.evictions = Counter(_P + "evictions", "Members evicted after a schedule timeout, by result.",
                                 ["result"], registry=r)
        self.stuck_deletions = Counter(_P + "stuck_member_deletions", "Released members deleted because their "
                                       "pinned node can no longer take them, by result.", ["result"], registry=r)
        self.release_refusals = Counter(_P + "release_refusals", "Release patches the API server refused, by "
                                        "stage (dry_run, patch).", ["stage"], registry=r)
        self.recovery_evictions = Counter(_P + "recovery_evictions", "Members evicted by a round of a PodGroup's "
                                          "recovery deadline (annotation cogate.dev/recovery-deadline).", registry=r)
        self.recovery_rounds = Counter(_P + "recovery_rounds", "Rounds of PodGroups' recovery deadlines, by what "
                                       "they did (evicted; failed: the limit was reached).", ["action"], registry=r)
        self.members_lost = Counter(_P + "members_lost", "Members that left a released group (deleted, evicted, "
                                    "preempted, failed).", registry=r)
        self.status_fields_dropped = Counter(
            _P + "status_fields_dropped", "PodGroup status fields the API server dropped from cogate's status writes "
            "(a CRD whose schema prunes them, e.g. scheduler-plugins' CRD), by field.", ["field"], registry=r)
        self.foreign_status_writers = Gauge(
            _P + "foreign_status_writers", "PodGroups whose status another field manager also writes "
            "(e.g. scheduler-plugins' PodGroup controller).", registry=r)
        self.status_writes = Counter(_P + "status_writes", "PodGroup status patches by result (ok, error).",
                                     ["result"], registry=r)
        self.owner_reads = Counter(_P + "owner_reads", "Reads of waiting groups' member owners (Jobs, ReplicaSets, "
                                   "StatefulSets; MPIJobs, JobSets) by kind and result (ok, not_found, invalid, "
                                   "error).",
                                   ["kind", "result"], registry=r)
        self.preemptions = Counter(_P + "preemptions", "Gang preemptions by result (started; then how each "
                                   "ended: Placed, VictimsStuck, NominationLost, PlanChanged, "
                                   "DoesNotFitAfterPreemption, Superseded, PodGroupDeleted; Resumed: rebuilt by a new "
                                   "process).", ["result"], registry=r)
        self.nomination_refreshes = Counter(_P + "preemption_nomination_refreshes", "Writes refreshing the "
                                            "nomination of a member cogate preempts for, so that a kube-scheduler "
                                            "started since counts it, by result (ok, gone, failed).", ["result"],
                                            registry=r)
        self.preemption_victims = Counter(_P + "preemption_victims", "Pods cogate preempted for a gang, by "
                                          "result of the delete (deleted, gone, failed).", ["result"], registry=r)
        self.provisioning_requests = Counter(
            _P + "provisioning_requests", "ProvisioningRequests cogate made for waiting gangs, by what happened "
            "(created, create_failed, provisioned, failed, booking_expired, capacity_taken, consumed, not_needed).", ["result"],
            registry=r)
        self.provisioning_seconds = Histogram(
            _P + "provisioning_request_provisioned_seconds",
            "From a ProvisioningRequest's creation to its Provisioned=True condition (seconds).",
            buckets=(1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600), registry=r)
        self.is_leader = Gauge(_P + "leader", "1 while this process holds the leader Lease.", registry=r)
        self.cluster_features = Gauge(_P + "cluster_feature_supported", "1 when the API server's Kubernetes release "
                                      "supports the feature, 0 when it is too old (read once at start; "
                                      "docs/reference/releases.md).", ["feature"], registry=r)

    def observe_waiting(self, summary: dict[str, ReasonSummary]) -> None:
        """The waiting groups of a pass (:func:`cogate.controller.status.waiting.summarize`)."""
        self.waiting.update(summary)

    def render(self) -> bytes:
        return generate_latest(self.registry)


def serve(port: int, metrics: Metrics, ready: Callable[[], bool], host: str = listen.ANY) -> ThreadingHTTPServer:
    """Serve ``/metrics``, ``/healthz`` (200 while the process serves) and ``/readyz``
    (200 when ``ready()``, else 503) on ``host:port`` in a daemon thread; returns the server
    (``shutdown()`` it to stop). ``port`` 0 picks a free port (``server.server_port``). ``host``
    :data:`cogate.listen.ANY` (default): every address of both IP families. Raises ``OSError``
    when the port cannot be bound.
    """

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server API
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._send(200, metrics.render(), CONTENT_TYPE_LATEST)
            elif path == "/healthz":
                self._send(200, b"ok\n")
            elif path == "/readyz":
                ok = False
                try:
                    ok = bool(ready())
                except Exception:  # noqa: BLE001
                    log.exception("readiness check failed")
                self._send(200 if ok else 503, b"ok\n" if ok else b"not ready\n")
            else:
                self._send(404, b"not found\n")

        def _send(self, code: int, body: bytes, ctype: str = "text/plain; charset=utf-8") -> None:
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            log.debug("http: " + format, *args)

    sock = listen.listening_socket(host, port)
    server = ThreadingHTTPServer(sock.getsockname()[:2], Handler, bind_and_activate=False)
    server.socket.close()
    server.socket, server.address_family = sock, sock.family  # bound and listening (cogate.listen)
    server.server_address = sock.getsockname()
    server.server_name, server.server_port = server.server_address[0], server.server_address[1]
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True).start()
    return server
