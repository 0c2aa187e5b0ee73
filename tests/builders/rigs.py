"""Reconcilers wired to the fakes: :class:`Harness` (a scripted ``decide``) and :class:`World`
(the real planner)."""

from __future__ import annotations

import re

from cogate import api
from cogate.controller.kube.events import EventRecorder
from cogate.controller.kube.informer import Informer, uid_key
from cogate.controller.kube.metrics import Metrics
from cogate.controller.model import records
from cogate.controller.model.config import ReconcilerConfig
from cogate.controller.planning.planner import Decision, GroupVerdict
from cogate.controller.reconciler import Reconciler
from tests.builders.fakes import FakeCluster, StatusCluster, caches_from
from tests.builders.objects import GATE, NS, ready_node

#: A relayed Event's message (:func:`cogate.controller.release.relays.relayed`).
RELAYED = re.compile(r"PodGroup [^/\s]+/[^:\s]+: ")


class Harness:
    def __init__(self, pods, pgs, verdicts, *, placement="pinned", evict=False, now=1_704_067_300.0):
        self.cluster = FakeCluster(pods, pgs)
        #: Events as ``(type, reason, message)``, but those relayed to owners and members
        #: (:mod:`cogate.controller.release.relaying`), which are in ``relayed`` as ``(kind, name, type, reason, message)``.
        self.events: list[tuple[str, str, str]] = []
        self.relayed: list[tuple[str, str, str, str, str]] = []
        self.decide_calls: list[dict] = []
        self.verdicts = verdicts
        self.now = now
        pgs, nodes = list(self.cluster.pgs.values()), [ready_node(n) for n in ("n1", "n2", "n3")]
        caches = caches_from(lambda: pods, lambda: pgs, lambda: nodes)  # listed once, as given
        for inf in caches.all():
            inf._relist()
        self.caches = caches
        recorder = EventRecorder(self._event, lambda *a: None, clock=lambda: self.now)
        self.recorder = recorder
        self.rec = Reconciler(self.cluster, self.cluster, caches,
                              ReconcilerConfig(placement=placement, evict_on_timeout=evict, max_patch_attempts=4),
                              recorder=recorder, metrics=Metrics(), decide=self.decide,
                              clock=lambda: self.now, monotonic=lambda: self.now, sleep=lambda s: None)

    def _event(self, namespace, body):
        obj = body["involvedObject"]
        if obj["kind"] != "PodGroup" and RELAYED.match(body["message"]):
            self.relayed.append((obj["kind"], obj["name"], body["type"], body["reason"], body["message"]))
        else:
            self.events.append((body["type"], body["reason"], body["message"]))

    def decide(self, nodes, pods, groups, reservations, now, config):
        self.decide_calls.append({"nodes": nodes, "pods": pods, "groups": groups, "reservations": reservations})
        v = self.verdicts(groups) if callable(self.verdicts) else self.verdicts
        return Decision(verdicts=tuple(v), reservations=())

    def run(self):
        res = self.rec.reconcile_once()
        self.recorder.flush()
        return res


def verdict(outcome, release=None, fits=0, message="", name="pg"):
    return GroupVerdict(NS, name, outcome, release or {}, fits, message)


#: The time a :class:`World` starts at (2024-01-01T00:01:40Z), epoch seconds.
T0 = 1_704_067_300.0


class World:
    """A reconciler with the real planner over a :class:`StatusCluster` (``cluster_class``, or the
    ``cluster`` given: an instance is a restarted controller's world, the same one);
    :meth:`run` relists the informers from the fake first (the watch's view), runs one pass and
    relists again. Events are kept as ``(type, reason, involved object's name, message)``.

    ``nodes``: API JSON; ``preemption``, ``provisioning_class``, ``workers``: the flags;
    ``nominated``: the nominated-pods informer as ``controller/main.py`` has it; ``decide``: the
    planner entry (None: the reconciler's planning state)."""

    cluster_class: type[StatusCluster] = StatusCluster
    #: The PodGroup condition :meth:`condition` reads unless told.
    condition_type = "Preempting"

    def __init__(self, pods, pgs, *, nodes=(ready_node("n1", "4"),), preemption=True, provisioning_class=None,
                 workers=None, decide=None, nominated=False, cluster: StatusCluster | type[StatusCluster] | None = None,
                 now=T0, **more) -> None:
        self._args = dict(nodes=nodes, preemption=preemption, provisioning_class=provisioning_class,
                          workers=workers, decide=decide, nominated=nominated, **more)
        self.now = now
        if isinstance(cluster, StatusCluster):
            self.cluster = cluster
        else:
            self.cluster = (cluster or self.cluster_class)(pods, pgs, list(nodes), lambda: self.now)
        c = self.cluster
        self.events: list[tuple[str, str, str, str]] = []
        self.caches = caches_from(lambda: list(c.pods.values()), lambda: list(c.pgs.values()),
                                  lambda: list(c.nodes.values()))
        if nominated:  # as controller/main.py has it: unbound pods with a nomination promise room
            # controller/core.py's selector: unbound pods outside every group (a gang's own members'
            # nominations are cogate's preemption plan, held as its room, not promised to others)
            self.caches.nominated = Informer(
                "nominated", lambda: ([p for p in c.pods.values() if not p["spec"].get("nodeName")
                                       and api.POD_GROUP_LABEL not in p["metadata"]["labels"]], "1"),
                lambda rv: iter(()), uid_key, records.nominated_pod_info)
        self.more_caches(**more)
        self.relist()
        self.recorder = EventRecorder(
            lambda ns, b: self.events.append((b["type"], b["reason"], b["involvedObject"]["name"], b["message"])),
            lambda *a: None, clock=lambda: self.now)
        self.metrics = Metrics()
        flags = {"provisioning_class": provisioning_class} if provisioning_class else {}
        flags |= {"workers": workers} if workers else {}
        self.rec = Reconciler(c, c, self.caches, ReconcilerConfig(preemption=preemption, max_patch_attempts=2, **flags),
                              recorder=self.recorder, metrics=self.metrics, clock=lambda: self.now,
                              monotonic=lambda: self.now, sleep=lambda s: None, decide=decide)
        self.caches.members.add_handler(self.rec.on_member_event)  # as controller/main.py does

    def more_caches(self, **more) -> None:
        """A subclass's further informers (over ``self.cluster``), set on ``self.caches``; ``more``:
        the subclass's own keyword arguments."""
        assert not more, more

    def restarted(self) -> "World":
        """A new process (fresh caches, memory and metrics) on the same cluster, at the same time."""
        return type(self)([], [], cluster=self.cluster, now=self.now, **self._args)

    def relist(self) -> None:
        for inf in self.caches.all():
            inf._relist()

    def run(self, dt: float = 0.0) -> None:
        self.now += dt
        self.relist()
        self.rec.reconcile_once()
        self.recorder.flush()
        self.relist()

    def bind(self, name: str, node_name: str | None = None) -> None:
        """kube-scheduler binds a released member to the node it is pinned to (or ``node_name``)."""
        p = self.cluster.pods[name]
        assert not p["spec"].get("schedulingGates"), f"{name} is still gated"
        p["spec"]["nodeName"] = node_name or pinned(p)
        p["status"]["phase"] = "Running"
        self.cluster._bump(p)

    def gated(self, name: str) -> bool:
        """Pod ``name`` still carries cogate's gate."""
        return GATE in [g["name"] for g in self.cluster.pods[name]["spec"].get("schedulingGates") or ()]

    def condition(self, pg: str = "pg", type_: str | None = None) -> dict | None:
        """PodGroup ``pg``'s condition ``type_`` (:attr:`condition_type` unless given), None without one."""
        type_ = type_ or self.condition_type
        return next((c for c in self.cluster.pgs[pg]["status"].get("conditions", []) if c["type"] == type_), None)

    def metric(self, name, **labels) -> float:
        return self.metrics.registry.get_sample_value(name, labels) or 0.0

    def reasons(self, reason: str) -> list[tuple[str, str, str, str]]:
        """The Events of ``reason``."""
        return [e for e in self.events if e[1] == reason]


def pinned(p: dict) -> str:
    """The node a released pod is pinned to (its required node affinity's ``metadata.name In``)."""
    terms = p["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    (value,) = {v for t in terms for f in t.get("matchFields", ()) if f["operator"] == "In" for v in f["values"]}
    return value
